"""The one place that looks at the Keras backend and the device, and picks each fast form.

The layers, the loss and the optimizer compute the functions of Keras' own
ops; on some backends a different form of the same function trains faster
on a CPU (docs/performance.md). `fast_forms()` says which form applies; it is
called when a layer is built or a function traced, so a compiled step holds
one form and no check. The forms, where each is on:

| form | on |
|---|---|
| `hash_dropout`: masks from an integer hash of the element index | JAX, TensorFlow under XLA |
| `layer_norm_scale_last`: LayerNorm scaling the normalized input last | JAX, TensorFlow under XLA |
| `fused_adam`: Adam as TensorFlow's one-kernel `ResourceApplyAdam` | TensorFlow without XLA |
| `kernel_gradient`: kernel gradients, narrower operand transposed first | JAX |
| `loss_gradient`: the label-smoothed loss's one-expression gradient | TensorFlow |
| `blocked_top_k`: decoding's top-k of a wide row from its best blocks (`top_k`) | JAX, TensorFlow |
| `paired_beam_steps`: two beam search steps per loop iteration over a large cache | JAX |
| `one_hot_row_gradient`: an embedding gradient as a matmul (`gather_rows`) | JAX, GPU or TPU |

All but `one_hot_row_gradient` were measured on a CPU only, so on a GPU or TPU
(JAX's default backend is not "cpu", or TensorFlow sees a GPU or TPU) they
fall back to the stock Keras op; `one_hot_row_gradient` is the accelerator's
form (measured on an H200). On torch the stock ops run everywhere (Keras' torch ops call
torch's own fused kernels), except dropout: Keras' torch dropout draws from
torch's global generator, which a checkpoint cannot put back where it was
(torch's `DataLoader` also draws from it when an epoch starts), so a resumed
run would drop other elements. There the masks come from a generator seeded
by the layer's saved seed state (`"torch_generator"`).

For measurement, the environment variable `KERAS_TRANSFORMER_FAST_FORMS`
turns forms off: a comma-separated list of the names above, or `none` for
all of them (read once, at the first use). `fast_forms_disabled` does the
same within one process, for the benchmark that compares them.

The decoding cache (`growing_cache`, `update_cache`, `decoding_loop`) and
the compilation of decoding (`compile_search`) are not speed choices: each
backend gets the form its compiler allows (a cache that grows where shapes
may change, a fixed buffer under `jax.jit`).
"""

import contextlib
import dataclasses
import functools
import math
import os
import threading

import keras
import numpy as np
from keras import ops

from keras_transformer import compat

FORMS = (
    "hash_dropout",
    "layer_norm_scale_last",
    "fused_adam",
    "kernel_gradient",
    "loss_gradient",
    "blocked_top_k",
    "paired_beam_steps",
    "one_hot_row_gradient",
)
# The forms of decoding alone: a training step holds none of them.
DECODING_FORMS = ("blocked_top_k", "paired_beam_steps")
ENVIRONMENT_VARIABLE = "KERAS_TRANSFORMER_FAST_FORMS"

_override = None  # the forms `fast_forms_disabled` turns off, when set

# A decoding batch's bound on sentences x padded length, but for JAX on a CPU
# (`decoding_batch_tokens`); a served SavedModel's too (TensorFlow).
DECODING_BATCH_TOKENS = 4096

# The self-attention cache, in bytes, from which a beam search loop on JAX on a CPU runs two
# steps per iteration (`paired_beam_steps`): more than a CPU's last-level cache holds.
PAIRED_STEPS_MIN_BYTES = 32 * 2**20


@dataclasses.dataclass(frozen=True)
class FastForms:
    """The forms that apply where a layer is built or a function traced.

    Attributes:
        dropout: `"hash"`, `"torch_generator"` or `"keras"` (`keras.random.dropout`).
        layer_norm: `"scale_last"` or `"keras"`
            (`keras.layers.LayerNormalization`'s own code).
        fused_adam: bool. Adam's update as `ResourceApplyAdam`.
        kernel_gradient: bool. `kernel_matmul`'s fenced kernel gradient.
        loss_gradient: bool. The label-smoothed loss's one-expression gradient.
        blocked_top_k: bool. `top_k` ranks a wide row from its best blocks.
        paired_beam_steps: bool. A beam search over a large cache runs two
            steps per loop iteration (`paired_beam_steps`).
        one_hot_row_gradient: bool. `gather_rows`' table gradient as a matmul.
    """

    dropout: str = "keras"
    layer_norm: str = "keras"
    fused_adam: bool = False
    kernel_gradient: bool = False
    loss_gradient: bool = False
    blocked_top_k: bool = False
    paired_beam_steps: bool = False
    one_hot_row_gradient: bool = False


