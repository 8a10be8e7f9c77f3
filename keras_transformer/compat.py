"""Every private TensorFlow and Keras name the package reads, in one place.

Each function here reaches into a module or attribute that its library does
not document, because no public API gives the same thing. They are pinned by
the upper bound on `keras` in pyproject.toml, and `tests/test_compat.py`
checks each of them, so that a new Keras or TensorFlow that renames one fails
there with a message that names it, not deep inside a training step.

Keras 3.15's `tf.distribute` workarounds are the exception: they are the
distribution code's (`experiment/keras_distribute_workarounds.py`), applied
only for the Keras versions known to need them, and tests that reproduce each
Keras problem without its workaround say when it can go.
"""


def in_xla_context():
    """Whether the TensorFlow graph being traced is compiled by XLA (`jit_compile=True`).

    TensorFlow has no public way to ask. Without the private module, XLA is
    taken to be off, which only costs speed (the forms chosen for op-by-op
    TensorFlow are also exact under XLA).

    Returns:
        bool. False outside a graph (eager code).
    """
    import tensorflow as tf

    if tf.executing_eagerly():
        return False
    try:
        from tensorflow.python.ops import control_flow_util
    except ImportError:
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def adam_moments(optimizer, variable):
    """The first and second moment variables that Keras' `Adam` keeps for `variable`.

    Args:
        optimizer: a built `keras.optimizers.Adam`.
        variable: one of the variables it updates.

    Returns:
        `(momentum, velocity)`, two `keras.Variable`s of the shape of `variable`.
    """
    index = optimizer._get_variable_index(variable)
    return optimizer._momentums[index], optimizer._velocities[index]


def batch_counter(optimizer):
    """The optimizer's count of batches applied, which differs from `iterations` (updates).

    Under gradient accumulation Keras counts batches in `_iterations` and
    exposes updates as `iterations`; an optimizer without accumulation may
    lack the private counter, and then the two are the same.
    """
    return getattr(optimizer, "_iterations", optimizer.iterations)


def torch_adam_update_all(optimizer, grads, variables, learning_rate):
    """Keras' torch update of `Adam`, all variables at once through `torch._foreach_*`.

    Keras gives plain `Adam` this update (its `TorchParallelOptimizer`) but a
    subclass the per-variable loop; this applies the parallel one to
    `optimizer`'s own variables.
    """
    import torch
    from keras.src.backend.torch.optimizers import torch_adam

    with torch.no_grad():
        torch_adam.Adam._parallel_update_step(optimizer, grads, variables, learning_rate)


def in_safe_mode():
    """Whether Keras deserializes in safe mode (no file paths or lambdas from configs)."""
    from keras.src.saving import serialization_lib

    return bool(serialization_lib.in_safe_mode())
