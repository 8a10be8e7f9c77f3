"""Finding the last checkpoints of a run, and writing weights atomically."""

import errno
import fnmatch
import math
import os
import re
import shutil
import uuid

from keras_transformer.utils.run_directory import CHECKPOINT_PATTERN

# The files a checkpoint can be (here: this module loads no backend, so the commands find
# checkpoints before TensorFlow loads).
CHECKPOINT_SUFFIXES = (".weights.h5", ".keras")
_LAST_NUMBER = re.compile(r"(\d+)\D*$")


def checkpoint_step(path):
    """The training step in a checkpoint's file name: its last number.

    The extension (`.weights.h5`, `.keras`, `.h5`) is ignored, so the "5"
    of ".h5" is not taken for a step.

    Args:
        path: str or path-like, e.g. "runs/base/ckpt-000123.weights.h5".

    Returns:
        int, or None when the name has no number.

    Example:

    >>> checkpoint_step("runs/base/ckpt-000123.weights.h5")
    123
    """
    name = os.path.basename(os.fspath(path))
    for suffix in (*CHECKPOINT_SUFFIXES, ".h5"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    match = _LAST_NUMBER.search(name)
    return int(match.group(1)) if match else None


def latest_checkpoints(directory, n, pattern="*.weights.h5"):
    """The `n` checkpoint files of `directory` with the highest step numbers.

    Steps are read from the file names (`checkpoint_step`), so
    "ckpt-9" comes before "ckpt-10" whether or not numbers are zero-padded.
    Files matching `pattern` without a number in their name (e.g.
    "best.weights.h5") are not checkpoints of the run and are skipped.

    Args:
        directory: str or path-like, the run's checkpoint directory.
        n: int. How many checkpoints (paper 6.1: 5 for base, 20 for big).
        pattern: str. Shell-style pattern the file names must match.

    Returns:
        list of `n` paths (`directory` joined with the name), oldest first.

    Example:

    >>> latest_checkpoints("runs/base", 5)
    ['runs/base/ckpt-000096.weights.h5', ..., 'runs/base/ckpt-000100.weights.h5']
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"`n` must be a positive int. Received: n={n!r}")
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"Checkpoint directory not found: {directory}")
    by_step = {}
    for name in sorted(os.listdir(directory)):
        if not fnmatch.fnmatchcase(name, pattern):
            continue
        step = checkpoint_step(name)
        if step is None:
            continue
        if step in by_step:
            raise ValueError(
                f"Two checkpoints of step {step} in {directory}: {by_step[step]} and {name}. "
                "Narrow `pattern` so that each step has one file."
            )
        by_step[step] = name
    if len(by_step) < n:
        found = ", ".join(by_step[step] for step in sorted(by_step)) or "none"
        raise ValueError(
            f"Asked for the last {n} checkpoints of {directory} matching {pattern!r}, but "
            f"there are {len(by_step)} (found: {found})."
        )
    return [os.path.join(directory, by_step[step]) for step in sorted(by_step)[-n:]]


# Appended to the name of a checkpoint written after a divergence began: no glob of
# checkpoints (`*.weights.h5`) matches it, so no resume, average or selection takes it.
DIVERGED_SUFFIX = ".diverged"


def set_aside_checkpoints(directory, from_step, pattern=CHECKPOINT_PATTERN):
    """Renames the checkpoints of step `from_step` and later to `<name>.diverged`.

    For a run whose loss diverged from `from_step` on: its checkpoints of
    those steps are kept for inspection, but no longer look like checkpoints
    of the run, so a resume starts from the last good one and nothing
    averages or selects them.

    Args:
        directory: str or path-like, the run's checkpoint directory (it may
            not exist).
        from_step: int, the first step of the divergence.
        pattern: str. Shell-style pattern of the run's checkpoint names.

    Returns:
        list of str, the new paths, oldest step first.

    Example:

    >>> set_aside_checkpoints("runs/base/checkpoints", 1201)
    ['runs/base/checkpoints/ckpt-00001300.weights.h5.diverged']
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    found = [
        name
        for name in os.listdir(directory)
        if fnmatch.fnmatchcase(name, pattern)
        and checkpoint_step(name) is not None
        and checkpoint_step(name) >= from_step
    ]
    renamed = []
    for name in sorted(found, key=checkpoint_step):
        path = os.path.join(directory, name)
        os.replace(path, path + DIVERGED_SUFFIX)
        renamed.append(path + DIVERGED_SUFFIX)
    return renamed


