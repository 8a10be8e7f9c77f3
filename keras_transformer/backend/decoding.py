"""What decoding needs of each backend to be correct and fast: its cache, loop and compilation.

The decoding cache (`growing_cache`, `update_cache`, `decoding_loop`) and
the compilation of decoding (`compile_search`) are not speed choices: each
backend gets the form its compiler allows (a cache that grows where shapes
may change, a fixed buffer under `jax.jit`).
"""

import math
import threading

import keras
import numpy as np
from keras import ops

from keras_transformer.backend.device import is_jax, on_accelerator
from keras_transformer.backend.forms import fast_forms

# A decoding batch's bound on sentences x padded length, but for JAX on a CPU
# (`decoding_batch_tokens`); a served SavedModel's too (TensorFlow).
DECODING_BATCH_TOKENS = 4096

# The self-attention cache, in bytes, from which a beam search loop on JAX on a CPU runs two
# steps per iteration (`paired_beam_steps`): more than a CPU's last-level cache holds.
PAIRED_STEPS_MIN_BYTES = 32 * 2**20


def paired_beam_steps(cache):
    """Whether a beam search loop over `cache` runs two steps per iteration.

    With the `paired_beam_steps` form (JAX on a CPU), when the growing
    (self-attention) cache holds at least `PAIRED_STEPS_MIN_BYTES`. XLA
    cannot reorder a loop's cache in place: each step gathers every cache
    tensor to its beams' rows into a new buffer, then copies that back into
    the loop's own buffer. With two steps per iteration the first step's
    gather fills a buffer of its own and the second's the loop's, so no copy
    is left; the loop may run one step more than the search needs, whose
    results are dropped (`keras_transformer.decoding.search_steps.decoding_loop`).
    Below a CPU's last-level cache the copy costs less than that step. On 2
    AMD Zen 4 cores a base-size model's beam search of 32 sources (128 rows,
    a 48 to 96 MiB cache) ran 1.05x to 1.07x faster; at 8 and 16 sources
    (12 to 48 MiB) 1.01x, and the trained quickstart model's batches
    (under 6 MiB) 0.97x (docs/performance.md).

    Args:
        cache: the search's `DecodingCache`, its buffers of one stage
            (static shapes).

    Returns:
        bool.
    """
    if not fast_forms().paired_beam_steps:
        return False
    tensors = keras.tree.flatten(cache.growing)
    size = sum(math.prod(t.shape) * np.dtype(t.dtype).itemsize for t in tensors)
    return size >= PAIRED_STEPS_MIN_BYTES


def growing_cache():
    """Whether a decoding loop's self-attention cache grows one position per step.

    On TensorFlow and torch it does: each step appends its keys and values
    (a concatenation) and beam search reorders only the positions written so
    far, so a step copies what it needs and no more. A graph's `while` loop
    lets a tensor's length change (`decoding_loop`); torch decodes eagerly.
    JAX compiles a loop for fixed shapes, so there the cache is a buffer of
    fixed length written in place (`update_cache`), which a search fills in
    stages (`keras_transformer.decoding.search_steps.cache_stages`).
    """
    return keras.backend.backend() != "jax"


def shrinking_batch():
    """Whether a decoding loop may drop the rows it has finished with.

    Beam search settles sources at different steps; on TensorFlow and torch,
    whose loops let a tensor's shape change (`decoding_loop`), the settled
    sources leave the loop state and later steps compute only the others.
    `jax.jit` compiles a loop for fixed shapes, so there every row stays until
    the whole batch is done.
    """
    return keras.backend.backend() != "jax"


def decoding_workers():
    """How many batches a `Translator` decodes at the same time.

    On the CPU, two on TensorFlow and three on JAX: one compiled search of a
    small batch keeps about one core busy (its ops are too small for XLA's or
    TensorFlow's intra-op threads), so a second batch in flight uses the other
    cores. On 2 AMD Zen 4 cores two translate a trained quickstart model's
    test set 1.4x faster than one on JAX and TensorFlow, and a base-size
    model's batches 1.2x faster (`benchmarks/decoding_speed.py
    --compare-ctranslate2`). JAX's many small batches (`decoding_batch_tokens`)
    leave gaps that a third fills: 1.03x to 1.06x faster again on that test
    set, no change at base size; TensorFlow gains nothing from more. One on a
    GPU or TPU, which runs one program at a time, and on torch, whose eager
    search enters the model's layers (`fixed_decoder_weights`) at every call.
    """
    if keras.backend.backend() == "torch" or on_accelerator():
        return 1
    return 3 if is_jax() else 2


def decoding_batch_tokens():
    """The default bound on sentences x padded length of a `Translator` batch.

    4096, except with JAX on a CPU: 256. A `jax.jit` search keeps every row
    of a batch until its last one ends (`shrinking_batch`), so a large batch
    of a trained model's translations pays for its longest one many times
    over, and a few large batches leave the second decoding worker
    (`decoding_workers`) idle. On 2 AMD Zen 4 cores, 256 translated a
    trained quickstart model's 500 test sentences 2.0x faster than 4096 and
    the Multi30k recipe's model's 1,000 1.4x faster (docs/performance.md).
    TensorFlow and torch drop settled rows and gain from large batches; so
    does an accelerator.
    """
    if keras.backend.backend() == "jax" and not on_accelerator():
        return 256
    return DECODING_BATCH_TOKENS


