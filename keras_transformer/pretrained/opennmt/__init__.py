"""The OpenNMT-py format: an OpenNMT-py (v3) Transformer checkpoint as a translation model.

Its parts: settings.py reads the checkpoint (torch's weights-only loader: no code from the
file runs) and turns its options into a `TransformerConfig`; here, its tensors, its
tensor-name map and its tokenizer (the SentencePiece models of its `sentencepiece` transform,
ids from the vocabularies stored in the checkpoint).

Separate source and target vocabularies become one list of pieces: the target's, then the
source pieces it lacks. The source embedding is re-indexed to it (a piece the source
vocabulary lacks gets its `<unk>` row, as OpenNMT-py maps it), and the added ids get zero
output weights and a logit bias of -1e9, so that they are never produced.
"""

import glob
import os

import numpy as np

from keras_transformer.pretrained.opennmt.settings import (
    UNK,
    OpenNMTImportError,
    read_checkpoint,
    read_settings,
    special_ids,
    transformer_config,
)
from keras_transformer.pretrained.state_dict import StateDict
from keras_transformer.pretrained.tensor_names import (
    LayerNames,
    final_norm_names,
    layer_tensor_names,
)
from keras_transformer.pretrained.torch_checkpoint import peek_strings
from keras_transformer.pretrained.weight_setter import (
    Tensor,
    check_position_tables,
    set_weights,
)

NAME = "opennmt"
FOLDER_HINT = "an OpenNMT-py checkpoint folder (one *.pt)"
MISSING_HINT = "an OpenNMT-py checkpoint folder (no *.pt)"
# The keys only an OpenNMT-py checkpoint's pickle names together.
CHECKPOINT_KEYS = {"generator", "vocab", "opt", "model"}
EMBEDDING = "{stack}.embeddings.make_embedding.emb_luts.0.weight"
POSITIONS = "{stack}.embeddings.make_embedding.pe.pe"
OPENNMT_LAYERS = LayerNames(
    "encoder.transformer.{i}",
    "decoder.transformer_layers.{i}",
    {
        "self_attention": "self_attn",
        "encoder.self_attention_norm": "layer_norm",
        "decoder.self_attention_norm": "layer_norm_1",
        "cross_attention": "context_attn",
        "cross_attention_norm": "layer_norm_2",
        "feed_forward.inner": "feed_forward.w_1",
        "feed_forward.output": "feed_forward.w_2",
        "feed_forward_norm": "feed_forward.layer_norm",
    },
    {
        "query": "linear_query",
        "key": "linear_keys",
        "value": "linear_values",
        "output": "final_linear",
    },
)
# Transforms that change text at inference, and those that only act in training.
SENTENCEPIECE = "sentencepiece"
TRAINING_ONLY = {"filtertoolong", "clean", "switchout", "tokendrop", "tokenmask", "bart"}
# The rows of a stored sinusoid compared with ours.
CHECKED_POSITIONS = 512
# The logit of an id added for the source's pieces: never produced.
NEVER = -1e9


def is_checkpoint(path):
    """Whether a `.pt` file names OpenNMT-py's checkpoint keys (read without unpickling)."""
    return os.fspath(path).endswith(".pt") and peek_strings(path) >= CHECKPOINT_KEYS


def accepts_file(path):
    """Whether a file given as a model is an OpenNMT-py checkpoint."""
    return is_checkpoint(path)


def find_in_folder(name, folder):
    """The OpenNMT-py checkpoint of a folder, or None (a fairseq folder has `dict.*.txt`).

    Raises:
        ValueError: several checkpoints in it.
    """
    if glob.glob(os.path.join(glob.escape(folder), "dict.*.txt")):
        return None
    checkpoints = sorted(glob.glob(os.path.join(glob.escape(folder), "*.pt")))
    checkpoints = [path for path in checkpoints if is_checkpoint(path)]
    if len(checkpoints) > 1:
        names = ", ".join(os.path.basename(path) for path in checkpoints)
        raise ValueError(f"{name}: several OpenNMT-py checkpoints ({names}); name one")
    return checkpoints[0] if checkpoints else None


def _numpy(state, prefix=""):
    return {
        f"{prefix}{name}": value.detach().float().cpu().numpy() for name, value in state.items()
    }


def joint_vocabulary(vocab):
    """The target's pieces, then the source pieces it lacks."""
    target = list(vocab["tgt"])
    known = set(target)
    return target + [piece for piece in vocab["src"] if piece not in known]


