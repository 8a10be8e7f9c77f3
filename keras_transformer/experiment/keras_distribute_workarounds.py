"""Workarounds for Keras' TensorFlow trainer under `tf.distribute`, where Keras needs them.

Two problems of Keras 3.15's TensorFlow trainer stop `fit`/`evaluate` of a model built
in a `tf.distribute` strategy's scope:

1. Keras builds the model before the first step from `strategy.reduce("MEAN",
   first_batch)`: that turns the int token ids into floats (which the model refuses),
   and MultiWorkerMirroredStrategy rejects the nested dict outright. One replica's
   share of the batch has the right dtypes and shapes, which is all the build needs.
2. Keras reduces a step's logs with `reduce_per_replica(..., reduction="auto")`,
   hard-coded (`Model.distribute_reduction_method` is not read), which under
   MultiWorkerMirroredStrategy with 2+ workers becomes `strategy.reduce("MEAN",
   value, axis=0)`; that raises on every scalar log ("Invalid reduction dimension 0
   for input with 0 dimensions", tensorflow/tensorflow#72388). Giving each replica's
   scalar a leading axis of length 1 makes that call the plain mean over replicas.

`apply_distribute_workarounds(model)` patches one model instance (its class, and so
the name saved in `.keras` files, stays the same). `tests/test_multi_worker.py` and
`tests/test_distributed.py` reproduce each problem without its workaround and expect
it to fail: when a Keras release fixes one, they say so, and the workaround goes.
"""

import types

import keras

# The newest Keras release checked to need the workarounds. A newer one runs without
# them: if it still has the problems, the multi-worker tests fail and this moves on.
NEEDED_THROUGH = (3, 15)


def keras_needs_workarounds(version=None):
    """Whether Keras `version` (default: the installed one) is known to need the workarounds.

    Args:
        version: str such as `"3.15.1"`, or None for `keras.version()`.

    Returns:
        bool.
    """
    major, minor = (int(part) for part in (version or keras.version()).split(".")[:2])
    return (major, minor) <= NEEDED_THROUGH


def apply_distribute_workarounds(model, symbolic_build=True, logs=True):
    """Patches `model` (created in a `tf.distribute` scope) for Keras' trainer; returns it.

    Nothing changes on other backends, outside a strategy's scope, or with a Keras
    release that `keras_needs_workarounds` says is fixed.

    Args:
        model: a `keras.Model`, created in the strategy's scope.
        symbolic_build: apply workaround 1 (the build from one replica's batch).
        logs: apply workaround 2 (multi-worker scalar logs). Both default to on; the
            tests turn one off to check whether Keras still needs it.

    Returns:
        `model`.
    """
    if keras.backend.backend() != "tensorflow" or not keras_needs_workarounds():
        return model
    # Keras keeps the strategy whose scope the model was created in (None outside one).
    strategy = getattr(model, "_distribute_strategy", None)
    if strategy is None:
        return model
    if symbolic_build:
        model._maybe_symbolic_build = types.MethodType(_build_from_one_replica, model)
    if logs and _in_multi_worker_mode(strategy):
        train_step, test_step = model.train_step, model.test_step
        model.train_step = lambda *args, **kwargs: _reducible(train_step(*args, **kwargs))
        model.test_step = lambda *args, **kwargs: _reducible(test_step(*args, **kwargs))
    return model


def _build_from_one_replica(model, iterator=None, data_batch=None):
    """`Trainer._maybe_symbolic_build` from one replica's share of the first batch."""
    if iterator is None:
        return type(model)._maybe_symbolic_build(model, data_batch=data_batch)
    import tensorflow as tf

    strategy = model.distribute_strategy

    def local(value):
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    for _, _, batches in iterator:
        data_batch = keras.tree.map_structure(local, next(batches))
        break
    with strategy.scope():
        model._symbolic_build(data_batch=data_batch)


def _in_multi_worker_mode(strategy):
    # The condition of keras/src/backend/tensorflow/trainer.py,
    # `_collective_all_reduce_multi_worker`: only then does Keras reduce with `axis=0`.
    import tensorflow as tf

    return (
        isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        and strategy.extended._in_multi_worker_mode()
    )


def _reducible(logs):
    """One replica's step logs with every scalar tensor made `(1,)`."""
    import tensorflow as tf

    def expand(value):
        if isinstance(value, (tf.Tensor, tf.Variable)) and value.shape.rank == 0:
            return tf.expand_dims(value, 0)
        return value

    return keras.tree.map_structure(expand, logs)
