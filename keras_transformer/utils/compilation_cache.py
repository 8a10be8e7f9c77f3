"""Where JAX's persistent compilation cache (`backend.compilation_cache`) keeps programs."""

import os

# Under a run directory: its training steps and searches (`run_experiment`).
from keras_transformer.utils.run_directory import COMPILATION_CACHE_DIR as RUN_CACHE


def user_cache_directory():
    """`$XDG_CACHE_HOME/keras_transformer/xla_cache`, by default under `~/.cache`.

    Where `keras-transformer translate` keeps the searches it compiled: they
    depend on a model's shapes, not on its weights, so any model of the same
    sizes reuses them.
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "keras_transformer", RUN_CACHE)
