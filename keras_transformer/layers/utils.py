"""Small helpers shared by the layers."""

import contextlib
import threading

import keras


def clone_initializer(initializer):
    """A fresh copy of `initializer`.

    Sublayers must not share one seeded initializer object: with a fixed seed
    they would all draw the same values.
    """
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())


# Values a layer prepared for the trace under way in this thread, by layer.
_thread_values = threading.local()


@contextlib.contextmanager
def thread_value(layer, value):
    """Makes `value` what `current_thread_value(layer)` returns in this thread, inside.

    A decoding loop's weight matrices are prepared once per trace and read by
    the layer's calls in that trace. Another thread tracing the same layer at
    the same time (a server translating two requests) must not see them: they
    belong to the other trace's graph, and they would not follow the weights
    after an update.
    """
    if not hasattr(_thread_values, "by_layer"):
        _thread_values.by_layer = {}
    values = _thread_values.by_layer
    key = id(layer)
    previous = values.get(key)
    values[key] = value
    try:
        yield
    finally:
        if previous is None:
            del values[key]
        else:
            values[key] = previous


def current_thread_value(layer):
    """The value `layer` entered with `thread_value` in this thread, or `None`."""
    return getattr(_thread_values, "by_layer", {}).get(id(layer))
