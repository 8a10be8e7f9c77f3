"""`quantize_model`: a model's matrices as int8 for decoding, through Keras' `model.quantize`.

`quantized_copy` leaves the caller's model float: `Translator` and `export_saved_model`
quantize a copy of the model they are given.
"""

import warnings

import keras

from keras_transformer import backend
from keras_transformer.compat import leaf_layers
from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.layers.learned_position_embedding import LearnedPositionEmbedding
from keras_transformer.layers.token_embedding import TokenEmbedding
from keras_transformer.models.quantize_modes import QUANTIZE_MODES

# Layers that take int8 weights: Keras' int8 `Dense` and `EinsumDense` (the package's
# `AdaptableDense` and `AdaptableEinsumDense` are subclasses) and the tied embedding.
QUANTIZED_LAYERS = (keras.layers.Dense, keras.layers.EinsumDense, TokenEmbedding)

# Layers whose weights stay float: vectors (layer normalization) and the learned position
# table, which is looked up, never multiplied (CTranslate2 keeps both in float too).
FLOAT_LAYERS = (LayerNormalization, LearnedPositionEmbedding)


def quantization_mode(model):
    """The mode `model`'s matrices were quantized to ("int8"), or None for a float model."""
    modes = {
        layer.quantization_mode
        for layer in leaf_layers(model)
        if isinstance(layer, QUANTIZED_LAYERS)
    }
    return modes.pop() if len(modes) == 1 else None if not modes else "mixed"


def quantize_model(model, mode="int8"):
    """Quantizes `model`'s weight matrices in place, per output channel, with Keras' int8.

    Every projection (attention, feed-forward) becomes Keras' int8 layer: an
    int8 kernel with one scale per output column, applied as an int8 matmul
    of inputs quantized per row at each call (Keras' `model.quantize`
    scheme). The tied embedding matrix is int8 with one scale per token
    (`TokenEmbedding.quantize`). Layer normalization and learned position
    tables stay float. A model already quantized to `mode` is returned as
    it is. The weights of an int8 model are about a quarter of its float32
    weights; it is for decoding, not for training.

    Args:
        model: a `Seq2SeqTransformer` (built or not).
        mode: "int8".

    Returns:
        `model`, quantized.

    Raises:
        ValueError: another mode; a model with LoRA factors not merged; a
            layer holding weights that cannot be quantized; a float16
            compute dtype (Keras refuses int8 with it).

    Example:

    >>> model = quantize_model(build_model(preset="base"), "int8")
    >>> model.decoder_embedding.embeddings.dtype
    'int8'
    """
    if mode not in QUANTIZE_MODES:
        raise ValueError(f"`mode` must be one of {QUANTIZE_MODES}. Received: {mode!r}")
    if not model.built:
        model.build()
    current = quantization_mode(model)
    if current == mode:
        return model
    if current is not None:
        raise ValueError(f"The model is quantized already ({current}); load its float weights.")
    targets = _checked_targets(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with backend.frozen_heap():  # each dropped float kernel would walk the whole heap
            model.quantize(mode, filters=lambda layer: layer in targets, type_check=False)
    left = [layer for layer in targets if layer.quantization_mode != mode]
    if left:
        reasons = [str(w.message) for w in caught if left[0].name in str(w.message)]
        reason = reasons[0].split("\n")[0] if reasons else ""
        raise ValueError(f"{left[0].path}: could not be quantized to {mode}. {reason}".strip())
    return model


def quantized_copy(model, mode="int8"):
    """A copy of `model` quantized to `mode` (`quantize_model`); `model` stays as it is.

    The copy holds its own weights (the float weights are copied, then
    quantized), so a caller who goes on using `model` for training or float
    decoding keeps float weights. A model already quantized to `mode` is
    returned as it is.

    Args:
        model: a `Seq2SeqTransformer` (built or not).
        mode: "int8".

    Returns:
        A `Seq2SeqTransformer` with `mode` weights.

    Raises:
        ValueError: as `quantize_model`, before anything is copied.

    Example:

    >>> int8_model = quantized_copy(model, "int8")
    >>> quantization_mode(model), quantization_mode(int8_model)
    (None, 'int8')
    """
    if mode not in QUANTIZE_MODES:
        raise ValueError(f"`mode` must be one of {QUANTIZE_MODES}. Received: {mode!r}")
    if not model.built:
        model.build()
    if quantization_mode(model) == mode:
        return model
    _checked_targets(model)  # refuses before the copy, naming the caller's layer
    copy = type(model).from_config(model.get_config())
    copy.build()
    copy.set_weights(model.get_weights())
    return quantize_model(copy, mode)


def _checked_targets(model):
    """The layers to quantize; raises for a layer whose weights would be left float unawares."""
    targets = []
    for layer in leaf_layers(model):
        if isinstance(layer, QUANTIZED_LAYERS):
            if getattr(layer, "lora_enabled", False):
                raise ValueError(
                    f"{layer.path}: LoRA factors are not merged; merge them "
                    "(`merged_model()`) before quantizing."
                )
            targets.append(layer)
        elif layer.weights and not isinstance(layer, FLOAT_LAYERS):
            raise ValueError(
                f"{layer.path}: a {type(layer).__name__} cannot be quantized to int8 "
                "(only Dense, EinsumDense and TokenEmbedding weights can)."
            )
    if model.compute_dtype == "float16":
        raise ValueError("int8 weights need a float32 or bfloat16 compute dtype, not float16.")
    return targets