def read_tensors(checkpoint, vocabulary, path):
    """The checkpoint's tensors as a `StateDict`, embeddings and generator on `vocabulary`."""
    generator = {name.removeprefix("0."): value for name, value in checkpoint["generator"].items()}
    arrays = {**_numpy(checkpoint["model"]), **_numpy(generator, "generator.")}
    target, source = (EMBEDDING.format(stack=stack) for stack in ("decoder", "encoder"))
    for name in (target, source, "generator.weight"):
        if name not in arrays:
            raise OpenNMTImportError(f"{path}: no tensor {name!r}")
    extra = len(vocabulary) - len(checkpoint["vocab"]["tgt"])
    if extra:
        pieces = {piece: index for index, piece in enumerate(checkpoint["vocab"]["src"])}
        rows = [pieces.get(piece, pieces.get(UNK, 0)) for piece in vocabulary]
        arrays[source] = arrays[source][rows]
        for name in (target, "generator.weight"):
            arrays[name] = np.concatenate([arrays[name], np.zeros((extra, arrays[name].shape[1]))])
        bias = arrays.get("generator.bias", np.zeros(len(checkpoint["vocab"]["tgt"])))
        arrays["generator.bias"] = np.concatenate([bias, np.full(extra, NEVER)])
    return StateDict(arrays, path)


def _shapes(tensors, settings, separate):
    prefix = "encoder.transformer.0"
    return {
        "d_model": int(tensors.tensors[EMBEDDING.format(stack="decoder")].shape[1]),
        "intermediate_dim": int(tensors.tensors[f"{prefix}.feed_forward.w_1.weight"].shape[0])
        if f"{prefix}.feed_forward.w_1.weight" in tensors
        else int(settings.get("transformer_ff", 2048)),
        "attention_bias": f"{prefix}.self_attn.linear_query.bias" in tensors,
        "logits_bias": "generator.bias" in tensors,
        "separate_source": separate,
        "feed_forward_bias": f"{prefix}.feed_forward.w_1.bias" in tensors,
    }


def tensor_names(config, feed_forward_bias=True):
    """OpenNMT-py's tensor-name map of a model of `config` (see weight_setter.py).

    Args:
        config: the model's `TransformerConfig`.
        feed_forward_bias: bool, whether the checkpoint has feed-forward biases
            (`add_ffnbias`); without, ours are zero, which computes the same.
    """
    names = {"target_embedding": Tensor(EMBEDDING.format(stack="decoder"))}
    if not config.share_embeddings:
        names["source_embedding"] = Tensor(EMBEDDING.format(stack="encoder"))
    if not config.tie_output_projection:
        names["output_projection"] = Tensor("generator.weight", "linear")
    if config.final_logits_bias:
        names["logits_bias"] = Tensor("generator.bias")
    names.update(final_norm_names("encoder.layer_norm", "decoder.layer_norm"))
    layers = layer_tensor_names(config, OPENNMT_LAYERS)
    if not feed_forward_bias:
        layers = {
            path: Tensor(None, "zeros")
            if path.endswith(("feed_forward.inner.bias", "feed_forward.output.bias"))
            else tensor
            for path, tensor in layers.items()
        }
    names.update(layers)
    return names


def _drop_copies(tensors, config):
    """Tied tensors are saved twice: the copies must be equal, and are dropped."""
    target = tensors.tensors[EMBEDDING.format(stack="decoder")]
    pairs = [("generator.weight", config.tie_output_projection)]
    pairs.append((EMBEDDING.format(stack="encoder"), config.share_embeddings))
    for name, tied in pairs:
        if tied and not np.array_equal(tensors.take(name), target):
            raise OpenNMTImportError(
                f"{tensors.source}: {name} differs from the decoder embedding it is tied to"
            )


def _subword_model(given, recorded, path, side):
    """The SentencePiece model of one side: the one given, or the one the options name."""
    if given:
        if not os.path.isfile(given):
            raise FileNotFoundError(2, "No such file", os.fspath(given))
        return os.fspath(given)
    if not recorded:
        raise OpenNMTImportError(
            f"{path}: the checkpoint names no {side} SentencePiece model; name it "
            f"(--{side}-subword-model)"
        )
    beside = os.path.join(os.path.dirname(path), os.path.basename(str(recorded)))
    for candidate in (str(recorded), beside):
        if os.path.isfile(candidate):
            return candidate
    raise OpenNMTImportError(
        f"{path}: the checkpoint's {side} SentencePiece model {recorded} is not found (nor "
        f"beside the checkpoint); name it (--{side}-subword-model)"
    )


