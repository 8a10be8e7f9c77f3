"""`export_ctranslate2`: the model as a CTranslate2 directory, for CPU and GPU serving."""

import os
import shutil
import uuid

import keras
import numpy as np

from keras_transformer.export.ctranslate2_support import QUANTIZATIONS, import_ctranslate2
from keras_transformer.export.export_saved_model import _replace_directory
from keras_transformer.text.subword_tokenizer import MODEL_FILE

# Positions written for sinusoidal models: CTranslate2's default `max_input_length`, so that
# any source it accepts by default has an encoding (decoder positions: `max_decoding_length`,
# 256 by default).
SINUSOIDAL_POSITIONS = 1024
# The SentencePiece model of a `SubwordTokenizer`, copied next to the CTranslate2 files (a
# `JointVocabularyTokenizer` ships `source.spm` and `target.spm`).
TOKENIZER_FILE = MODEL_FILE


def _numpy(variable):
    return np.asarray(keras.ops.convert_to_numpy(variable), dtype="float32")


def _set_linear(spec, kernel, bias=None):
    """A (inputs, outputs) Keras kernel as CTranslate2's (outputs, inputs) weight."""
    spec.weight = np.ascontiguousarray(kernel.T)
    if bias is not None:
        spec.bias = bias


def _set_dense(spec, dense):
    _set_linear(spec, _numpy(dense.kernel), None if dense.bias is None else _numpy(dense.bias))


def _input_projection(dense):
    """EinsumDense (d_model, heads, head_dim) -> kernel (d_model, heads * head_dim), bias."""
    kernel = _numpy(dense.kernel)
    bias = None if dense.bias is None else _numpy(dense.bias).reshape(-1)
    return kernel.reshape(kernel.shape[0], -1), bias


def _set_attention(spec, attention, fused):
    """Fills a `MultiHeadAttentionSpec`: `fused` groups of our Q, K, V projections per linear.

    CTranslate2 splits each fused output into heads as (heads, head_dim), the order of our
    (d_model, heads, head_dim) kernels, and scales queries by 1 / sqrt(head_dim) itself.
    """
    projections = {
        "q": attention.query_dense,
        "k": attention.key_dense,
        "v": attention.value_dense,
    }
    for linear, names in zip(spec.linear[:-1], fused, strict=True):
        parts = [_input_projection(projections[name]) for name in names]
        kernel = np.concatenate([kernel for kernel, _ in parts], axis=1)
        bias = None if parts[0][1] is None else np.concatenate([bias for _, bias in parts])
        _set_linear(linear, kernel, bias)
    output = attention.output_dense
    kernel = _numpy(output.kernel)  # (heads, d_v, d_model)
    bias = None if output.bias is None else _numpy(output.bias)
    _set_linear(spec.linear[-1], kernel.reshape(-1, kernel.shape[-1]), bias)


def _set_norm(spec, norm):
    spec.gamma = _numpy(norm.gamma)
    spec.beta = _numpy(norm.beta)


def _set_feed_forward(spec, feed_forward, norm):
    _set_norm(spec.layer_norm, norm)
    _set_dense(spec.linear_0, feed_forward.inner_dense)
    _set_dense(spec.linear_1, feed_forward.output_dense)


def _position_table(model, layer):
    """Our encodings of positions 0..N-1 as a table: CTranslate2's own sinusoid is not ours.

    CTranslate2 computes sin and cos halves side by side; paper 3.5 (and this package)
    interleaves them, so the values are written out, computed by the model's own layer.
    """
    if model.config.position_embedding == "learned":
        return _numpy(layer.position_embeddings)
    zeros = keras.ops.zeros((1, SINUSOIDAL_POSITIONS, model.config.d_model), "float32")
    return _numpy(layer(zeros))[0]


