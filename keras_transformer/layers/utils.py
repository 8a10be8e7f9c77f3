"""Small helpers shared by the layers."""

import keras


def clone_initializer(initializer):
    """A fresh copy of `initializer`.

    Sublayers must not share one seeded initializer object: with a fixed seed
    they would all draw the same values.
    """
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())
