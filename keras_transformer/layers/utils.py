"""Small helpers shared by the layers."""

import keras
from keras import ops


def clone_initializer(initializer):
    """A fresh copy of `initializer`.

    Sublayers must not share one seeded initializer object: with a fixed seed
    they would all draw the same values.
    """
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())


def tensorflow_runs_op_by_op():
    """Whether this code runs on TensorFlow outside XLA (eagerly or in a plain `tf.function`).

    There TensorFlow's executor runs every op as a kernel of its own, one pass
    over memory each, where XLA (JAX, or `jit_compile=True`) fuses elementwise
    code. Dropout, LayerNorm and `FusedAdam` choose their form by it.
    """
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    if tf.executing_eagerly():
        return True
    try:  # a private TensorFlow module; without it, XLA is taken to be off
        from tensorflow.python.ops import control_flow_util
    except ImportError:
        return True
    return not control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def update_cache(cache, update, index):
    """`cache` with `update` written at position `index` of axis 1.

    The semantics of XLA's DynamicUpdateSlice (the start is clamped so the
    update fits). On JAX it is `ops.slice_update` (one in-place XLA op). On
    TensorFlow, Keras implements `ops.slice_update` with the op
    `XlaDynamicUpdateSlice`, which only runs compiled by XLA: a graph holding
    it fails in a `tensorflow_model_server` (no XLA) and compiles the op on
    demand in `tf.function`s. There the write is `TensorScatterUpdate`, a
    core op that copies the values exactly, so both paths decode the same
    numbers (and about as fast: within 5% in a beam search of the base model).
    On torch, which decodes eagerly, the start is clamped in Python and
    written with `ops.slice_update`.

    Args:
        cache: (batch, cache_length, heads, dim) tensor.
        update: (batch, update_length, heads, dim) tensor, cast to the cache dtype.
        index: int scalar (Python or tensor). First position written.

    Returns:
        A tensor of the shape and dtype of `cache`.
    """
    update = ops.cast(update, cache.dtype)
    if keras.backend.backend() == "torch":  # torch's slice assignment does not clamp
        last_start = cache.shape[1] - update.shape[1]
        index = min(max(int(index), 0), last_start)  # eager: the index is a concrete value
    if keras.backend.backend() != "tensorflow":
        return ops.slice_update(cache, [0, index, 0, 0], update)
    import tensorflow as tf

    batch, cache_length = tf.unstack(tf.shape(cache, out_type=tf.int32)[:2])
    update_length = tf.shape(update, out_type=tf.int32)[1]
    start = tf.clip_by_value(tf.cast(index, tf.int32), 0, cache_length - update_length)
    rows = tf.broadcast_to(tf.range(batch)[:, None], [batch, update_length])
    columns = tf.broadcast_to(start + tf.range(update_length)[None, :], [batch, update_length])
    indices = tf.stack([rows, columns], axis=-1)  # (batch, update_length, 2)
    return tf.tensor_scatter_nd_update(cache, indices, update)
