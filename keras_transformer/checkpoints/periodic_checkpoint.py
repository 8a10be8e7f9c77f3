"""A `model.fit` callback that writes checkpoints on a schedule and averages the last ones."""

import glob
import os
import time

import keras

from keras_transformer.checkpoints.averaging import average_checkpoints
from keras_transformer.checkpoints.checkpoint_files import (
    checkpoint_step,
    latest_checkpoints,
    save_weights_atomic,
)

NAME_FORMAT = "ckpt-{step:08d}.weights.h5"


class PeriodicCheckpoint(keras.callbacks.Callback):
    """Saves weights every N steps and/or minutes; averages the last ones at the end.

    Paper 6.1: checkpoints were written at 10-minute intervals and the base
    model's last 5 (big: 20) were averaged. Each save is atomic (a temporary
    file renamed over the final name), so an interruption never leaves a
    half-written checkpoint. Older checkpoints beyond `keep` are deleted,
    oldest first; a directory holding checkpoints of an earlier run is used
    as it is (their steps continue the numbering).

    Args:
        directory: str. Where `ckpt-<step>.weights.h5` files go (created).
        every_steps: int or None. Save every this many optimizer steps.
        every_minutes: float or None. Save when this much time has passed
            since the last save (paper: 10).
        keep: int. Checkpoints kept on disk (>= `average_last`).
        average_last: int or None. At the end of training, save a final
            checkpoint and set the model's weights to the average of the last
            `average_last` checkpoints (paper: 5 base, 20 big). `None` keeps
            the final weights.

    Example:

    >>> model.fit(dataset, callbacks=[PeriodicCheckpoint("runs/base", every_minutes=10)])
    """

    def __init__(self, directory, every_steps=None, every_minutes=10.0, keep=5, average_last=5):
        super().__init__()
        if every_steps is None and every_minutes is None:
            raise ValueError("Set `every_steps`, `every_minutes` or both; received neither.")
        if every_steps is not None and every_steps < 1:
            raise ValueError(f"`every_steps` must be >= 1. Received: every_steps={every_steps}")
        if average_last is not None and not 1 <= average_last <= keep:
            raise ValueError(
                f"`average_last` must be in [1, keep={keep}]. Received: average_last={average_last}"
            )
        self.directory = os.fspath(directory)
        self.every_steps = every_steps
        self.every_minutes = every_minutes
        self.keep = keep
        self.average_last = average_last
        self.saved = []  # paths written by this callback, oldest first
        self._last_save_time = None

    def _step(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_begin(self, logs=None):
        os.makedirs(self.directory, exist_ok=True)
        self._last_save_time = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        step = self._step()
        due_steps = self.every_steps is not None and step % self.every_steps == 0
        due_time = (
            self.every_minutes is not None
            and time.monotonic() - self._last_save_time >= 60.0 * self.every_minutes
        )
        if due_steps or due_time:
            self.save(step)

    def save(self, step):
        """Writes the checkpoint of `step` and prunes the oldest beyond `keep`."""
        path = os.path.join(self.directory, NAME_FORMAT.format(step=step))
        save_weights_atomic(self.model, path)
        self._last_save_time = time.monotonic()
        if path not in self.saved:
            self.saved.append(path)
        existing = [
            p
            for p in glob.glob(os.path.join(self.directory, "ckpt-*.weights.h5"))
            if checkpoint_step(p) is not None
        ]
        for old in sorted(existing, key=checkpoint_step)[: -self.keep]:
            os.remove(old)
        return path

    def on_train_end(self, logs=None):
        step = self._step()
        final = os.path.join(self.directory, NAME_FORMAT.format(step=step))
        if not os.path.exists(final):
            self.save(step)
        if self.average_last:
            available = len(glob.glob(os.path.join(self.directory, "ckpt-*.weights.h5")))
            paths = latest_checkpoints(self.directory, min(self.average_last, available))
            average_checkpoints(self.model, paths)
            print(f"Averaged {len(paths)} checkpoints into the model: {', '.join(paths)}")
