"""Checkpoint averaging (paper 6.1).

"For the base models, we used a single model obtained by averaging the
last 5 checkpoints, which were written at 10-minute intervals. For the big
models, we averaged the last 20 checkpoints."
"""

import contextlib
import os
import zipfile

import h5py
import keras
import numpy as np
from keras import ops

from keras_transformer.checkpoints.checkpoint_files import CHECKPOINT_SUFFIXES
from keras_transformer.checkpoints.model_file_check import (
    READ_ERRORS,
    STATE_GROUP,
    UnreadableCheckpointError,
    check_model_file,
    reading_model_file,
    unreadable,
)

# Where Keras keeps the weights inside a `.keras` zip archive.
_KERAS_ARCHIVE_WEIGHTS = "model.weights.h5"
# Top-level group of `save_weights` / `save` files holding the optimizer's variables.
_OPTIMIZER_GROUP = "optimizer"


def checkpoint_variables(path):
    """The model variables a checkpoint file stores, with their shapes.

    Optimizer variables (which `model.save_weights` writes too when the
    model is compiled) are left out. The file is opened read-only.

    Args:
        path: a `.weights.h5` file from `model.save_weights` or a `.keras`
            file from `model.save`.

    Returns:
        dict mapping the variable's path in the file (e.g.
        "layers/token_embedding/vars/0") to its shape, a tuple of int.

    Example:

    >>> checkpoint_variables("ckpt-000100.weights.h5")["layers/token_embedding/vars/0"]
    (37000, 512)
    """
    variables = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset) and name.split("/")[0] not in (
            _OPTIMIZER_GROUP,
            STATE_GROUP,
        ):
            variables[name] = tuple(item.shape)

    with _open_weights(path) as weights:
        weights.visititems(visit)
    return variables


def average_checkpoints(model, paths):
    """Sets `model`'s weights to the mean of the checkpoints' model weights.

    Each checkpoint is loaded into a fresh, uncompiled copy of `model`
    (`keras.models.clone_model`), so `model` is untouched until every file
    has been read, and the optimizer state the files may hold is never
    loaded: `model.optimizer` (variables, iteration count) is unchanged.
    Sums are accumulated on the host in float64, whatever the variables'
    dtype (bfloat16, float16, float32), so averaging N copies of the same
    weights gives those weights back bit for bit (float32 sums would not:
    `3 * x` rounds); the mean is cast back to each variable's dtype.
    Non-float variables (counters) take the last checkpoint's value. The
    checkpoint files are only read.

    Args:
        model: a built (or buildable with `model.build()`) Keras model,
            e.g. a `Seq2SeqTransformer` with the checkpoints' config.
        paths: list of `.weights.h5` (`model.save_weights`) and/or `.keras`
            (`model.save`) files, e.g. from `latest_checkpoints`.

    Returns:
        `model`, with the averaged weights assigned.

    Example:

    >>> model = Seq2SeqTransformer.from_architecture("base", vocabulary_size=37000)
    >>> average_checkpoints(model, latest_checkpoints("checkpoints/", 5))
    >>> save_weights_atomic(model, "averaged.weights.h5")
    """
    paths = _check_paths(paths)
    for path in paths:  # each whole file, and a training state's SHA-256, as a resume does
        check_model_file(path)
    expected_path = paths[0]
    expected = checkpoint_variables(expected_path)
    for path in paths[1:]:
        _check_same_variables(path, checkpoint_variables(path), expected_path, expected)

    if not model.built:
        try:
            model.build()
        except TypeError as error:
            raise ValueError(
                "`model` must be built (call it on a batch, or `model.build(...)`) before "
                f"averaging checkpoints into it. model.build() failed: {error}"
            ) from error
    # An uncompiled copy has no optimizer, so loading skips the files' optimizer state.
    scratch = keras.models.clone_model(model)
    if not scratch.built:
        scratch.build()
    _check_same_structure(model, scratch)

    sums = [np.zeros(variable.shape, dtype="float64") for variable in scratch.weights]
    for path in paths:
        try:
            with reading_model_file(path):
                scratch.load_weights(path)
        except UnreadableCheckpointError:
            raise
        except ValueError as error:
            raise ValueError(
                f"Checkpoint {path} does not fit the model {model.name!r}: {error}"
            ) from error
        for index, variable in enumerate(scratch.weights):
            value = ops.convert_to_numpy(variable.value)
            if _is_float(variable.dtype):
                sums[index] += value.astype("float64")
            else:
                sums[index] = value
    for variable, total in zip(model.weights, sums, strict=True):
        mean = total
        if _is_float(variable.dtype):
            mean = total / len(paths)
            if keras.backend.standardize_dtype(variable.dtype) != "float64":
                # JAX without x64 turns float64 into float32 before any cast; doing it
                # here for both backends makes their results identical.
                mean = mean.astype("float32")
        variable.assign(ops.cast(mean, variable.dtype))
    return model


