"""Checkpoint averaging (paper 6.1) and checkpoint file helpers."""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "CHECKPOINT_SUFFIXES": "averaging",
        "average_checkpoints": "averaging",
        "checkpoint_variables": "averaging",
        "checkpoint_step": "checkpoint_files",
        "latest_checkpoints": "checkpoint_files",
        "remove_unfinished_writes": "checkpoint_files",
        "save_weights_atomic": "checkpoint_files",
        "CheckpointSelection": "checkpoint_selection",
        "checkpoint_candidates": "checkpoint_selection",
        "select_checkpoint": "checkpoint_selection",
        "PeriodicCheckpoint": "periodic_checkpoint",
        "UnreadableCheckpointError": "training_state",
        "read_checkpoint_metadata": "training_state",
        "read_training_state": "training_state",
        "restore_training_state": "training_state",
        "save_training_state": "training_state",
    },
)
