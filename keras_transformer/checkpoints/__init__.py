"""Checkpoint averaging (paper 6.1) and checkpoint file helpers."""

from keras_transformer.checkpoints.averaging import (
    CHECKPOINT_SUFFIXES,
    average_checkpoints,
    checkpoint_variables,
)
from keras_transformer.checkpoints.checkpoint_files import (
    checkpoint_step,
    latest_checkpoints,
    remove_unfinished_writes,
    save_weights_atomic,
)
from keras_transformer.checkpoints.checkpoint_selection import (
    CheckpointSelection,
    checkpoint_candidates,
    select_checkpoint,
)
from keras_transformer.checkpoints.periodic_checkpoint import PeriodicCheckpoint
from keras_transformer.checkpoints.training_state import (
    UnreadableCheckpointError,
    read_checkpoint_metadata,
    read_training_state,
    restore_training_state,
    save_training_state,
)

__all__ = [
    "CHECKPOINT_SUFFIXES",
    "CheckpointSelection",
    "PeriodicCheckpoint",
    "UnreadableCheckpointError",
    "average_checkpoints",
    "checkpoint_candidates",
    "checkpoint_step",
    "checkpoint_variables",
    "latest_checkpoints",
    "read_checkpoint_metadata",
    "read_training_state",
    "remove_unfinished_writes",
    "restore_training_state",
    "save_training_state",
    "save_weights_atomic",
    "select_checkpoint",
]
