"""Checking a model or checkpoint file before it is read: truncated or corrupt, named.

A `.keras` file is a zip archive whose members carry CRC-32s; a training-state
checkpoint (`save_training_state`) carries a SHA-256 of its datasets; any HDF5
weights file can at least be walked. A damaged file then gives one line naming it,
wherever it is read (translate, export, average, plot, `load_translation_model`,
a resumed run), instead of a `BadZipFile` or an h5py `RuntimeError` deep in
Keras, or, for a flipped byte in the weight data, nothing at all.
"""

import contextlib
import hashlib
import os
import zipfile
import zlib

import h5py
import numpy as np

# Group of training-state checkpoints holding seed states, data position and SHA-256
# (the same name as `averaging.STATE_GROUP`; kept here so this module imports no Keras).
STATE_GROUP = "keras_transformer_training_state"
# What reading a damaged zip or HDF5 file raises (h5py: OSError, RuntimeError, KeyError).
READ_ERRORS = (OSError, RuntimeError, KeyError, EOFError, zlib.error, zipfile.BadZipFile)
# What walking a damaged HDF5 file's every dataset can raise besides (a flipped byte in a
# name, a datatype or a link: UnicodeDecodeError, h5py's ValueError, a TypeError).
CHECK_ERRORS = (*READ_ERRORS, ValueError, TypeError)


class UnreadableCheckpointError(ValueError):
    """A checkpoint or model file that is truncated, corrupt, or not what it should be."""


def content_digest(file):
    """SHA-256 over the names, dtypes, shapes and bytes of every dataset of an open HDF5 file."""
    digest = hashlib.sha256()
    names = []
    file.visititems(
        lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None
    )
    for name in sorted(names):
        data = np.ascontiguousarray(file[name][()])
        digest.update(f"{name}|{data.dtype.str}|{data.shape}|".encode())
        # Variable-length strings are Python objects: hash their values, not pointers.
        digest.update(repr(data.tolist()).encode() if data.dtype == object else data.tobytes())
    return digest.hexdigest()


# The training state's attributes that `state_sha256` covers: the data position above all,
# which a flipped bit would move silently.
STATE_ATTRIBUTES = ("batches", "num_seed_states", "metadata", "sha256")


def state_digest(attrs):
    """SHA-256 over the training state's attributes (`STATE_ATTRIBUTES` present in `attrs`)."""
    digest = hashlib.sha256()
    for name in STATE_ATTRIBUTES:
        if name in attrs:
            value = attrs[name]
            value = value.decode() if isinstance(value, bytes) else value
            digest.update(f"{name}={value!s}|".encode())
    return digest.hexdigest()


def _size(path):
    return os.path.getsize(path) if os.path.exists(path) else "missing"


def unreadable(path, error, what="Model file"):
    """The `UnreadableCheckpointError` of a file whose reading raised `error`."""
    detail = " ".join(str(error).split()) or type(error).__name__
    return UnreadableCheckpointError(
        f"{what} {path} cannot be read (truncated or corrupt? size: {_size(path)} bytes): {detail}"
    )


def check_weights_digest(file, path):
    """Checks an open HDF5 file: every dataset readable and, if stored, the SHA-256 matches.

    Raises:
        UnreadableCheckpointError: the stored SHA-256 differs.
        One of `READ_ERRORS`: the HDF5 structure is damaged.
    """
    attrs = file[STATE_GROUP].attrs if STATE_GROUP in file else {}
    digest = content_digest(file)  # reads every dataset, so a damaged structure raises
    for name, actual in (("sha256", digest), ("state_sha256", None)):
        if name not in attrs:
            continue  # written before the digest was stored
        expected = attrs[name]
        expected = expected.decode() if isinstance(expected, bytes) else str(expected)
        if (actual or state_digest(attrs)) != expected:
            raise UnreadableCheckpointError(
                f"Checkpoint {path} fails its SHA-256 check: its data changed after it was "
                "written (disk corruption or an overwrite)."
            )


def check_model_file(path):
    """Raises `UnreadableCheckpointError` naming `path` when it is truncated or corrupt.

    A `.keras` file: the zip structure and every member's CRC-32. A
    `.weights.h5` file (or any HDF5 file): every dataset is read, and a
    training-state checkpoint's SHA-256 is checked, as a resumed run does.
    The file is only read.

    Args:
        path: str or path-like.

    Returns:
        str, `path`.

    Raises:
        FileNotFoundError: `path` is not a file.
        UnreadableCheckpointError: the file is damaged (message: the path,
            its size and what failed).

    Example:

    >>> check_model_file("runs/base/model.keras")
    'runs/base/model.keras'
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Model file not found: {path}")
    try:
        if zipfile.is_zipfile(path) or path.endswith(".keras"):
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
            if bad is not None:
                raise UnreadableCheckpointError(
                    f"Model file {path} is corrupt: its member {bad} fails its CRC-32 check."
                )
        else:
            with h5py.File(path, "r") as file:
                check_weights_digest(file, path)
    except UnreadableCheckpointError:
        raise
    except CHECK_ERRORS as error:
        raise unreadable(path, error) from error
    return path


@contextlib.contextmanager
def reading_model_file(path):
    """Turns the errors of reading a damaged `path` (in Keras, h5py, zipfile) into one naming it.

    Example:

    >>> with reading_model_file(path):
    ...     model = keras.saving.load_model(path)
    """
    try:
        yield
    except READ_ERRORS as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise unreadable(os.fspath(path), error) from error
