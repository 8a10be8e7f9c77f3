"""Tracing Keras code into a TensorFlow graph that runs without XLA."""

import contextlib
import threading

import tensorflow as tf

_LOCK = threading.Lock()


def _slice_update(inputs, start_indices, updates):
    """`inputs` with `updates` written at `start_indices`, in core TensorFlow ops.

    The semantics of XLA's DynamicUpdateSlice, start indices clamped so the
    update fits, built from `Pad` and `SelectV2`: the result is an exact copy,
    so decoding gives the same numbers as with the XLA op.
    """
    inputs = tf.convert_to_tensor(inputs)
    updates = tf.cast(updates, inputs.dtype)
    input_shape = tf.shape(inputs, out_type=tf.int32)
    update_shape = tf.shape(updates, out_type=tf.int32)
    start = tf.stack([tf.cast(index, tf.int32) for index in start_indices])
    start = tf.clip_by_value(start, 0, input_shape - update_shape)
    paddings = tf.stack([start, input_shape - update_shape - start], axis=1)
    written = tf.pad(tf.ones_like(updates, dtype=tf.bool), paddings)  # pads with False
    return tf.where(written, tf.pad(updates, paddings), inputs)


@contextlib.contextmanager
def xla_free_tracing():
    """Traces `keras.ops.slice_update` with core TensorFlow ops instead of an XLA op.

    On the TensorFlow backend, Keras 3 implements `ops.slice_update` with
    `XlaDynamicUpdateSlice`, an op that only runs by compiling it with XLA
    (on demand, outside a `jit_compile` function). The decoder's key/value
    cache (`MultiHeadAttention`) writes each step with it, so a graph traced
    as is fails to load or to run in a `tensorflow_model_server` without XLA.
    Inside this context the same call traces to `Pad` + `SelectV2`.

    The swap is undone on exit and serialized across threads. While it is in
    place, `ops.slice_update` calls from other threads get the core-op
    version too, which computes the same values.

    Example:

    >>> with xla_free_tracing():
    ...     concrete = serve.get_concrete_function()
    """
    from keras.src.backend.tensorflow import core

    with _LOCK:
        original = core.slice_update
        core.slice_update = _slice_update
        try:
            yield
        finally:
            core.slice_update = original
