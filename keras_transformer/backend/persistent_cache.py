"""JAX's persistent compilation cache for the programs a process compiles."""

import contextlib
import os

from keras_transformer.backend.device import is_jax


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
    if not is_jax():
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
