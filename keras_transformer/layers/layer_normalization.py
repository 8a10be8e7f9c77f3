"""Layer normalization over the last axis, the `LayerNorm` of paper section 3.1."""

import keras
from keras import ops

from keras_transformer import backend


@keras.saving.register_keras_serializable(package="keras_transformer")
class LayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization`, computed in a form that trains faster.

    The `LayerNorm` of every residual sublayer (paper 3.1; Ba et al., 2016):
    `(x - mean) / sqrt(var + epsilon) * gamma + beta` over the last axis. The
    weights (`gamma`, `beta`), arguments and configuration are Keras' own, so
    checkpoints of either layer load into the other.

    Keras computes `x * s + (beta - mean * s)` with `s = gamma / sqrt(var +
    epsilon)`: `s` has the full shape of `x`, and XLA keeps it in memory for
    the backward pass (a (batch, length, d_model) broadcast per LayerNorm).
    Where `keras_transformer.backend` picks `"scale_last"` (XLA on a CPU) the
    normalized input is scaled last, which leaves only per-position
    statistics to keep besides the input. Elsewhere (TensorFlow code that XLA
    does not compile; torch, whose Keras code calls the fused
    `torch.nn.functional.layer_norm`; GPUs and TPUs) Keras' own code runs.
    Inputs in float16 or bfloat16 are normalized in float32, as Keras does,
    and returned in the compute dtype.

    Other settings (`axis` other than the last, `center=False`,
    `scale=False`, the deprecated `rms_scaling`) fall back to Keras' code.

    Args:
        epsilon: float. Added to the variance (the model passes its
            `layer_norm_epsilon`, 1e-6).
        **kwargs: the other arguments of `keras.layers.LayerNormalization`.

    Call arguments:
        inputs: (..., features) tensor.

    Returns:
        A tensor of the shape of `inputs`, in the compute dtype.

    Example:

    >>> norm = LayerNormalization(epsilon=1e-6)
    >>> norm(keras.random.normal((2, 5, 16))).shape
    (2, 5, 16)
    """

    def _last_axis_only(self, ndim):
        axes = self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]
        return len(axes) == 1 and axes[0] in (-1, ndim - 1)

    def call(self, inputs):
        ndim = len(inputs.shape)
        form = backend.fast_forms().layer_norm
        if form == "keras" or not (
            self.center and self.scale and not self.rms_scaling and self._last_axis_only(ndim)
        ):
            return super().call(inputs)
        # At least float32 statistics, as Keras: half-precision variances lose the small values.
        dtype = keras.backend.result_type(inputs.dtype, "float32")
        x = ops.cast(inputs, dtype)  # (..., features)
        gamma, beta = ops.cast(self.gamma, dtype), ops.cast(self.beta, dtype)
        centred = x - ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(centred), axis=-1, keepdims=True)  # (..., 1)
        normalized = centred * ops.rsqrt(variance + self.epsilon)
        outputs = normalized * gamma + beta
        return ops.cast(outputs, self.compute_dtype)