def _parse_disabled(value):
    names = {name.strip() for name in value.split(",") if name.strip()}
    if "none" in names:
        return frozenset(FORMS)
    unknown = names - set(FORMS)
    if unknown:
        raise ValueError(
            f"{ENVIRONMENT_VARIABLE} names unknown fast forms {sorted(unknown)}; "
            f'the forms are {", ".join(FORMS)}, or "none" for all.'
        )
    return frozenset(names)


@functools.cache
def _disabled_by_environment():
    return _parse_disabled(os.environ.get(ENVIRONMENT_VARIABLE, ""))


def disabled_forms():
    """The names of the fast forms turned off (environment variable or `fast_forms_disabled`)."""
    return _override if _override is not None else _disabled_by_environment()


@contextlib.contextmanager
def fast_forms_disabled(names):
    """Turns off the fast forms `names` (or `"none"`: all) for what is built or traced inside.

    Args:
        names: iterable of names from `FORMS`, or a comma-separated string
            as `KERAS_TRANSFORMER_FAST_FORMS` takes.
    """
    global _override
    previous = _override
    _override = _parse_disabled(names if isinstance(names, str) else ",".join(names))
    try:
        yield
    finally:
        _override = previous


def name():
    """The name of the Keras backend: "tensorflow", "jax" or "torch" (or another of Keras')."""
    return keras.backend.backend()


def is_tensorflow():
    """Whether Keras runs on TensorFlow (`tf.distribute`, SavedModels, `tf.data` in the step)."""
    return name() == "tensorflow"


def build_before_tracing(model):
    """Builds `model` and its optimizer now, before Keras traces its train step.

    On TensorFlow without a distribution strategy, Keras builds a fresh model and
    its optimizer inside the first trace of the train step; since that trace made
    variables, `tf.function` traces the step a second time, in which none may be
    made. Built first, the step is traced once: on 2 EPYC AVX2 cores a one-layer
    model's first `fit` took 4.0-4.5 s instead of 9.3-10.0 s. Keras builds the same
    way itself under a strategy and on JAX and torch, so the weights are the same.
    Compiled metrics, if any, are still built in the trace. Elsewhere a no-op.

    Args:
        model: a compiled `keras.Model` whose `build()` needs no input shape.
    """
    if not is_tensorflow():
        return
    if not model.built:
        model.build()
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)


def is_jax():
    """Whether Keras runs on JAX (`keras.distribution`, `jax.jit`, JAX's compilation cache)."""
    return name() == "jax"


