"""Which backend Keras runs on, and whether it computes on an accelerator."""

import functools

import keras


def name():
    """The name of the Keras backend: "tensorflow", "jax" or "torch" (or another of Keras')."""
    return keras.backend.backend()


def is_tensorflow():
    """Whether Keras runs on TensorFlow (`tf.distribute`, SavedModels, `tf.data` in the step)."""
    return name() == "tensorflow"


def is_jax():
    """Whether Keras runs on JAX (`keras.distribution`, `jax.jit`, JAX's compilation cache)."""
    return name() == "jax"


@functools.cache  # the devices are fixed once the backend has started
def on_accelerator():
    """Whether the backend computes on a GPU or TPU rather than the CPU."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.default_backend() != "cpu"
    if backend == "tensorflow":
        import tensorflow as tf

        # The visible devices, not the logical ones: asking for those would start TensorFlow's
        # runtime, after which a program can no longer split the CPU or choose devices.
        return any(tf.config.get_visible_devices(kind) for kind in ("GPU", "TPU"))
    if backend == "torch":
        import torch

        return torch.cuda.is_available() or torch.backends.mps.is_available()
    return True  # an unknown backend: the stock ops


def require_tensorflow(argument):
    """Raises `ValueError` naming `argument` unless the backend is TensorFlow."""
    _require("tensorflow", "TensorFlow", argument)


def require_torch(argument):
    """Raises `ValueError` naming `argument` unless the backend is torch."""
    _require("torch", "PyTorch", argument)


def _require(name, title, argument):
    backend = keras.backend.backend()
    if backend != name:
        raise ValueError(
            f'`{argument}` needs the {title} backend. Received: {argument} with backend "{backend}"'
        )
