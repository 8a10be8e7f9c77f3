"""`inputs @ kernel`, with a kernel gradient that XLA's CPU backend runs on its faster matmuls."""

import functools

import keras
from keras import ops


def kernel_matmul(inputs, kernel):
    """`inputs @ kernel`: a (..., d_in) tensor times a (d_in, d_out) weight matrix.

    The value and both gradients are those of `ops.matmul`; only the form
    of the kernel gradient `dW = x^T dy` differs, on the JAX backend on a
    CPU, for widening kernels (`d_in < d_out`, as the feed-forward layer's
    first one, 512 -> 2048). Autodiff hands XLA a dot that contracts the
    first axis of both operands. XLA's CPU backend (jax 0.10) runs that
    form with Eigen, while a dot whose left operand contracts its last axis
    goes to its faster YNNPACK kernels. So `x^T` is materialized first: one
    copy of the narrower operand, fenced by `optimization_barrier` so that
    XLA cannot fold the transpose back into the dot. On 2 CPU cores the
    (1020, 512) x (1020, 2048) kernel gradient took 14.0 instead of 18.5 ms,
    copy included (docs/benchmarks.md). For square and narrowing kernels the
    copy (of `x` or of the wider `dy`) costs what the faster dot saves, so
    those keep autodiff's form, as do TensorFlow and JAX off the CPU (where
    the matmul libraries read transposed operands in place).

    Args:
        inputs: (..., d_in) tensor.
        kernel: (d_in, d_out) tensor of the same dtype.

    Returns:
        (..., d_out) tensor.

    Example:

    >>> x, w = keras.random.normal((2, 5, 8)), keras.random.normal((8, 32))
    >>> kernel_matmul(x, w).shape
    (2, 5, 32)
    """
    if len(kernel.shape) != 2:
        raise ValueError(f"`kernel` must be a matrix (d_in, d_out). Received: shape={kernel.shape}")
    d_in, d_out = kernel.shape
    if keras.backend.backend() != "jax" or d_in >= d_out:
        return ops.matmul(inputs, kernel)
    import jax

    if jax.default_backend() != "cpu":
        return ops.matmul(inputs, kernel)
    return _widening_matmul()(inputs, kernel)


@functools.cache
def _widening_matmul():
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
        rows_t = jax.lax.optimization_barrier(rows.T)  # (d_in, tokens), materialized
        dw = jnp.matmul(rows_t, dy.reshape(-1, dy.shape[-1]))  # (d_in, d_out)
        return dx.astype(x.dtype), dw.astype(w.dtype)

    matmul.defvjp(forward, backward)
    return matmul
