"""The sinusoidal positional encoding of paper section 3.5."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class SinusoidalPositionEmbedding(keras.layers.Layer):
    """Fixed sinusoidal position encodings, sin and cos interleaved.

    `PE(pos, 2i) = sin(pos / 10000^(2i / d_model))` and
    `PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))` (paper 3.5): sine at
    even dimensions and cosine at the following odd one. (tensor2tensor and
    flax's WMT example concatenate a sine half and a cosine half instead;
    that is not the paper's layout.) The layer has no weights and no maximum
    length. An odd `d_model` ends with a lone sine dimension.

    Args:
        max_wavelength: float. The base `10000` of the paper.
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

    def __init__(self, max_wavelength=10000.0, **kwargs):
        super().__init__(**kwargs)
        if max_wavelength <= 0:
            raise ValueError(
                f"`max_wavelength` must be positive. Received: max_wavelength={max_wavelength!r}"
            )
        self.max_wavelength = float(max_wavelength)
        self.built = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        length, d_model = shape[-2], shape[-1]
        positions = ops.cast(ops.arange(length) + start_index, "float32")  # (length,)
        dims = ops.arange(d_model)
        # Dimensions 2i and 2i + 1 share the frequency 1 / 10000^(2i / d_model).
        even_dims = ops.cast(dims - dims % 2, "float32")
        inverse_frequency = ops.power(
            ops.cast(self.max_wavelength, "float32"), -even_dims / ops.cast(d_model, "float32")
        )
        angles = positions[:, None] * inverse_frequency[None, :]  # (length, d_model)
        encodings = ops.where(dims % 2 == 0, ops.sin(angles), ops.cos(angles))
        return ops.broadcast_to(ops.cast(encodings, inputs.dtype), shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config["max_wavelength"] = self.max_wavelength
        return config
