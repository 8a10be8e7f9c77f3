"""What a training step needs of its backend: building before the trace, the seed's device,
the replica context and whether training spans processes.
"""

import contextlib

import keras

from keras_transformer.backend.device import is_tensorflow


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
