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


def update_cache(cache, update, index):
    """`cache` with `update` written at position `index` of axis 1.

    The semantics of XLA's DynamicUpdateSlice (the start is clamped so the
    update fits). On JAX it is `ops.slice_update` (one in-place XLA op). On
    TensorFlow, Keras implements `ops.slice_update` with the op
    `XlaDynamicUpdateSlice`, which only runs compiled by XLA: a graph holding
    it fails in a `tensorflow_model_server` (no XLA) and compiles the op on
    demand in `tf.function`s. There the write is `Pad` + `SelectV2`, core
    ops that copy the values exactly, so both paths decode the same numbers.

    Args:
        cache: (batch, cache_length, heads, dim) tensor.
        update: (batch, update_length, heads, dim) tensor, cast to the cache dtype.
        index: int scalar (Python or tensor). First position written.

    Returns:
        A tensor of the shape and dtype of `cache`.
    """
    update = ops.cast(update, cache.dtype)
    if keras.backend.backend() != "tensorflow":
        return ops.slice_update(cache, [0, index, 0, 0], update)
    import tensorflow as tf

    cache_length = tf.shape(cache, out_type=tf.int32)[1]
    update_length = tf.shape(update, out_type=tf.int32)[1]
    start = tf.clip_by_value(tf.cast(index, tf.int32), 0, cache_length - update_length)
    zero = tf.zeros([2], tf.int32)
    paddings = tf.stack([zero, [start, cache_length - update_length - start], zero, zero])
    positions = tf.range(cache_length)
    written = (positions >= start) & (positions < start + update_length)  # (cache_length,)
    return tf.where(written[None, :, None, None], tf.pad(update, paddings), cache)
