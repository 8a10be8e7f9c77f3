"""JAX's persistent compilation cache: compiled programs kept on disk between processes."""

import contextlib
import os

from keras_transformer import backend

# Under a run directory: its training steps and searches (`run_experiment`).
RUN_CACHE = "xla_cache"


def user_cache_directory():
    """`$XDG_CACHE_HOME/keras_transformer/xla`, by default under `~/.cache`.

    Where `keras-transformer translate` keeps the searches it compiled: they
    depend on a model's shapes, not on its weights, so any model of the same
    sizes reuses them.
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "keras_transformer", RUN_CACHE)


@contextlib.contextmanager
def compilation_cache(directory):
    """On JAX, caches the programs compiled within the block in `directory`.

    A later process loads each program instead of compiling it again: a
    resumed run's training step, or the beam search of a second `translate`
    of the same model sizes (on 2 CPU cores, 50 sentences of the quickstart
    model took 9 s instead of 22 s, most of it compilation). A cache the
    user set (`JAX_COMPILATION_CACHE_DIR`) is left as it is, and other
    backends are untouched. JAX only stores programs that took at least
    `jax_persistent_cache_min_compile_time_secs` (1 s by default) to compile.
    """
    if not backend.is_jax():
        yield
        return
    import jax

    if jax.config.jax_compilation_cache_dir is not None:
        yield
        return
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:  # a read-only home: compile as without a cache
        yield
        return
    jax.config.update("jax_compilation_cache_dir", os.fspath(directory))
    try:
        yield
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