def read_tokenizer(settings, vocabulary, ids, path, src_subword_model=None, tgt_subword_model=None):
    """The `JointVocabularyTokenizer` of the checkpoint's SentencePiece models and pieces."""
    from keras_transformer.text.joint_vocabulary_tokenizer import JointVocabularyTokenizer
    from keras_transformer.text.sentencepiece_file import read_sentencepiece_model

    transforms = [str(name) for name in settings.get("transforms") or []]
    unsupported = [name for name in transforms if name not in TRAINING_ONLY | {SENTENCEPIECE}]
    if unsupported:
        raise OpenNMTImportError(
            f"{path}: the transforms {', '.join(unsupported)} are not supported (only "
            f"{SENTENCEPIECE}, with its models' pieces in the vocabularies)"
        )
    if SENTENCEPIECE not in transforms and not src_subword_model:
        raise OpenNMTImportError(
            f"{path}: the checkpoint's transforms ({', '.join(transforms) or 'none'}) hold no "
            f"{SENTENCEPIECE}; name the SentencePiece model (--src-subword-model)"
        )
    source = _subword_model(src_subword_model, settings.get("src_subword_model"), path, "src")
    target = _subword_model(
        tgt_subword_model or (source if src_subword_model else None),
        settings.get("tgt_subword_model") or source,
        path,
        "tgt",
    )
    protos = [read_sentencepiece_model(file, "a SentencePiece model") for file in (source, target)]
    try:
        return JointVocabularyTokenizer(*protos, vocabulary, **ids)
    except ValueError as error:
        raise OpenNMTImportError(f"{path}: {error}") from None


def opennmt_translation_model(path, *, src_subword_model=None, tgt_subword_model=None):
    """The model and tokenizer of an OpenNMT-py checkpoint, in memory (nothing written).

    Args:
        path: str or path-like, the `.pt` checkpoint.
        src_subword_model, tgt_subword_model: SentencePiece models; default:
            the ones the checkpoint's options name (or their names beside it).

    Returns:
        `(model, tokenizer)`: a `Seq2SeqTransformer` and its `JointVocabularyTokenizer`.

    Raises:
        OpenNMTImportError: a checkpoint the model cannot represent; one line.
        OSError, ImportError: a file cannot be read; torch is missing.

    Example:

    >>> model, tokenizer = opennmt_translation_model("averaged-10-epoch.pt")
    """
    from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "No such file", path)
    checkpoint = read_checkpoint(path)
    settings = read_settings(checkpoint, path)
    vocab = checkpoint["vocab"]
    vocabulary = joint_vocabulary(vocab)
    ids = special_ids(vocab, "tgt", path)
    tensors = read_tensors(checkpoint, vocabulary, path)
    separate = not settings["share_embeddings"]
    shapes = _shapes(tensors, settings, separate)
    config = transformer_config(settings, shapes, len(vocabulary), ids["pad_id"], path)
    if len(vocabulary) > len(vocab["tgt"]) and not config.final_logits_bias:
        raise OpenNMTImportError(f"{path}: no generator.bias")  # read_tensors adds one
    tokenizer = read_tokenizer(
        settings, vocabulary, ids, path, src_subword_model, tgt_subword_model
    )
    model = Seq2SeqTransformer(config, dtype="float32")
    model.build()
    _drop_copies(tensors, config)
    names = tuple(POSITIONS.format(stack=stack) for stack in ("encoder", "decoder"))
    what = "the sinusoid of position_encoding_type"
    check_position_tables(model, tensors, names, what, CHECKED_POSITIONS)
    set_weights(model, tensor_names(config, shapes["feed_forward_bias"]), tensors)
    return model, tokenizer


def translation_model(path):
    """`(model, tokenizer)` of a checkpoint, its SentencePiece models found as recorded."""
    return opennmt_translation_model(path)


def import_opennmt(checkpoint_path, output_path, *, src_subword_model=None, tgt_subword_model=None):
    """Writes an OpenNMT-py (v3) Transformer checkpoint as a `save_translation_model` file.

    The checkpoint is read with torch's weights-only loader: no code from it
    runs, and OpenNMT-py is not needed. The model computes OpenNMT-py's
    logits: pre-LN blocks with final LayerNorms, its sinusoid, embeddings
    scaled by sqrt(d_model), the generator's bias. OpenNMT-py adds no `</s>`
    to sources: the model's `source_eos` is False, which translation and the
    exports follow.

    Args:
        checkpoint_path: str or path-like, the `.pt` file.
        output_path: str or path-like ending in `.keras`, written atomically.
        src_subword_model, tgt_subword_model: as `opennmt_translation_model`.

    Returns:
        `(model, tokenizer)`, as written.

    Raises:
        OpenNMTImportError, OSError, ImportError: as `opennmt_translation_model`.

    Example:

    >>> import_opennmt("averaged-10-epoch.pt", "en-de.keras")
    """
    from keras_transformer.export.save_translation_model import save_translation_model

    if not str(output_path).endswith(".keras"):
        raise OpenNMTImportError(f"the output must be a .keras file. Received: {output_path}")
    model, tokenizer = opennmt_translation_model(
        checkpoint_path, src_subword_model=src_subword_model, tgt_subword_model=tgt_subword_model
    )
    save_translation_model(model, tokenizer, os.fspath(output_path))
    return model, tokenizer
