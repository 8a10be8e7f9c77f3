"""The fast forms: which form of each function a layer, the loss or the optimizer computes.

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
"""

import contextlib
import dataclasses
import functools
import os

import keras

from keras_transformer import compat
from keras_transformer.backend.device import on_accelerator

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