def save_weights_atomic(model, path, before_rename=None):
    """Saves `model` to `path` so that `path` is either complete or untouched.

    Writes a temporary file in the same directory, then `os.replace`s it,
    so an interrupted save never leaves a truncated checkpoint behind (and
    never clobbers an older good one).

    Args:
        model: a built Keras model.
        path: str or path-like ending in `.weights.h5` (`model.save_weights`:
            weights, and optimizer state if compiled) or `.keras`
            (`model.save`: config, weights and optimizer state).
        before_rename: optional callable given the temporary file's path,
            to add to the file before it takes the final name.

    Returns:
        str, `path`.

    Example:

    >>> save_weights_atomic(model, "runs/base/averaged.weights.h5")
    """
    path = os.fspath(path)
    if not path.endswith(CHECKPOINT_SUFFIXES):
        raise ValueError(
            f"`path` must end with one of {list(CHECKPOINT_SUFFIXES)}. Received: {path}"
        )
    directory, name = os.path.split(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"Directory of `path` not found: {directory}")
    if not os.access(directory, os.W_OK | os.X_OK):  # named by `path`, not the temporary
        raise PermissionError(errno.EACCES, "Permission denied (its folder is read-only)", path)
    _check_free_space(model, path, directory)
    suffix = next(suffix for suffix in CHECKPOINT_SUFFIXES if name.endswith(suffix))
    # Keras picks the format from the suffix, so the temporary name keeps it; Keras
    # creates the file, so it gets the usual permissions (mkstemp's would be 0600).
    # The writer's pid in the name lets `remove_unfinished_writes` tell a write that
    # a killed process left from one in progress.
    temporary = os.path.join(directory, f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}")
    try:
        if suffix == ".keras":
            model.save(temporary, overwrite=True)
        else:
            model.save_weights(temporary, overwrite=True)
        if before_rename is not None:
            before_rename(temporary)
        # Data on disk before the rename, so a power cut cannot leave the final
        # name pointing at an empty file.
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return path


def _bytes_to_write(model):
    """An upper estimate of the size of `model`'s weights file with its optimizer state."""
    variables = list(model.variables)
    if getattr(model, "optimizer", None) is not None:
        variables += list(model.optimizer.variables)
    total = 0
    for variable in variables:
        bits = re.search(r"\d+", str(variable.dtype))  # "float32", "bfloat16"; "bool" is 1 byte
        total += math.prod(variable.shape) * (int(bits.group()) // 8 if bits else 1)
    # HDF5 adds about 1.3 KiB per variable (measured on our models: 137-249 KiB in all).
    return total + 2048 * len(variables) + 64 * 1024


def _check_free_space(model, path, directory):
    """Raises `ENOSPC` before writing when `directory` cannot hold the file.

    HDF5 handles a write that runs out of space badly: after h5py reports
    the error, releasing the half-written file can crash the interpreter
    (SIGSEGV in libhdf5 1.14). Checkpoints of a run have the same size, so
    a disk that fills up over a run is caught here, before HDF5 starts.
    """
    free = shutil.disk_usage(directory).free
    needed = _bytes_to_write(model)
    if free < needed:
        raise OSError(
            errno.ENOSPC,
            f"Not enough free space to write {path}: about {needed / 2**20:,.2f} MiB needed, "
            f"{free / 2**20:,.2f} MiB free in {directory}",
        )


def _process_is_alive(pid):
    try:
        os.kill(pid, 0)
    except OSError as error:
        return error.errno == errno.EPERM  # alive, owned by another user
    return True


def remove_unfinished_writes(directory, pattern="*.weights.h5"):
    """Deletes the temporary files that killed `save_weights_atomic` calls left.

    A process killed while it saves (kill -9, preemption, power cut) leaves
    its temporary file, `.<name>.<pid>-<random>.<suffix>`, which nothing
    reads; big-model checkpoints are gigabytes each, so a run restarted
    after every preemption would fill its disk with them. Only temporaries
    of a file name matching `pattern` whose writing process is no longer
    running on this host are removed; anything else is left alone.

    Args:
        directory: str or path-like, a checkpoint directory.
        pattern: str. Shell-style pattern of the final file names.

    Returns:
        list of the paths removed, sorted.

    Example:

    >>> remove_unfinished_writes("runs/base", "ckpt-*.weights.h5")
    ['runs/base/.ckpt-00001000.weights.h5.4242-0f3a9c1e.weights.h5']
    """
    directory = os.fspath(directory)
    temporary_name = re.compile(
        r"^\.(?P<name>.+)\.(?P<pid>\d+)-[0-9a-f]{8}(?P<suffix>\.[a-z0-9.]+)$"
    )
    removed = []
    for name in sorted(os.listdir(directory)):
        match = temporary_name.match(name)
        if not (
            match
            and match["name"].endswith(match["suffix"])
            and fnmatch.fnmatchcase(match["name"], pattern)
            and not _process_is_alive(int(match["pid"]))
        ):
            continue
        path = os.path.join(directory, name)
        os.remove(path)
        removed.append(path)
    return removed
