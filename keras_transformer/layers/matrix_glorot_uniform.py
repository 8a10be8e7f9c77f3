"""Xavier (Glorot) uniform initialization of a kernel seen as the matrix it applies."""

import math

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class MatrixGlorotUniform(keras.initializers.Initializer):
    """`U(-limit, limit)` with `limit = sqrt(6 / (fan_in + fan_out))` over a kernel's matrix.

    Xavier (Glorot & Bengio, 2010) with the fans of the matrix a kernel
    applies: the product of its first `input_axes` axes, and of the others,
    or a given `fan_out`. fairseq initializes the query, key and value
    projections as one (3 * d_model, d_model) matrix, so each part's limit is
    `sqrt(6 / (d_model + 3 * d_model))`, `1 / sqrt(2)` of a separate
    (d_model, d_model) Xavier matrix's (Keras' `glorot_uniform` in an
    `EinsumDense`).

    Args:
        input_axes: int. Leading axes that are the matrix's input (1 for
            (d_model, heads, head_dim), 2 for (heads, head_dim, d_model)).
        fan_out: int or None. Output size to use instead of the kernel's.
        seed: int or None. Random seed.

    Example:

    >>> initializer = MatrixGlorotUniform(input_axes=1)
    >>> kernel = initializer((512, 8, 64))  # limit sqrt(6 / (512 + 512))
    """

    def __init__(self, input_axes=1, fan_out=None, seed=None):
        if isinstance(input_axes, bool) or not isinstance(input_axes, int) or input_axes < 1:
            raise ValueError(
                f"`input_axes` must be a positive int. Received: input_axes={input_axes!r}"
            )
        if fan_out is not None and (not isinstance(fan_out, int) or fan_out < 1):
            raise ValueError(f"`fan_out` must be a positive int or None. Received: {fan_out!r}")
        self.input_axes = input_axes
        self.fan_out = fan_out
        self.seed = seed
        self._generator = keras.random.SeedGenerator(seed) if seed is not None else None

    def limit(self, shape):
        """The bound of the uniform distribution for a kernel of `shape`."""
        if len(shape) <= self.input_axes:
            raise ValueError(
                f"A kernel of shape {tuple(shape)} has no output axes after the first "
                f"input_axes={self.input_axes}."
            )
        fan_in = math.prod(shape[: self.input_axes])
        fan_out = self.fan_out or math.prod(shape[self.input_axes :])
        return math.sqrt(6.0 / (fan_in + fan_out))

    def __call__(self, shape, dtype=None):
        limit = self.limit(shape)
        return keras.random.uniform(
            shape, minval=-limit, maxval=limit, dtype=dtype, seed=self._generator
        )

    def get_config(self):
        return {"input_axes": self.input_axes, "fan_out": self.fan_out, "seed": self.seed}
