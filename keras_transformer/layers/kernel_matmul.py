"""`inputs @ kernel` for the model's projections, with a kernel gradient XLA's CPU runs fast."""

import functools

import keras
from keras import ops


def kernel_matmul(inputs, kernel):
    """`inputs @ kernel`: a (..., d_in) tensor times a (d_in, d_out) weight matrix.

    The value and both gradients are those of `ops.matmul`. What differs is
    how the kernel gradient `dW = x^T dy` is written on the JAX backend on a
    CPU. Autodiff hands XLA a dot that contracts the first axis of both
    operands, and XLA's CPU backend (jax 0.10) runs that form with Eigen.
    Dots whose left operand contracts its last axis go to its faster
    YNNPACK kernels instead. There `x^T` is materialized first (one copy of
    the input, fenced by `optimization_barrier` so that XLA cannot fold the
    transpose back into the dot). On 2 CPU cores a (1020, 512) x
    (1020, 2048) kernel gradient then took 14.7 instead of 18.8 ms, copy
    included (docs/benchmarks.md). Kernel gradients are a third of a
    training step's matmul FLOPs.

    On TensorFlow, and on JAX off the CPU (where the matmul libraries read
    transposed operands in place), this is plain `ops.matmul`.

    Args:
        inputs: (..., d_in) tensor.
        kernel: (d_in, d_out) tensor of the same dtype.

    Returns:
        (..., d_out) tensor.

    Example:

    >>> x, w = keras.random.normal((2, 5, 8)), keras.random.normal((8, 3))
    >>> kernel_matmul(x, w).shape
    (2, 5, 3)
    """
    if len(kernel.shape) != 2:
        raise ValueError(f"`kernel` must be a matrix (d_in, d_out). Received: shape={kernel.shape}")
    if keras.backend.backend() != "jax":
        return ops.matmul(inputs, kernel)
    import jax

    if jax.default_backend() != "cpu":
        return ops.matmul(inputs, kernel)
    return _jax_cpu_matmul()(inputs, kernel)


@functools.cache
def _jax_cpu_matmul():
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def matmul(x, w):
        return jnp.matmul(x, w)

    def forward(x, w):
        return jnp.matmul(x, w), (x, w)

    def backward(residuals, dy):
        x, w = residuals
        dx = jnp.matmul(dy, w.T)  # (..., d_in): contracts dy's last axis already
        rows = x.reshape(-1, x.shape[-1])  # (tokens, d_in)
        x_t = jax.lax.optimization_barrier(rows.T)  # (d_in, tokens), materialized
        dw = jnp.matmul(x_t, dy.reshape(-1, dy.shape[-1]))  # (d_in, d_out)
        return dx.astype(x.dtype), dw.astype(w.dtype)

    matmul.defvjp(forward, backward)
    return matmul
