"""Full training state in one file: resume at the exact batch, with the same randomness.

A training-state checkpoint is a Keras `.weights.h5` file (`model.save_weights`: the
model's weights and, for a compiled model, the optimizer's variables, including its
batch counter and any gradient accumulators) with one more group that Keras ignores,
`STATE_GROUP`, holding what `save_weights` leaves out: the states of the model's seed
generators (dropout masks continue the same random sequence) and the number of batches
trained on (the data position; with gradient accumulation it differs from the update
count), a SHA-256 digest of every dataset in the file (checked on restore: a file whose
HDF5 structure is intact but whose data was overwritten is refused like a truncated one),
and optional metadata. The file is written under a temporary name and renamed when
complete.
"""

import json
import os

import h5py
import numpy as np
from keras import ops

from keras_transformer.checkpoints.averaging import STATE_GROUP
from keras_transformer.checkpoints.checkpoint_files import save_weights_atomic
from keras_transformer.checkpoints.model_file_check import (
    CHECK_ERRORS,
    UnreadableCheckpointError,
    check_weights_digest,
    content_digest,
    state_digest,
    unreadable,
)
from keras_transformer.training.optimizer_state import batches_trained

_FORMAT_VERSION = 1


def _seed_states(model):
    """The model's seed-generator state variables, in creation order."""
    weights = {id(variable) for variable in model.weights}
    return [
        variable
        for variable in model.variables
        if id(variable) not in weights and "seed_generator_state" in variable.path
    ]


def save_training_state(model, path, batches=None, metadata=None):
    """Writes `model`'s weights, optimizer state, seed states and data position.

    Args:
        model: a compiled, built Keras model.
        path: str or path-like ending in `.weights.h5`.
        batches: int or None. Batches trained on (the data position); None
            reads the optimizer's batch counter, which lags behind under a
            `LossScaleOptimizer` that skipped overflowing steps (pass the
            count of batches consumed then, as `PeriodicCheckpoint` does).
        metadata: dict or None. JSON-serializable values stored with the
            state (e.g. the validation score of a best checkpoint); read them
            back with `read_checkpoint_metadata`.

    Returns:
        str, `path`.

    Example:

    >>> save_training_state(model, "runs/base/ckpt-00001000.weights.h5")
    """
    if getattr(model, "optimizer", None) is None:
        raise ValueError(
            f"`model` must be compiled to save its training state. Received: {model.name!r}"
        )
    if not os.fspath(path).endswith(".weights.h5"):
        raise ValueError(f"`path` must end with `.weights.h5`. Received: {path}")
    seeds = [ops.convert_to_numpy(variable.value) for variable in _seed_states(model)]
    batches = batches_trained(model.optimizer) if batches is None else int(batches)

    def add_state(temporary):
        with h5py.File(temporary, "a") as file:
            group = file.create_group(STATE_GROUP)
            for index, value in enumerate(seeds):
                group.create_dataset(f"seed_{index}", data=value)
            group.attrs["batches"] = batches
            group.attrs["num_seed_states"] = len(seeds)
            if metadata is not None:
                group.attrs["metadata"] = json.dumps(metadata)
            group.attrs["sha256"] = content_digest(file)
            group.attrs["state_sha256"] = state_digest(group.attrs)
            # Written last: a file without it was never finished.
            group.attrs["format_version"] = _FORMAT_VERSION

    return save_weights_atomic(model, path, before_rename=add_state)


def read_training_state(path):
    """Checks a training-state file (structure and SHA-256) and returns its data position.

    Files written before checksums were stored (no `sha256` attribute) are
    accepted unchecked.

    Args:
        path: str or path-like, a file written by `save_training_state`.

    Returns:
        int, the number of batches trained on when it was written.

    Raises:
        UnreadableCheckpointError: naming the file, when it is truncated,
            corrupt (checksum mismatch) or lacks the training state.
    """
    path = os.fspath(path)
    try:
        with h5py.File(path, "r") as file:
            if STATE_GROUP not in file or "format_version" not in file[STATE_GROUP].attrs:
                raise UnreadableCheckpointError(
                    f"Checkpoint {path} holds no training state (group {STATE_GROUP!r}); "
                    "it was not written by save_training_state / PeriodicCheckpoint."
                )
            check_weights_digest(file, path)
            attrs = file[STATE_GROUP].attrs
            return int(attrs["batches"])
    except UnreadableCheckpointError:
        raise
    except CHECK_ERRORS as error:
        raise unreadable(path, error, what="Checkpoint") from error


def read_checkpoint_metadata(path):
    """The `metadata` dict given to `save_training_state` (empty when none was).

    Args:
        path: str or path-like, a file written by `save_training_state`.

    Returns:
        dict.

    Example:

    >>> read_checkpoint_metadata("runs/base/checkpoints/best.weights.h5")
    {'step': 1500, 'metric': 'bleu', 'value': 27.1}
    """
    read_training_state(path)
    with h5py.File(os.fspath(path), "r") as file:
        text = file[STATE_GROUP].attrs.get("metadata")
    if text is None:
        return {}
    return json.loads(text.decode() if isinstance(text, bytes) else text)


def restore_training_state(model, path):
    """Loads a file of `save_training_state` into a compiled model.

    The model is built and its optimizer's variables created first, so the
    optimizer state is restored too (Keras skips it for an unbuilt optimizer).

    Args:
        model: a compiled Keras model of the checkpoint's architecture.
        path: str or path-like.

    Returns:
        int, the number of batches trained on: pass it as `start_step` to
        `make_translation_dataset` to continue from the same data position.

    Raises:
        UnreadableCheckpointError: the file is truncated, corrupt, or holds
            no training state; the model is left unchanged.
        ValueError: the checkpoint does not fit the model.
    """
    path = os.fspath(path)
    batches = read_training_state(path)
    if not model.built:
        model.build()
    if getattr(model, "optimizer", None) is None:
        raise ValueError(f"`model` must be compiled to restore a training state: {path}")
    if not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    seed_variables = _seed_states(model)
    with h5py.File(path, "r") as file:
        group = file[STATE_GROUP]
        seeds = [np.asarray(group[f"seed_{i}"]) for i in range(group.attrs["num_seed_states"])]
    if len(seeds) != len(seed_variables):
        raise ValueError(
            f"Checkpoint {path} holds {len(seeds)} seed-generator states, the model has "
            f"{len(seed_variables)}: it comes from another architecture or dropout setting."
        )
    try:
        model.load_weights(path)
    except ValueError as error:
        raise ValueError(
            f"Checkpoint {path} does not fit the model {model.name!r}: {error}"
        ) from error
    for variable, value in zip(seed_variables, seeds, strict=True):
        variable.assign(ops.cast(value, variable.dtype))
    return batches