def update_cache(cache, update, index):
    """`cache` with `update` written at positions `index, ...` of axis 2.

    Where the cache grows (`growing_cache`), the result holds the first
    `index` positions of `cache` followed by `update`: later positions are
    dropped, and a cache of exactly `index` positions is extended without a
    copy of its own. TensorFlow's graph uses core ops only (`StridedSlice`,
    `ConcatV2`), so it serves in a `tensorflow_model_server` (no XLA).

    On JAX the cache is a fixed buffer: `ops.slice_update`, one in-place XLA
    op with the semantics of XLA's DynamicUpdateSlice (the start is clamped
    so the update fits).

    Args:
        cache: (batch, heads, cache_length, dim) tensor.
        update: (batch, heads, update_length, dim) tensor, cast to the cache dtype.
        index: int scalar (Python or tensor). First position written.

    Returns:
        A tensor of the cache's dtype: (batch, heads, index + update_length,
        dim) where the cache grows, the cache's shape on JAX.
    """
    update = ops.cast(update, cache.dtype)
    if growing_cache():
        return ops.concatenate([cache[:, :, :index], update], axis=2)
    return ops.slice_update(cache, [0, 0, index, 0], update)


def decoding_loop(cond, body, loop_vars):
    """`ops.while_loop` for a decoding loop whose cache may grow (`growing_cache`).

    On TensorFlow a `while` loop keeps each tensor's shape unless told
    otherwise: every loop variable may change its batch (axis 0, as settled
    rows leave: `shrinking_batch`), and every rank-4 one, a (batch, heads,
    length, dim) cache, its length (axis 2), from one step to the next.
    """
    if keras.backend.backend() != "tensorflow":
        return ops.while_loop(cond, body, loop_vars)
    import tensorflow as tf

    def invariant(tensor):
        shape = tf.TensorShape(tensor.shape)
        if shape.rank == 4:
            return tf.TensorShape([None, shape[1], None, shape[3]])
        if shape.rank:
            return tf.TensorShape([None, *shape[1:]])
        return shape

    loop_vars = tuple(loop_vars)
    invariants = tf.nest.map_structure(invariant, loop_vars)
    return tf.while_loop(
        cond, lambda *state: tuple(body(*state)), loop_vars, shape_invariants=invariants
    )


def compile_search(function, variables):
    """Compiles `function(*tensors)`, which reads `variables`, as one program.

    JAX: `jax.jit` with the variables passed as arguments (under a
    `StatelessScope`), so later weight updates are seen and weights are not
    baked into the program as constants. TensorFlow: a `tf.function` graph
    (XLA off, so the same graph exports and serves without XLA), traced
    without AutoGraph, as the export traces it: the search's loops and
    branches are TensorFlow's own (`decoding_loop`), so AutoGraph has
    nothing to convert but every layer's `call`, a large part of a
    process's first trace (`benchmarks/search_tracing.py`); and traced once
    for arguments of any shape (of their rank and dtype), as TensorFlow's
    `reduce_retracing` would trace at the second shape anyway. PyTorch:
    `function` itself, run eagerly under `torch.no_grad()` (a decoding loop's
    data-dependent stopping and growing cache suit `torch.compile` poorly).

    Args:
        function: takes arrays (positional arguments only) and returns arrays.
        variables: the variables `function` reads.

    Returns:
        A callable with the signature of `function`; on JAX it compiles once
        per new input shape. On JAX and TensorFlow it may be called from
        several threads at once (traces take turns).
    """
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        variables = list(variables)

        def stateless(values, *args):
            with keras.StatelessScope(state_mapping=list(zip(variables, values, strict=True))):
                return function(*args)

        jitted = jax.jit(stateless)
        return _traced_in_turn(lambda *args: jitted([v.value for v in variables], *args))
    if backend == "tensorflow":
        import tensorflow as tf

        traced = tf.function(function, autograph=False)
        graphs = {}  # (rank, dtype) of each argument: its graph for every shape

        def any_shape(*args):
            if tf.config.functions_run_eagerly():  # as a `tf.function` is, for debugging
                return traced(*args)
            # `reduce_retracing` traces the first shape, then once more for all others:
            # tracing for unknown dimensions from the start saves that second trace.
            specs = [tf.TensorSpec([None] * len(x.shape), x.dtype) for x in args]
            key = tuple((spec.shape.rank, spec.dtype) for spec in specs)
            if key not in graphs:
                graphs[key] = traced.get_concrete_function(*specs)
            return graphs[key](*args)

        return _traced_in_turn(any_shape)
    if backend == "torch":
        import torch

        return torch.no_grad()(function)
    raise NotImplementedError(
        f"Decoding supports the tensorflow, jax and torch backends, not {backend}."
    )


# Held while a compiled search traces (`_traced_in_turn`); reentrant, as a trace may call
# another compiled function.
_TRACING = threading.RLock()


def _traced_in_turn(compiled):
    """`compiled`, safe to call from several threads (`decoding_workers`).

    Tracing runs the model's layers in Python, and a decoding loop's tracing
    sets layer attributes (`Seq2SeqTransformer.fixed_decoder_weights`), so
    two threads must not trace at once, whichever searches they trace: a
    call with arguments of shapes not seen before takes the one tracing lock.
    Calls of a compiled shape run side by side.
    """
    seen = set()

    def call(*args):
        shapes = tuple(
            (tuple(x.shape), str(x.dtype)) if hasattr(x, "shape") else (type(x), x)
            for x in keras.tree.flatten(args)
        )
        if shapes in seen:
            return compiled(*args)
        with _TRACING:
            outputs = compiled(*args)
            seen.add(shapes)
        return outputs

    return call