def _pieces(tokenizer, size, side):
    """The tokenizer's pieces of `side` in id order: CTranslate2 maps pieces to ids by this list."""
    pieces = tokenizer.source_vocabulary() if side == "source" else tokenizer.target_vocabulary()
    if len(pieces) != size:
        raise ValueError(
            f"The model's {side} vocabulary has {size} ids but the tokenizer has "
            f"{len(pieces)} pieces: export the tokenizer the model was trained with."
        )
    return pieces


def _build_spec(ctranslate2, model, tokenizer):
    """The `TransformerSpec` of `model`, with its vocabularies and special tokens."""
    c = model.config
    if c.head_key_dim != c.head_value_dim:
        raise ValueError(
            "CTranslate2 needs one head size for queries, keys and values. Received: "
            f"key_dim={c.head_key_dim}, value_dim={c.head_value_dim}"
        )
    specs = ctranslate2.specs
    head_dim = None if c.head_key_dim * c.num_heads == c.d_model else c.head_key_dim
    # Our activation names (`TransformerConfig.activation`) as CTranslate2's; GELU: erf form.
    activations = {
        "relu": specs.Activation.RELU,
        "swish": specs.Activation.SWISH,
        "gelu": specs.Activation.GELU,
    }
    stack = {
        "pre_norm": c.normalize_first,
        "head_dim": head_dim,
        "activation": activations[c.activation],
    }
    spec = specs.TransformerSpec(
        specs.TransformerEncoderSpec(c.num_layers, c.num_heads, **stack),
        specs.TransformerDecoderSpec(c.num_layers, c.num_heads, **stack),
    )
    encoder, decoder = spec.encoder, spec.decoder

    encoder.embeddings[0].weight = _numpy(model.source_embedding.embeddings)
    decoder.embeddings.weight = _numpy(model.target_embedding.embeddings)
    encoder.scale_embeddings = decoder.scale_embeddings = c.scale_embeddings
    encoder.position_encodings.encodings = _position_table(model, model.source_position_embedding)
    decoder.position_encodings.encodings = _position_table(model, model.target_position_embedding)
    if model.output_projection is None:  # tied (3.4): CTranslate2 aliases equal arrays
        decoder.projection.weight = decoder.embeddings.weight
    else:
        _set_dense(decoder.projection, model.output_projection)
    if model.logits_bias is not None:  # `final_logits_bias`
        decoder.projection.bias = _numpy(model.logits_bias)

    for layer, block in zip(encoder.layer, model.encoder_blocks, strict=True):
        _set_attention(layer.self_attention, block.self_attention, ["qkv"])
        _set_norm(layer.self_attention.layer_norm, block.self_attention_norm)
        _set_feed_forward(layer.ffn, block.feed_forward, block.feed_forward_norm)
    for layer, block in zip(decoder.layer, model.decoder_blocks, strict=True):
        _set_attention(layer.self_attention, block.self_attention, ["qkv"])
        _set_norm(layer.self_attention.layer_norm, block.self_attention_norm)
        _set_attention(layer.attention, block.cross_attention, ["q", "kv"])
        _set_norm(layer.attention.layer_norm, block.cross_attention_norm)
        _set_feed_forward(layer.ffn, block.feed_forward, block.feed_forward_norm)
    if c.normalize_first:
        _set_norm(encoder.layer_norm, model.encoder_final_norm)
        _set_norm(decoder.layer_norm, model.decoder_final_norm)

    source_pieces = _pieces(tokenizer, c.source_vocabulary_size or c.vocabulary_size, "source")
    target_pieces = _pieces(tokenizer, c.vocabulary_size, "target")
    spec.register_source_vocabulary(source_pieces)
    spec.register_target_vocabulary(target_pieces)
    config = spec.config
    config.layer_norm_epsilon = c.layer_norm_epsilon
    config.unk_token = target_pieces[tokenizer.unk_id]
    config.bos_token = target_pieces[tokenizer.bos_id]
    config.eos_token = target_pieces[tokenizer.eos_id]
    # Training feeds the decoder BOS + target and the encoder source + EOS (an imported
    # Marian model's BOS is its padding piece).
    config.decoder_start_token = target_pieces[tokenizer.bos_id]
    config.add_source_bos = False
    config.add_source_eos = c.source_eos
    return spec


