"""A `keras.layers.Dense` whose LoRA factors are saved apart from its frozen kernel."""

import keras

from keras_transformer.compat import lora_base_kernel

# The names the LoRA factors are stored under, beside the layer's usual variables.
LORA_KEYS = ("lora_kernel_a", "lora_kernel_b")


def save_unmerged(layer, store):
    """Stores a LoRA-enabled layer's base kernel, bias and factors, each as it is.

    Keras' `Dense` and `EinsumDense` store `kernel + (alpha / rank) A B` and no
    factors, and zero the factors when loading: right for a model file, wrong for
    a checkpoint a run resumes from (the base would move and the factors restart).
    """
    store["0"] = lora_base_kernel(layer)
    if layer.bias is not None:
        store["1"] = layer.bias
    for key in LORA_KEYS:
        store[key] = getattr(layer, key)


def load_unmerged(layer, store):
    """Loads what `save_unmerged` stored; returns False for a store without factors.

    Raises:
        ValueError: one line, for factors of other shapes than the layer's
            (such as the per-head factors of an attention projection that
            earlier versions saved): loading them would change the model.
    """
    if not all(key in store for key in LORA_KEYS):
        return False
    for key in LORA_KEYS:
        saved, expected = tuple(store[key].shape), tuple(getattr(layer, key).shape)
        if saved != expected:
            raise ValueError(
                f"{layer.name}: saved LoRA factor {key} has shape {saved}, this version's "
                f"is {expected} (per-head factors of an earlier version cannot be loaded)"
            )
    lora_base_kernel(layer).assign(store["0"])
    if layer.bias is not None:
        layer.bias.assign(store["1"])
    for key in LORA_KEYS:
        getattr(layer, key).assign(store[key])
    return True


class UnmergedLoraSaving:
    """Mixed into a Keras layer with `enable_lora`: its factors are saved and loaded unmerged."""

    def save_own_variables(self, store):
        if self.built and self.lora_enabled:
            save_unmerged(self, store)
        else:
            super().save_own_variables(store)

    def load_own_variables(self, store):
        if not (self.built and self.lora_enabled and load_unmerged(self, store)):
            super().load_own_variables(store)


@keras.saving.register_keras_serializable(package="keras_transformer")
class AdaptableDense(UnmergedLoraSaving, keras.layers.Dense):
    """`keras.layers.Dense` that saves its LoRA factors (`enable_lora`) unmerged.

    Without LoRA it is `Dense`, saved the same way. With LoRA (`enable_lora`,
    Keras' own: the kernel frozen, `kernel + (alpha / rank) A B` computed by
    the `kernel` property) its weights file holds the base kernel, the bias and
    both factors as they are, so that a checkpoint restores the training state
    exactly. A store without factors (a plain model's file) loads as Keras
    loads it: the kernel given, the factors zeroed.

    Args:
        **kwargs: `keras.layers.Dense` arguments.

    Example:

    >>> layer = AdaptableDense(8)
    >>> layer.build((None, 4))
    >>> layer.enable_lora(2)
    >>> [variable.name for variable in layer.trainable_weights]
    ['bias', 'lora_kernel_a', 'lora_kernel_b']
    """