@functools.cache  # the devices are fixed once the backend has started
def on_accelerator():
    """Whether the backend computes on a GPU or TPU rather than the CPU."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.default_backend() != "cpu"
    if backend == "tensorflow":
        import tensorflow as tf

        # The visible devices, not the logical ones: asking for those would start TensorFlow's
        # runtime, after which a program can no longer split the CPU or choose devices.
        return any(tf.config.get_visible_devices(kind) for kind in ("GPU", "TPU"))
    if backend == "torch":
        import torch

        return torch.cuda.is_available() or torch.backends.mps.is_available()
    return True  # an unknown backend: the stock ops


def fast_forms():
    """The `FastForms` record for code built or traced now."""
    backend = keras.backend.backend()
    xla = backend == "jax" or (backend == "tensorflow" and compat.in_xla_context())
    return _device_forms(backend, on_accelerator(), xla, disabled_forms())


def applicable_forms(xla, decoding=True):
    """The names of the forms that are on for this backend and device.

    Args:
        xla: bool. Whether the code is compiled by XLA (always so on JAX).
        decoding: bool. Whether to name decoding's forms (`DECODING_FORMS`),
            which a training step holds none of.

    Returns:
        A tuple of names from `FORMS`.
    """
    backend = keras.backend.backend()
    accelerator = on_accelerator()
    everything = _device_forms(backend, accelerator, xla, frozenset())
    names = FORMS if decoding else tuple(n for n in FORMS if n not in DECODING_FORMS)
    return tuple(
        name
        for name in names
        if _device_forms(backend, accelerator, xla, frozenset({name})) != everything
    )


@functools.cache
def _device_forms(backend, accelerator, xla, disabled):
    """The `FastForms` of `backend` on a CPU or an accelerator, `disabled` forms off."""
    if backend == "torch":
        return FastForms(dropout="torch_generator")  # exact resume, on every device
    if backend == "jax" and accelerator:
        return FastForms(one_hot_row_gradient="one_hot_row_gradient" not in disabled)
    if backend not in ("jax", "tensorflow") or accelerator:
        return FastForms()
    return _cpu_forms(backend, xla or backend == "jax", disabled)


@functools.cache
def _cpu_forms(backend, xla, disabled):
    def on(name):
        return name not in disabled

    # Without XLA (TensorFlow's default on a CPU) every op is a kernel of its own: the
    # hash's integer ops cost more there than Keras' Philox draws.
    dropout = "hash" if xla and on("hash_dropout") else "keras"
    layer_norm = "scale_last" if xla and on("layer_norm_scale_last") else "keras"
    tensorflow = backend == "tensorflow"
    return FastForms(
        dropout=dropout,
        layer_norm=layer_norm,
        fused_adam=tensorflow and not xla and on("fused_adam"),
        kernel_gradient=backend == "jax" and on("kernel_gradient"),
        loss_gradient=tensorflow and on("loss_gradient"),
        blocked_top_k=on("blocked_top_k"),
        paired_beam_steps=backend == "jax" and on("paired_beam_steps"),
    )


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


def require_tensorflow(argument):
    """Raises `ValueError` naming `argument` unless the backend is TensorFlow."""
    _require("tensorflow", "TensorFlow", argument)


def require_torch(argument):
    """Raises `ValueError` naming `argument` unless the backend is torch."""
    _require("torch", "PyTorch", argument)


def _require(name, title, argument):
    backend = keras.backend.backend()
    if backend != name:
        raise ValueError(
            f'`{argument}` needs the {title} backend. Received: {argument} with backend "{backend}"'
        )


def wrap_uint32(x):
    """`x` mod 2**32 for "uint32" integer arithmetic.

    Keras holds "uint32" as int64 on torch (torch lacks uint32 shifts), so
    there products and sums are reduced by hand; elsewhere uint32 wraps itself.
    """
    if keras.backend.backend() != "torch":
        return x
    return ops.bitwise_and(x, ops.convert_to_tensor(0xFFFFFFFF, "int64"))


def host_seed_scope():
    """The device scope in which a layer keeps and advances its dropout seed state.

    The CPU on torch: `torch_generator` dropout (`FastForms.dropout`) seeds a
    `torch.Generator` with a Python integer read from the state at every
    call, and a state held on a GPU would make each of those reads wait for
    the GPU to finish its queued work. Elsewhere the seed is used where it
    lives (JAX and TensorFlow hash it in the compiled step), so no scope.
    """
    if keras.backend.backend() == "torch":
        return keras.device("cpu")
    return contextlib.nullcontext()


def replica_context():
    """The `tf.distribute` replica context when the batch is split over replicas, else None."""
    if keras.backend.backend() != "tensorflow":
        return None  # JAX's `keras.distribution` shows the loss the global batch
    import tensorflow as tf

    if not tf.distribute.has_strategy() or tf.distribute.in_cross_replica_context():
        return None
    context = tf.distribute.get_replica_context()
    return context if context is not None and context.num_replicas_in_sync > 1 else None


def in_one_process(model):
    """False when `model` trains across processes (multi-worker TF, multi-process JAX)."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.process_count() == 1
    if backend == "tensorflow":
        import tensorflow as tf

        strategy = model.distribute_strategy
        return not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    return True


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


@contextlib.contextmanager
def compilation_cache(directory):
    """On JAX, caches the programs compiled within the block in `directory`.

    A later process loads each program instead of compiling it again: a
    resumed run's training step, or the beam search of a second `translate`
    of the same model sizes (on 2 CPU cores, 50 sentences of the quickstart
    model took 9 s instead of 22 s, most of it compilation). A cache the
    user set (`JAX_COMPILATION_CACHE_DIR`) is left as it is, and other
    backends are untouched. JAX only stores programs that took at least
    `jax_persistent_cache_min_compile_time_secs` (1 s by default) to compile.
    """
    if not is_jax():
        yield
        return
    import jax

    if jax.config.jax_compilation_cache_dir is not None:
        yield
        return
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:  # a read-only home: compile as without a cache
        yield
        return
    jax.config.update("jax_compilation_cache_dir", os.fspath(directory))
    try:
        yield
    finally:
        jax.config.update("jax_compilation_cache_dir", None)


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
