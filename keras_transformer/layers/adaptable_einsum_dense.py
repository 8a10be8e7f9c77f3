"""A `keras.layers.EinsumDense` whose LoRA is the whole projection's, its factors saved apart."""

import keras
from keras import ops

from keras_transformer.compat import lora_base_kernel, unlocked_tracking
from keras_transformer.layers.adaptable_dense import UnmergedLoraSaving


def input_axes(equation):
    """How many leading kernel axes an `EinsumDense` equation contracts with its input.

    `"btd,dhk->bthk"` (d_model to heads x head_dim): 1; `"bthk,hkd->btd"`
    (heads x head_dim to d_model): 2. None when the contracted axes are not
    the kernel's first ones (the kernel is then no matrix of input x output).
    """
    inputs, rest = equation.split(",")
    kernel, output = rest.split("->")
    contracted = [axis for axis in kernel if axis in inputs and axis not in output]
    if not contracted or list(kernel[: len(contracted)]) != contracted:
        return None
    return len(contracted)


@keras.saving.register_keras_serializable(package="keras_transformer")
class AdaptableEinsumDense(UnmergedLoraSaving, keras.layers.EinsumDense):
    """`keras.layers.EinsumDense` with the LoRA of the whole projection, saved unmerged.

    Without LoRA it is `EinsumDense`. `enable_lora(rank)` is Keras' (the
    kernel frozen, `lora_rank`, `lora_alpha`, `lora_enabled`, the `kernel`
    property that computes `kernel + (alpha / rank) A B`), with one
    difference: the factors' shapes. Keras' A of a (d_in, heads, head_dim)
    kernel is (d_in, heads, rank) and its B (rank, head_dim): one rank-`rank`
    change of each head's (d_in, head_dim) matrix, `heads` times the
    parameters of LoRA as Hu et al. (2021) define it. Here A is (d_in, rank)
    and B (rank, heads, head_dim): a change of rank `rank` of the whole
    d_in x (heads * head_dim) projection, the paper's, with A B a
    `tensordot` over the rank axis. For a kernel whose input axes are all
    but the last, such as the output projection (heads, head_dim, d_out),
    Keras' factors are already the whole projection's and are kept.

    Its weights file holds the base kernel, the bias and the factors as
    they are (`UnmergedLoraSaving`); factors of other shapes are refused.

    Args:
        **kwargs: `keras.layers.EinsumDense` arguments.

    Example:

    >>> layer = AdaptableEinsumDense("btd,dhk->bthk", output_shape=(None, 2, 4))
    >>> layer.build((None, None, 8))
    >>> layer.enable_lora(2)
    >>> [tuple(variable.shape) for variable in layer.trainable_weights]
    [(8, 2), (2, 2, 4)]
    """

    def enable_lora(self, rank, lora_alpha=None, a_initializer="he_uniform", b_initializer="zeros"):
        """Keras' `enable_lora`, with factors A (input axes, rank) and B (rank, output axes).

        Args:
            rank: int, the rank of the change of the whole projection.
            lora_alpha: number or None (`rank`): the change is scaled by
                `lora_alpha / rank`.
            a_initializer: A's initializer (Keras': he-uniform).
            b_initializer: B's initializer (Keras': zeros, so that the layer
                starts as the base layer).
        """
        super().enable_lora(
            rank, lora_alpha=lora_alpha, a_initializer=a_initializer, b_initializer=b_initializer
        )
        shape = tuple(lora_base_kernel(self).shape)
        inputs = input_axes(self.equation)
        if inputs is None or inputs == len(shape) - 1:
            return  # Keras' factors: already the whole projection's
        if self.quantization_mode is not None:
            raise NotImplementedError("LoRA of a quantized `AdaptableEinsumDense` is not built.")
        # Keras' per-head factors give way to the whole projection's (same names, same order).
        del self.lora_kernel_a, self.lora_kernel_b
        with unlocked_tracking(self):
            self.lora_kernel_a = self.add_weight(
                name="lora_kernel_a",
                shape=shape[:inputs] + (rank,),
                initializer=keras.initializers.get(a_initializer),
                dtype="float32",
                regularizer=self.kernel_regularizer,
            )
            self.lora_kernel_b = self.add_weight(
                name="lora_kernel_b",
                shape=(rank,) + shape[inputs:],
                initializer=keras.initializers.get(b_initializer),
                dtype="float32",
                regularizer=self.kernel_regularizer,
            )

    @property
    def kernel(self):
        """The base kernel, plus `(alpha / rank) A B` once LoRA is enabled (Keras' property)."""
        if not (self.lora_enabled and self.quantization_mode is None):
            return super().kernel
        delta = ops.tensordot(self.lora_kernel_a, self.lora_kernel_b, axes=1)
        base = lora_base_kernel(self)
        return ops.cast(
            ops.add(base, (self.lora_alpha / self.lora_rank) * delta), self.compute_dtype
        )