def _check_paths(paths):
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise TypeError(
            "`paths` must be a list of checkpoint files, not a single path. "
            f"Received: paths={paths!r}"
        )
    paths = [os.fspath(path) for path in paths]
    if not paths:
        raise ValueError("`paths` must name at least one checkpoint file. Received: []")
    for path in paths:
        if not path.endswith(CHECKPOINT_SUFFIXES):
            raise ValueError(
                f"Checkpoint files must end with one of {list(CHECKPOINT_SUFFIXES)}. "
                f"Received: {path}"
            )
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Checkpoint file not found: {path}")
    return paths


@contextlib.contextmanager
def _open_weights(path):
    path = os.fspath(path)
    try:
        if path.endswith(".keras"):
            with (
                zipfile.ZipFile(path, "r") as archive,
                archive.open(_KERAS_ARCHIVE_WEIGHTS, "r") as member,
                h5py.File(member, "r") as weights,
            ):
                yield weights
        else:
            with h5py.File(path, "r") as weights:
                yield weights
    except READ_ERRORS as error:
        raise unreadable(path, error, what="Checkpoint") from error


def _check_same_variables(path, variables, expected_path, expected):
    missing = sorted(set(expected) - set(variables))
    if missing:
        raise ValueError(
            f"Checkpoint {path} lacks the variable {missing[0]!r} (shape "
            f"{expected[missing[0]]}) that {expected_path} has"
            + (f", and {len(missing) - 1} more" if len(missing) > 1 else "")
            + ": checkpoints to average must come from one architecture."
        )
    extra = sorted(set(variables) - set(expected))
    if extra:
        raise ValueError(
            f"Checkpoint {path} has the variable {extra[0]!r} (shape {variables[extra[0]]}) "
            f"that {expected_path} lacks"
            + (f", and {len(extra) - 1} more" if len(extra) > 1 else "")
            + ": checkpoints to average must come from one architecture."
        )
    for name, shape in expected.items():
        if variables[name] != shape:
            raise ValueError(
                f"Checkpoint {path}: variable {name!r} has shape {variables[name]}, but "
                f"{shape} in {expected_path}: checkpoints to average must come from one "
                "architecture."
            )


def _check_same_structure(model, scratch):
    # clone_model rebuilds from get_config; a model whose config misses a setting
    # would give a copy with other variables.
    shapes = [tuple(v.shape) for v in model.weights]
    scratch_shapes = [tuple(v.shape) for v in scratch.weights]
    if shapes != scratch_shapes:
        raise ValueError(
            f"keras.models.clone_model({model.name!r}) gives a model with other variables "
            f"({len(scratch_shapes)} instead of {len(shapes)}, or other shapes): the model's "
            "get_config() must describe its architecture completely."
        )


def _is_float(dtype):
    return "float" in keras.backend.standardize_dtype(dtype)
