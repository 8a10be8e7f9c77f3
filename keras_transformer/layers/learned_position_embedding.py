"""Learned positional embeddings: the paper's Table 3 row (E)."""

import keras
from keras import ops

from keras_transformer.layers.utils import clone_initializer


@keras.saving.register_keras_serializable(package="keras_transformer")
class LearnedPositionEmbedding(keras.layers.Layer):
    """A trainable embedding per position, up to `max_length` positions.

    Table 3 row (E) replaces the sinusoids of 3.5 with learned positional
    embeddings and reports nearly identical results. Unlike the sinusoid, it
    cannot represent positions past `max_length`.

    Args:
        max_length: int. Number of positions that have an embedding.
        initializer: initializer of the (max_length, d_model) table.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (batch, length, d_model) tensor; only its shape is used.
        start_index: int or scalar int tensor. Position of the first step.
            Positions `start_index + length - 1 >= max_length` are invalid
            (checked when both are Python ints).

    Returns:
        The embeddings, broadcast to the shape of `inputs`.

    Example:

    >>> layer = LearnedPositionEmbedding(max_length=256)
    >>> layer(keras.random.normal((2, 10, 64))).shape
    (2, 10, 64)
    """

    def __init__(self, max_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(max_length, int) or max_length <= 0:
            raise ValueError(
                f"`max_length` must be a positive int. Received: max_length={max_length!r}"
            )
        self.max_length = max_length
        self.initializer = keras.initializers.get(initializer)

    def build(self, inputs_shape):
        self.position_embeddings = self.add_weight(
            shape=(self.max_length, inputs_shape[-1]),
            initializer=clone_initializer(self.initializer),
            name="position_embeddings",
        )
        self.built = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        length = shape[-2]
        static = isinstance(length, int) and isinstance(start_index, int)
        if static and start_index + length > self.max_length:
            raise ValueError(
                f"Positions up to {start_index + length - 1} requested but "
                f"`max_length` is {self.max_length}. Received: start_index={start_index}, "
                f"length={length}."
            )
        positions = ops.arange(length) + start_index
        embeddings = ops.take(self.position_embeddings, positions, axis=0)
        return ops.broadcast_to(ops.cast(embeddings, inputs.dtype), shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
