"""A command's process ends without Python's last garbage collections."""

import atexit
import gc

_registered = False


def skip_collection_at_exit():
    """Makes this process skip the garbage collections of interpreter shutdown.

    When Python exits, it runs a full garbage collection, which walks every object still
    alive. After a command has loaded TensorFlow, Keras and a traced model, that is millions of
    objects: 1-2 s spent after the command's work is done, on every run
    (`benchmarks/command_exit.py`). This registers `gc.freeze` to run at exit, which moves
    those objects out of the collector's reach. Exit handlers still run, and what reference
    counting frees is still finalized (files closed, buffers flushed); only unreachable
    cycles are left to the operating system, which reclaims the whole process anyway.

    Called by the command-line entry points only (`keras-transformer`, the recipes' scripts
    through `run_recipe`, `python -m keras_transformer.*`): a program that imports the
    package keeps Python's own exit. Calling it again changes nothing.

    Example:

    >>> skip_collection_at_exit()  # in a command's main(), before its work
    """
    global _registered
    if not _registered:
        atexit.register(gc.freeze)
        _registered = True
