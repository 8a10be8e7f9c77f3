"""fairseq's tensors: its state dict under current names, and its tensor-name map."""

import re

import numpy as np

from keras_transformer.pretrained.fairseq.settings import FairseqImportError
from keras_transformer.pretrained.state_dict import StateDict
from keras_transformer.pretrained.tensor_names import (
    bart_layer_names,
    final_norm_names,
    layer_tensor_names,
)
from keras_transformer.pretrained.weight_setter import Tensor, set_weights

FAIRSEQ_LAYERS = bart_layer_names("encoder", "decoder")
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


def _check_tied(tensors, config):
    """The tensors fairseq ties must be equal; the copies are dropped."""
    source = tensors.tensors["encoder.embed_tokens.weight"]
    target = tensors.tensors["decoder.embed_tokens.weight"]
    if config.share_embeddings:
        if not np.array_equal(source, target):
            raise FairseqImportError(
                "share_all_embeddings is set but the encoder and decoder embeddings differ"
            )
        tensors.take("encoder.embed_tokens.weight")
    output = "decoder.output_projection.weight"
    tied = config.tie_output_projection and output in tensors
    if tied and not np.array_equal(tensors.take(output), target):
        raise FairseqImportError(
            "share_decoder_input_output_embed is set but decoder.output_projection.weight "
            "differs from decoder.embed_tokens.weight"
        )


def tensor_names(config):
    """fairseq's tensor-name map of a model of `config` (see weight_setter.py)."""
    names = {"target_embedding": Tensor("decoder.embed_tokens.weight")}
    if not config.share_embeddings:
        names["source_embedding"] = Tensor("encoder.embed_tokens.weight")
    if not config.tie_output_projection:
        names["output_projection"] = Tensor("decoder.output_projection.weight", "linear")
    if config.position_embedding == "learned":
        # fairseq's rows from padding_idx + 1 on: its first position's.
        for stack, path in (("encoder", "source_positions"), ("decoder", "target_positions")):
            names[path] = Tensor(f"{stack}.embed_positions.weight", start_row=config.pad_id + 1)
    if config.normalize_first:
        names.update(final_norm_names("encoder.layer_norm", "decoder.layer_norm"))
    names.update(layer_tensor_names(config, FAIRSEQ_LAYERS))
    return names


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
    for name in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
        if name not in tensors:
            raise ValueError(f"{source}: no tensor {name!r}")
    _check_tied(tensors, model.config)
    set_weights(model, tensor_names(model.config), tensors)
