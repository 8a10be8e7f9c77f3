"""Keras 3.15 workaround: multi-worker `fit`/`evaluate` fail reducing the scalar logs.

Keras' TensorFlow trainer reduces a step's logs with `reduce_per_replica(...,
reduction="auto")` (hard-coded, so `Model.distribute_reduction_method` is not
read), which under MultiWorkerMirroredStrategy with 2+ workers becomes
`strategy.reduce("MEAN", value, axis=0)`; that raises on every scalar log
("Invalid reduction dimension 0 for input with 0 dimensions"), see
tensorflow/tensorflow#72388. Giving each replica's scalar a leading axis of
length 1 makes that call the plain mean over replicas, returned as a scalar.

Remove this module, and the `train_step`/`test_step` overrides of
`Seq2SeqTransformer` that call it, once Keras reduces multi-worker logs without
`axis=0` (`tests/test_multi_worker.py` must keep passing).
"""

import keras


def reducible_logs(model, logs):
    """`logs` of one replica's `model.train_step`/`test_step`, scalars made `(1,)` if needed."""
    if keras.backend.backend() != "tensorflow":
        return logs
    import tensorflow as tf

    strategy = model.distribute_strategy
    # The condition of keras/src/backend/tensorflow/trainer.py,
    # `_collective_all_reduce_multi_worker`: only then is `axis=0` used.
    if not (
        isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        and strategy.extended._in_multi_worker_mode()
    ):
        return logs

    def expand(value):
        if isinstance(value, (tf.Tensor, tf.Variable)) and value.shape.rank == 0:
            return tf.expand_dims(value, 0)
        return value

    return keras.tree.map_structure(expand, logs)
