"""`inputs @ kernel` and `+ bias`, with kernel gradients in the form a CPU backend runs fastest."""

import functools

from keras import ops, quantizers

from keras_transformer import backend


def kernel_matmul(inputs, kernel, transpose_kernel=False):
    """`inputs @ kernel` (or `inputs @ kernel^T`) for a weight matrix `kernel`.

    The value and both gradients are those of `ops.matmul`; only the form
    of the kernel gradient `dW = x^T dy` differs, where
    `keras_transformer.backend` picks it (on a CPU). `kernel_gradient` (JAX),
    for kernels that are not square: autodiff hands XLA a dot that contracts
    the first axis of both operands, which XLA's CPU backend runs slowly or
    after copying the wider operand into a transposed layout (for the
    pre-softmax projection, the (tokens, vocabulary) gradient of the logits).
    Here the narrower of `x` (tokens, d_in) and `dy` (tokens, d_out) is
    transposed first (fenced by `optimization_barrier` so that XLA cannot
    fold the transpose back into the dot) and the dot contracts its last
    axis: `x^T dy` for widening kernels (`d_in < d_out`: the feed-forward
    layer's first kernel and the pre-softmax projection), `(dy^T x)^T` for
    narrowing ones (its second kernel). Square kernels keep autodiff's form
    (the copy costs what the faster dot saves).

    Args:
        inputs: (..., d_in) tensor.
        kernel: (d_in, d_out) tensor of the same dtype; (d_out, d_in) with
            `transpose_kernel=True`.
        transpose_kernel: multiply by the transpose of `kernel`, as a tied
            embedding matrix (vocabulary, d_model) is used for the logits.

    Returns:
        (..., d_out) tensor.

    Example:

    >>> x, w = keras.random.normal((2, 5, 8)), keras.random.normal((8, 32))
    >>> kernel_matmul(x, w).shape
    (2, 5, 32)
    >>> kernel_matmul(x, keras.random.normal((100, 8)), transpose_kernel=True).shape
    (2, 5, 100)
    """
    if len(kernel.shape) != 2:
        expected = "(d_out, d_in)" if transpose_kernel else "(d_in, d_out)"
        raise ValueError(f"`kernel` must be a matrix {expected}. Received: shape={kernel.shape}")
    d_out, d_in = kernel.shape if transpose_kernel else kernel.shape[::-1]
    if backend.fast_forms().kernel_gradient and d_in != d_out:
        return _fenced_matmul(bool(transpose_kernel), d_in < d_out)(inputs, kernel)
    return ops.matmul(inputs, ops.transpose(kernel) if transpose_kernel else kernel)


def add_bias(outputs, bias):
    """`outputs + bias` for a (..., units) tensor and a (units,) bias: a broadcast sum."""
    return outputs + bias


def int8_matmul(inputs, kernel, kernel_scale):
    """`inputs @ kernel` for an int8 `kernel` with per-column scales, as Keras' int8 `Dense`.

    Each row of `inputs` is quantized to int8 with its own scale
    (`127 / max |row|`), the product runs on int8 operands with int32
    sums, and the result is divided by both scales: Keras' int8 scheme
    (`keras.quantizers.abs_max_quantize`), where a quantized value is the
    float value times its scale.

    Args:
        inputs: (..., d_in) float tensor.
        kernel: (d_in, d_out) int8 tensor.
        kernel_scale: (d_out,) float tensor: column `j` of the float kernel
            is `kernel[:, j] / kernel_scale[j]`.

    Returns:
        (..., d_out) tensor of `inputs`' dtype.
    """
    quantized, inputs_scale = quantizers.abs_max_quantize(inputs, axis=-1)  # scale: (..., 1)
    outputs = ops.cast(ops.matmul(quantized, kernel), inputs.dtype)
    return outputs / ops.cast(inputs_scale * kernel_scale, inputs.dtype)


def is_int8(layer):
    """Whether `layer` (a Keras layer) holds int8-quantized weights (`model.quantize("int8")`)."""
    return getattr(layer, "quantization_mode", None) == "int8"


def dense_matmul(dense, inputs):
    """Applies a built `keras.layers.Dense` (no activation) through `kernel_matmul`.

    For layers that keep a `Dense` as the holder of a weight (its name,
    initializer and checkpoint path) but apply it themselves, so that its
    kernel gradient takes `kernel_matmul`'s form.

    Args:
        dense: a built `keras.layers.Dense`; its activation is not applied.
        inputs: (..., d_in) tensor in the compute dtype.

    Returns:
        (..., units) tensor of `inputs`' dtype: `inputs @ kernel (+ bias)`; an
        int8-quantized `dense` multiplies with `int8_matmul`.
    """
    if is_int8(dense):
        outputs = int8_matmul(inputs, dense.kernel, dense.kernel_scale)
    else:
        outputs = kernel_matmul(inputs, ops.cast(dense.kernel, inputs.dtype))
    if dense.use_bias:
        outputs = add_bias(outputs, ops.cast(dense.bias, inputs.dtype))
    return outputs


@functools.cache
def _fenced_matmul(transpose_kernel, widening):
    import jax
    import jax.numpy as jnp

    def product(x, w):
        return jnp.matmul(x, w.T if transpose_kernel else w)

    @jax.custom_vjp
    def matmul(x, w):
        return product(x, w)

    def forward(x, w):
        return product(x, w), (x, w)

    def backward(residuals, dy):
        x, w = residuals
        # (..., d_in): contracts dy's last axis already, and w's d_out axis in place.
        dx = jnp.matmul(dy, w if transpose_kernel else w.T)
        rows = x.reshape(-1, x.shape[-1])  # (tokens, d_in)
        upstream = dy.reshape(-1, dy.shape[-1])  # (tokens, d_out)
        if widening:
            narrow_t = jax.lax.optimization_barrier(rows.T)  # (d_in, tokens), materialized
            dw = jnp.matmul(narrow_t, upstream)  # (d_in, d_out)
        else:
            narrow_t = jax.lax.optimization_barrier(upstream.T)  # (d_out, tokens)
            dw = jnp.matmul(narrow_t, rows)  # (d_out, d_in)
        if widening == transpose_kernel:
            # The dot gave the transpose of the kernel's layout. Fenced too: left free,
            # XLA would fold this transpose into the dot and transpose the wider operand
            # instead. One copy of the kernel.
            dw = jax.lax.optimization_barrier(dw).T
        return dx.astype(x.dtype), dw.astype(w.dtype)

    matmul.defvjp(forward, backward)
    return matmul
