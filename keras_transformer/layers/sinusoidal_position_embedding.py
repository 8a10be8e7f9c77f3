"""The sinusoidal positional encoding of paper section 3.5."""

import math

import keras
from keras import ops

LAYOUTS = ("interleaved", "halves")
FREQUENCIES = ("paper", "fairseq")


@keras.saving.register_keras_serializable(package="keras_transformer")
class SinusoidalPositionEmbedding(keras.layers.Layer):
    """Fixed sinusoidal position encodings, sin and cos interleaved.

    `PE(pos, 2i) = sin(pos / 10000^(2i / d_model))` and
    `PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))` (paper 3.5): sine at
    even dimensions and cosine at the following odd one. (tensor2tensor and
    flax's WMT example concatenate a sine half and a cosine half instead;
    that is not the paper's layout, but Marian's and fairseq's, which
    `layout="halves"` gives.) The layer has no weights and no maximum
    length. An odd `d_model` has one sine more than cosines.

    Args:
        max_wavelength: float. The base `10000` of the paper.
        layout: str. `"interleaved"` (paper: sine at even, cosine at odd
            features) or `"halves"` (features `[0, ceil(d/2))` the sines,
            the rest the cosines, as Marian and fairseq lay them out).
        frequencies: str. `"paper"`: pair `i` turns at
            `max_wavelength^(-2i / d_model)`; `"fairseq"`: at
            `exp(-i ln(max_wavelength) / (d_model/2 - 1))`, so the last pair
            reaches `1 / max_wavelength` (fairseq's sinusoid).
        offset: int. Position of the first token when `start_index` is 0
            (paper and Marian 0; fairseq `pad_id + 1`).
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (batch, length, d_model) tensor; only its shape and dtype are
            used.
        start_index: int or scalar int tensor. Position of the first step, so
            that one-step decoding at step `t` gets `PE(t)`.

    Returns:
        The encodings, broadcast to the shape of `inputs`, in its dtype.

    Example:

    >>> embeddings = keras.random.normal((2, 10, 512))
    >>> layer = SinusoidalPositionEmbedding()
    >>> (embeddings + layer(embeddings)).shape
    (2, 10, 512)
    """

    def __init__(
        self, max_wavelength=10000.0, layout="interleaved", frequencies="paper", offset=0, **kwargs
    ):
        super().__init__(**kwargs)
        if max_wavelength <= 0:
            raise ValueError(
                f"`max_wavelength` must be positive. Received: max_wavelength={max_wavelength!r}"
            )
        for name, value, allowed in (
            ("layout", layout, LAYOUTS),
            ("frequencies", frequencies, FREQUENCIES),
        ):
            if value not in allowed:
                raise ValueError(f"`{name}` must be one of {allowed}. Received: {name}={value!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"`offset` must be a non-negative int. Received: offset={offset!r}")
        self.max_wavelength = float(max_wavelength)
        self.layout = layout
        self.frequencies = frequencies
        self.offset = offset
        self.built = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        length, d_model = shape[-2], shape[-1]
        positions = ops.arange(length) + start_index + self.offset
        positions = ops.cast(positions, "float32")  # (length,)
        dims = ops.arange(d_model)
        if self.layout == "interleaved":  # dimensions 2i (sine) and 2i + 1 (cosine): pair i
            is_sine = dims % 2 == 0
            pair = dims // 2
        else:  # sines of pairs 0, 1, ... then cosines of pairs 0, 1, ...
            sines = (d_model + 1) // 2
            is_sine = dims < sines
            pair = ops.where(is_sine, dims, dims - sines)
        pair = ops.cast(pair, "float32")
        if self.frequencies == "paper":  # 1 / 10000^(2i / d_model)
            inverse_frequency = ops.power(
                ops.cast(self.max_wavelength, "float32"),
                -2.0 * pair / ops.cast(d_model, "float32"),
            )
        else:  # exp(-i ln(10000) / (d_model/2 - 1))
            step = math.log(self.max_wavelength) / ops.cast(d_model // 2 - 1, "float32")
            inverse_frequency = ops.exp(pair * -step)
        angles = positions[:, None] * inverse_frequency[None, :]  # (length, d_model)
        encodings = ops.where(is_sine, ops.sin(angles), ops.cos(angles))
        return ops.broadcast_to(ops.cast(encodings, inputs.dtype), shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_wavelength": self.max_wavelength,
                "layout": self.layout,
                "frequencies": self.frequencies,
                "offset": self.offset,
            }
        )
        return config
