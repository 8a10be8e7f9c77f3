"""A fairseq `transformer` state dict, by fairseq's names, into a `Seq2SeqTransformer`."""

import re

import numpy as np

from keras_transformer.pretrained.fairseq_model import FairseqImportError
from keras_transformer.pretrained.layer_weights import StateDict, assign, set_layers, set_norm

# Entries that hold no weights of the model: buffers and version markers.
_IGNORED = re.compile(r"(^|\.)version$|\.embed_positions\.(_float_tensor|weights)$")


def _as_numpy(value):
    if hasattr(value, "detach"):  # a torch tensor, bfloat16/float16 included
        value = value.detach().float().cpu().numpy()
    return np.asarray(value, dtype="float32")


def normalized_state(state):
    """The state dict as float32 arrays under current fairseq names.

    Older checkpoints store the attention's query, key and value projections
    as one `in_proj_weight` (rows q, k, v), the encoder layer norms as
    `layer_norms.0` / `layer_norms.1`, and an untied output matrix as
    `decoder.embed_out`; fairseq renames them on load
    (`upgrade_state_dict_named`), and so does this function.
    """
    arrays = {}
    for name, value in state.items():
        if _IGNORED.search(name):
            continue
        array = _as_numpy(value)
        fused = re.match(r"(.*)\.in_proj_(weight|bias)$", name)
        if fused:
            for part, piece in zip(("q", "k", "v"), np.split(array, 3, axis=0), strict=True):
                arrays[f"{fused.group(1)}.{part}_proj.{fused.group(2)}"] = piece
            continue
        for index, norm in enumerate(("self_attn_layer_norm", "final_layer_norm")):
            name = re.sub(rf"^(encoder\.layers\.\d+)\.layer_norms\.{index}\.", rf"\1.{norm}.", name)
        if name == "decoder.embed_out":
            name = "decoder.output_projection.weight"
        arrays[name] = array
    return arrays


def _embeddings(tensors, model):
    config = model.config
    target = tensors.take("decoder.embed_tokens.weight")
    source = tensors.take("encoder.embed_tokens.weight")
    if config.share_embeddings:
        if not np.array_equal(source, target):
            raise FairseqImportError(
                "share_all_embeddings is set but the encoder and decoder embeddings differ"
            )
    else:
        assign(model.source_embedding.embeddings, source, "encoder.embed_tokens.weight")
    assign(model.target_embedding.embeddings, target, "decoder.embed_tokens.weight")
    output = "decoder.output_projection.weight"
    if not config.tie_output_projection:
        assign(model.output_projection.kernel, tensors.take(output).T, output)
    elif output in tensors and not np.array_equal(tensors.take(output), target):
        raise FairseqImportError(
            "share_decoder_input_output_embed is set but decoder.output_projection.weight "
            "differs from decoder.embed_tokens.weight"
        )


def assign_fairseq_weights(model, state, source="the checkpoint"):
    """Copies a fairseq state dict into a built `Seq2SeqTransformer`.

    Args:
        model: a `Seq2SeqTransformer` of `transformer_config(...)`, built.
        state: the checkpoint's "model" dict (torch tensors or arrays).
        source: the checkpoint's name, for messages.

    Raises:
        ValueError: a weight missing, of another shape, or left over (a
            module the model does not have); the message names it.
    """
    tensors = StateDict(normalized_state(state), source)
    _embeddings(tensors, model)
    set_layers(model, tensors, "encoder", "decoder")
    if model.config.position_embedding == "learned":
        for stack, layer in (
            ("encoder", model.source_position_embedding),
            ("decoder", model.target_position_embedding),
        ):
            name = f"{stack}.embed_positions.weight"
            # fairseq's rows from padding_idx + 1 on: its first position's.
            table = tensors.take(name)[model.config.pad_id + 1 :]
            assign(layer.position_embeddings, table, name)
    if model.encoder_final_norm is not None:
        set_norm(model.encoder_final_norm, tensors, "encoder.layer_norm")
        set_norm(model.decoder_final_norm, tensors, "decoder.layer_norm")
    tensors.check_all_used()
