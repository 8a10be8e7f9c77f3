"""Ops with a faster form on some backends: top-k, embedding row gathers, uint32 wrapping.

Each gives the value of the Keras op it stands for; the form applies where `fast_forms()`
says so (`keras_transformer/backend/forms.py`).
"""

import functools

import keras
from keras import ops

from keras_transformer.backend.forms import fast_forms


def top_k(x, k):
    """`ops.top_k(x, k)` of a (rows, n) tensor: the same values and indices, largest first.

    With the `blocked_top_k` form, a wide row is ranked from its best blocks:
    cut into blocks of `b` entries, the `k` blocks with the largest maxima
    hold the row's `k` largest entries, so only those `k * b` entries are
    ranked. XLA's and TensorFlow's CPU top-k go through every entry of a
    row at a cost of several maxima; beam search ranks a row of beams times
    vocabulary per source at every step (docs/performance.md). Ties go to the
    lower index as in `ops.top_k` on TensorFlow and JAX (torch's `topk`
    orders ties as it likes): the chosen blocks are read in index order.

    Args:
        x: (rows, n) float tensor.
        k: int, `<= n`.

    Returns:
        `(values, indices)`: (rows, k), and int32 indices into the last axis.
    """
    n = x.shape[-1]
    block = _top_k_block(n, k) if fast_forms().blocked_top_k else None
    if block is None:
        values, indices = ops.top_k(x, k)
        return values, ops.cast(indices, "int32")
    num_blocks = n // block
    rows = ops.shape(x)[0]  # may be unknown until run
    blocks = ops.reshape(x, (-1, block))  # (rows * num_blocks, block)
    maxima = ops.reshape(ops.max(blocks, axis=-1), (-1, num_blocks))
    _, chosen = ops.top_k(maxima, k)
    chosen = ops.sort(ops.cast(chosen, "int32"), axis=-1)  # (rows, k), in index order
    first_block = ops.arange(rows, dtype="int32")[:, None] * num_blocks
    candidates = ops.take(blocks, ops.reshape(chosen + first_block, (-1,)), axis=0)
    values, position = ops.top_k(ops.reshape(candidates, (-1, k * block)), k)
    position = ops.cast(position, "int32")
    block_index = ops.take_along_axis(chosen, position // block, axis=1)
    return values, block_index * block + position % block


def _top_k_block(n, k):
    """The block length of a blocked top-k of `k` in `n` entries, or None where it saves little.

    A divisor of `n` (so that the row reshapes into blocks) that minimizes the
    entries ranked, `n / block` maxima then `k * block` candidates; None unless
    that is at most an eighth of `n` (narrow rows, few divisors).
    """
    sizes = [b for b in range(2, n // k + 1) if n % b == 0]
    if not sizes:
        return None
    best = min(sizes, key=lambda b: n // b + k * b)
    return best if n // best + k * best <= n // 8 else None


def gather_rows(table, ids):
    """`ops.take(table, ids, axis=0)`: the rows of `table` (an embedding) that `ids` name.

    With the `one_hot_row_gradient` form (JAX on a GPU or TPU) the value is
    the same and the table's gradient `one_hot(ids)^T @ dy` is computed as a
    matmul over token chunks instead of autodiff's scatter-add. The scatter
    adds every token's row with atomic adds, which serialize where a row is
    named often (the padding id, frequent words): on an H200 it took 44% of
    a base-size training step. Products of 0/1 with `dy`, accumulated in
    float32, give the scatter's sums up to summation order.

    Args:
        table: (rows, width) tensor.
        ids: integer tensor of any shape, values in [0, rows).

    Returns:
        (*ids.shape, width) tensor of `table`'s dtype.
    """
    if not fast_forms().one_hot_row_gradient:
        return ops.take(table, ids, axis=0)
    return _one_hot_gradient_take()(ops.convert_to_tensor(table), ids)


# Tokens per chunk of the one-hot gradient: bounds its (chunk, rows) one-hot matrix
# (2**27 entries, 256 MB in bfloat16) while each matmul still fills the device.
_ONE_HOT_ENTRIES = 2**27


@functools.cache
def _one_hot_gradient_take():
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def take(table, ids):
        return jnp.take(table, ids, axis=0)

    def forward(table, ids):
        return take(table, ids), (table, ids)  # the table for its shape and dtype only

    def backward(residuals, dy):
        table, ids = residuals
        (rows, width), dtype = table.shape, table.dtype
        flat_ids = ids.reshape(-1)
        upstream = dy.reshape(-1, width)  # (tokens, width)
        chunk = max(1, min(flat_ids.shape[0], _ONE_HOT_ENTRIES // rows))
        padding = -flat_ids.shape[0] % chunk
        # Padded tokens get id -1: an all-zero one-hot row adds nothing.
        flat_ids = jnp.pad(flat_ids, (0, padding), constant_values=-1).reshape(-1, chunk)
        upstream = jnp.pad(upstream, ((0, padding), (0, 0))).reshape(-1, chunk, width)
        # float32 products at full precision, not TF32 (bfloat16 ones are exact anyway).
        precision = jax.lax.Precision.HIGHEST if dy.dtype == jnp.float32 else None

        def add_chunk(total, chunk_values):
            chunk_ids, chunk_upstream = chunk_values
            one_hot = jax.nn.one_hot(chunk_ids, rows, dtype=dy.dtype)  # (chunk, rows)
            total += jax.lax.dot_general(
                one_hot,
                chunk_upstream,
                (((0,), (0,)), ((), ())),
                precision=precision,
                preferred_element_type=jnp.float32,
            )  # (rows, width)
            return total, None

        total, _ = jax.lax.scan(
            add_chunk, jnp.zeros((rows, width), jnp.float32), (flat_ids, upstream)
        )
        return total.astype(dtype), None

    take.defvjp(forward, backward)
    return take


def wrap_uint32(x):
    """`x` mod 2**32 for "uint32" integer arithmetic.

    Keras holds "uint32" as int64 on torch (torch lacks uint32 shifts), so
    there products and sums are reduced by hand; elsewhere uint32 wraps itself.
    """
    if keras.backend.backend() != "torch":
        return x
    return ops.bitwise_and(x, ops.convert_to_tensor(0xFFFFFFFF, "int64"))
