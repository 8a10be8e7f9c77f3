"""A `keras.layers.EinsumDense` whose LoRA factors are saved apart from its frozen kernel."""

import keras

from keras_transformer.layers.adaptable_dense import UnmergedLoraSaving


@keras.saving.register_keras_serializable(package="keras_transformer")
class AdaptableEinsumDense(UnmergedLoraSaving, keras.layers.EinsumDense):
    """`keras.layers.EinsumDense` that saves its LoRA factors (`enable_lora`) unmerged.

    As `AdaptableDense`: without LoRA it is `EinsumDense`; with Keras' LoRA
    its weights file holds the base kernel, the bias and the factors as they
    are. Keras' factors of a (d_in, heads, head_dim) kernel are A
    (d_in, heads, rank) and B (rank, head_dim): a rank-`rank` change of each
    head's (d_in, head_dim) matrix.

    Args:
        **kwargs: `keras.layers.EinsumDense` arguments.

    Example:

    >>> layer = AdaptableEinsumDense("btd,dhk->bthk", output_shape=(None, 2, 4))
    >>> layer.build((None, None, 8))
    >>> layer.enable_lora(2)
    >>> [tuple(variable.shape) for variable in layer.trainable_weights]
    [(8, 2, 2), (2, 4)]
    """