def export_ctranslate2(model, tokenizer, output_dir, quantization=None, overwrite=False):
    """Writes `model` as a CTranslate2 model directory, with its SentencePiece model.

    The weights are laid out in CTranslate2's `TransformerSpec` (post-LN or
    pre-LN, shared or separate embeddings, tied or separate output
    projection, attention with or without biases, `sqrt(d_model)`
    embedding scale per `config.scale_embeddings`) and written by
    CTranslate2's own converter, quantized if asked. Positions are written
    as a table of this model's encodings: its learned embeddings, or the
    paper's interleaved sinusoid (3.5) for the first 1,024 positions
    (CTranslate2's built-in sinusoid has another layout; the table carries
    `position_layout`, `position_frequencies` and `position_offset` too).
    The feed-forward activation (ReLU, swish or GELU) and a
    `final_logits_bias` (the projection's bias) carry over. The vocabulary is
    the tokenizer's pieces in id order (`source_vocabulary`,
    `target_vocabulary`) with its unknown, begin and end pieces (`<unk>`,
    `<s>`, `</s>`) as CTranslate2's special tokens; as in training, sources
    get `</s>` appended and the decoder starts from the begin piece (`<s>`;
    `<pad>` for an imported Marian model). The tokenizer's SentencePiece
    models are copied into the directory: `vocabulary.model`, or
    `source.spm` and `target.spm` for a `JointVocabularyTokenizer`.

    Feed `ctranslate2.Translator.translate_batch` SentencePiece pieces (not
    ids; the source model's) and decode the output pieces with the (target)
    model; see
    docs/serving.md. With `length_penalty=0, min_decoding_length=0`
    CTranslate2's beam search ranks as `Translator(alpha=0)` does; its
    length penalty is `length ** alpha` (EOS not counted), not GNMT's.

    The directory is built under a temporary name next to `output_dir` and
    renamed when complete.

    Args:
        model: a `Seq2SeqTransformer` (`key_dim == value_dim`).
        tokenizer: its `SubwordTokenizer` or `JointVocabularyTokenizer`.
        output_dir: str or path-like, the directory to create.
        quantization: None (the weights' float32) or a CTranslate2 weight
            type: "int8", "int8_float32", "int8_float16", "int8_bfloat16",
            "int16", "float16", "bfloat16", "float32".
        overwrite: bool. Replace an existing non-empty `output_dir`.

    Returns:
        str, the absolute path of `output_dir`.

    Example:

    >>> export_ctranslate2(model, tokenizer, "serving/ct2", quantization="int8")
    >>> translator = ctranslate2.Translator("serving/ct2", device="cpu")
    """
    ctranslate2 = import_ctranslate2()
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(
            f"`quantization` must be one of {', '.join(QUANTIZATIONS)} or None. "
            f"Received: quantization={quantization!r}"
        )
    path = os.path.abspath(os.fspath(output_dir))
    if os.path.isdir(path) and os.listdir(path) and not overwrite:
        raise FileExistsError(f"Export directory already exists: {path} (pass overwrite=True).")
    if os.path.exists(path) and not os.path.isdir(path):
        raise FileExistsError(f"Export path exists and is not a directory: {path}")
    if not model.built:
        model.build()

    class KerasTransformerConverter(ctranslate2.converters.Converter):
        def _load(self):
            return _build_spec(ctranslate2, model, tokenizer)

    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    temporary = os.path.join(parent, f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        KerasTransformerConverter().convert(temporary, quantization=quantization)
        for file_name, model_bytes in tokenizer.sentencepiece_files().items():
            with open(os.path.join(temporary, file_name), "wb") as file:
                file.write(model_bytes)
        _replace_directory(temporary, path)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return path
