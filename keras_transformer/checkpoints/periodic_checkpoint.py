"""A `model.fit` callback that writes checkpoints on a schedule; the last ones can be averaged."""

import glob
import math
import os
import signal
import sys
import time

import keras

from keras_transformer.checkpoints.averaging import average_checkpoints
from keras_transformer.checkpoints.checkpoint_files import (
    checkpoint_step,
    latest_checkpoints,
    remove_unfinished_writes,
)
from keras_transformer.checkpoints.stop_signals import StopSignals, in_one_process
from keras_transformer.checkpoints.training_state import (
    UnreadableCheckpointError,
    restore_training_state,
    save_training_state,
)
from keras_transformer.training.batch_counter import BatchCounter
from keras_transformer.training.optimizer_state import accumulation_steps, batches_trained
from keras_transformer.utils.live_line import end_live_line
from keras_transformer.utils.run_directory import CHECKPOINT_PATTERN

NAME_FORMAT = CHECKPOINT_PATTERN.replace("*", "{step:08d}")


def _message(text):
    """A message on stderr (stdout is the caller's data), past the monitor's live line."""
    end_live_line(sys.stderr)
    print(text, file=sys.stderr, flush=True)


def _checkpoint_files(directory):
    """Checkpoint files of `directory`, oldest step first."""
    found = [
        path
        for path in glob.glob(os.path.join(directory, CHECKPOINT_PATTERN))
        if checkpoint_step(path) is not None
    ]
    return sorted(found, key=checkpoint_step)


def restore_latest_checkpoint(directory, model):
    """Loads the newest readable checkpoint of `directory` into `model`.

    Unreadable checkpoints newer than the one loaded are renamed to
    `<name>.unreadable` (kept, not deleted), so that neither averaging nor
    pruning takes them for checkpoints of the resumed run.

    Args:
        directory: str, a `PeriodicCheckpoint`'s directory (it may not exist).
        model: the compiled model, as built for the first run.

    Returns:
        int, batches trained on (0 when the directory holds no checkpoint):
        the `start_step` of `make_translation_dataset` and `PeriodicCheckpoint`.

    Raises:
        UnreadableCheckpointError: every checkpoint is unreadable.
    """
    directory = os.fspath(directory)
    candidates = _checkpoint_files(directory) if os.path.isdir(directory) else []
    problems = []
    unreadable = []
    for path in reversed(candidates):
        try:
            batches = restore_training_state(model, path)
        except UnreadableCheckpointError as error:
            problems.append(str(error))
            unreadable.append(path)
            _message(f"WARNING: {error} Trying the previous one.")
            continue
        _message(f"Resuming from {path} (batch {batches}).")
        for broken in unreadable:
            os.replace(broken, broken + ".unreadable")
            _message(f"Renamed the unreadable {broken} to {broken}.unreadable")
        return batches
    if problems:
        raise UnreadableCheckpointError(
            f"No readable checkpoint in {directory}: " + " | ".join(problems)
        )
    return 0


class PeriodicCheckpoint(keras.callbacks.Callback):
    """Saves the training state every N steps and/or minutes; `average_into` averages the last.

    Paper 6.1: checkpoints were written at 10-minute intervals and the base
    model's last 5 (big: 20) were averaged. Each checkpoint holds the whole
    training state (`save_training_state`: weights, optimizer state, seed
    states, data position) and is written atomically (a temporary file,
    fsynced, renamed over the final name), so a crash or a full disk never
    leaves a half-written checkpoint or destroys the previous one. Older
    checkpoints beyond `keep` are deleted, oldest first, after a save
    succeeds; a save that fails (e.g. `ENOSPC`) stops training with an
    `OSError` naming the last good checkpoint. The temporary files of saves
    that a killed process left are deleted when training begins. Steps are
    optimizer updates; with gradient accumulation, saves happen only between
    updates. With `compile(steps_per_execution=N)` Keras reaches callbacks
    only every N batches: a save then happens at the first such point after
    its step (or minute) comes due, named by the step it holds, and with
    accumulation over k batches only where that point also ends an update
    (make N a multiple of k, or k of N).

    A SIGTERM (a preemption, `kill`, Kubernetes stopping a pod) or a SIGINT
    (Ctrl-C) is held until the current update (or `fit`'s current validation
    batch) ends; then the update is saved, one line names it and how to
    resume, and the signal is acted on: the process exits with status 143
    (SIGINT: 130) through `SystemExit` (or the program's own handler runs), before
    the average after `fit`. Only updates in progress are lost. Not in
    multi-worker or multi-process training, where one process cannot stop alone.

    `restore(model)` loads the newest readable checkpoint of the directory
    and returns the number of batches trained on, so that a restarted script
    continues from the exact step, schedule step and data position (Keras'
    `BackupAndRestore` restarts the epoch). A truncated or corrupt file is
    reported and the previous one used.

    A non-finite loss stops training with a `FloatingPointError` before
    anything is saved, so the last checkpoint on disk stays the last good
    one. Under a `LossScaleOptimizer` (mixed_float16), whose overflowing
    steps are skipped by design, such a save is skipped with a warning.

    Args:
        directory: str. Where `ckpt-<step>.weights.h5` files go (created).
        every_steps: int or None. Save every this many optimizer steps.
        every_minutes: float or None. Save when this much time has passed
            since the last save (paper: 10).
        keep: int. Checkpoints kept on disk (>= `average_last`).
        average_last: int or None. How many of the last checkpoints
            `average_into` averages (paper: 5 base, 20 big); `None`: none, the
            final weights stay.
        save_on_signals: signals that save at the end of the current update
            and then stop the process (see above): SIGTERM and SIGINT (exit
            status 143 and 130). `()` leaves signals alone.
        after_save: callable or None, called with the step after each save
            on the schedule and the final one (not after a save for a
            signal): e.g. a validation that runs at every checkpoint.
        hold_saves: callable or None, returning why the current weights must
            not be saved (e.g. `TrainingMonitor.divergence_suspect`: a
            divergence in progress), or a false value to save.
        start_step: int or None. Batches trained on before `fit` (the value
            of `restore_latest_checkpoint`); None reads the optimizer, or
            what `restore` loaded.

    Example:

    >>> checkpoint = PeriodicCheckpoint("runs/base", every_minutes=10)
    >>> start = checkpoint.restore(model)  # 0 on a first run
    >>> train = make_translation_dataset(corpus, tokenizer, start_step=start)
    >>> model.fit(train.dataset, steps_per_epoch=train.steps_per_epoch, epochs=20,
    ...           initial_epoch=start // train.steps_per_epoch, callbacks=[checkpoint])
    >>> checkpoint.average_into(model)  # paper 6.1, once `fit` has returned

    A run that builds its callbacks once it knows the step it resumes from
    restores first: `start = restore_latest_checkpoint(directory, model)`,
    then `PeriodicCheckpoint(directory, ..., start_step=start)`.
    """

    def __init__(
        self,
        directory,
        every_steps=None,
        every_minutes=10.0,
        keep=5,
        average_last=5,
        save_on_signals=(signal.SIGTERM, signal.SIGINT),
        after_save=None,
        hold_saves=None,
        start_step=None,
    ):
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
        # Batches trained on, counted here so JAX state syncs only to save.
        self._counter = BatchCounter(start=0, accumulation=1)
        self._failed = False
        self._restored_batches = start_step
        self._stop = StopSignals(save_on_signals)
        self._last_batch_logs = None  # the logs of the last training batch
        self.after_save = after_save
        self.hold_saves = hold_saves
        self._held_for = None  # the reason of the last skipped save

    def _checkpoints(self):
        """Checkpoint files of the directory, oldest step first."""
        return _checkpoint_files(self.directory)

    def restore(self, model):
        """Loads the newest readable checkpoint of the directory into `model`.

        `restore_latest_checkpoint(self.directory, model)`, and this callback
        counts steps from the batches it returns.

        Returns:
            int, batches trained on (0 when the directory holds no
            checkpoint): the `start_step` of `make_translation_dataset`.
        """
        batches = restore_latest_checkpoint(self.directory, model)
        if batches:
            self._restored_batches = batches
        return batches

    def on_train_begin(self, logs=None):
        os.makedirs(self.directory, exist_ok=True)
        unfinished = remove_unfinished_writes(self.directory, CHECKPOINT_PATTERN)
        if unfinished:
            _message(
                f"Removed {len(unfinished)} unfinished checkpoint write(s) of killed runs: "
                + ", ".join(os.path.basename(path) for path in unfinished)
            )
        self._last_save_time = time.monotonic()
        # Batches are counted here from the restored data position: the optimizer's
        # counter does not count the steps a LossScaleOptimizer skipped.
        if self._restored_batches is not None:
            start = self._restored_batches
            self._restored_batches = None
        else:
            start = batches_trained(self.model.optimizer)
        self._counter = BatchCounter(start, accumulation_steps(self.model.optimizer))
        self._failed = False
        if self._stop.signals and in_one_process(self.model):
            self._stop.install()

    def _step(self):
        return self._counter.step

    def on_epoch_begin(self, epoch, logs=None):
        self._counter.epoch_begin()

    def on_train_batch_end(self, batch, logs=None):
        self._counter.batch_end(batch)
        self._last_batch_logs = logs
        if not self._counter.update_ended():
            return  # mid-update: accumulated gradients would be saved half-summed
        due_steps = self.every_steps is not None and self._counter.crossed(self.every_steps)
        due_time = (
            self.every_minutes is not None
            and time.monotonic() - self._last_save_time >= 60.0 * self.every_minutes
        )
        try:
            if self._stop.received is not None:
                self._save_and_stop()
            elif (due_steps or due_time) and self._may_save(logs):
                self.save(self._step())
                if self.after_save is not None:
                    self.after_save(self._step())
        except BaseException:
            self._stop.restore()  # training ends here: give the program its handlers back
            raise

    def on_test_batch_end(self, batch, logs=None):
        # `fit`'s validation can outlast a preemption's grace period: stop in it.
        self._stop_between_updates()

    def on_epoch_end(self, epoch, logs=None):
        self._stop_between_updates()

    def _stop_between_updates(self):
        if not self._stop.installed or self._stop.received is None:
            return  # no signal, or not in `fit` (an `evaluate` given this callback)
        if self._counter.update_ended():
            try:
                self._save_and_stop()
            except BaseException:
                self._stop.restore()
                raise

    def _save_and_stop(self):
        """Saves the current step (unless just saved), then delivers the signal."""
        step = self._step()
        if not self._saved_step(step) and self._may_save(self._last_batch_logs):
            self.save(step)
        self._stop_now(step)

    def _saved_step(self, step):
        # Saved by this callback, not merely on disk: a file of this step left by an
        # earlier run (say, the truncated one `restore` skipped) must be overwritten.
        return bool(self.saved) and self.saved[-1] == os.path.join(
            self.directory, NAME_FORMAT.format(step=step)
        )

    def _stop_now(self, step):
        name = signal.Signals(self._stop.received).name
        last = self._checkpoints()
        _message(
            f"{name} received: stopped after step {step}; last checkpoint: "
            + (last[-1] if last else f"none in {self.directory}")
            + "; run the same command again to resume from it"
        )
        self._stop.deliver()

    def _may_save(self, logs):
        """Whether the weights may be saved: a finite loss, and no divergence in progress."""
        if not self._loss_is_finite(logs):
            return False
        reason = self.hold_saves() if self.hold_saves is not None else None
        if reason:
            if reason != self._held_for:  # once per reason, not at every skipped save
                _message(f"WARNING: checkpoint of step {self._step()} skipped: {reason}.")
            self._held_for = reason
            return False
        return True

    def _loss_is_finite(self, logs):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(float(keras.ops.convert_to_numpy(loss))):
            return True
        if isinstance(self.model.optimizer, keras.optimizers.LossScaleOptimizer):
            _message(
                f"WARNING: non-finite loss at step {self._step()} under loss scaling; "
                "checkpoint skipped."
            )
            return False
        self._failed = True
        last = self._checkpoints()
        raise FloatingPointError(
            f"Non-finite training loss ({loss}) at step {self._step()}; training stopped "
            "without saving. Last good checkpoint: "
            + (last[-1] if last else f"none in {self.directory}")
        )

    def save(self, step):
        """Writes the checkpoint of `step` and prunes the oldest beyond `keep`."""
        path = os.path.join(self.directory, NAME_FORMAT.format(step=step))
        try:
            save_training_state(self.model, path, batches=self._counter.batches)
        except OSError as error:
            # A full disk or a lost mount: the atomic write left every file as it was,
            # and pruning (below) has not run, so the user's last checkpoint is intact.
            last = self._checkpoints()
            message = (
                f"Could not write checkpoint {path} ({error.strerror or error}). "
                "No checkpoint was replaced or deleted; the last good one is "
                + (last[-1] if last else f"none in {self.directory}")
                + ". Rerun after freeing space to resume from it."
            )
            raise (OSError(error.errno, message) if error.errno else OSError(message)) from error
        self._last_save_time = time.monotonic()
        if path not in self.saved:
            self.saved.append(path)
        for old in self._checkpoints()[: -self.keep]:
            os.remove(old)
        return path

    def on_train_end(self, logs=None):
        try:
            self._end_training(logs)
        finally:
            self._stop.restore()

    def restore_signal_handlers(self):
        """Gives the program its signal handlers back, for a `fit` that raised.

        Keras skips `on_train_end` when a callback raises; call this then.
        """
        self._stop.restore()

    def last_checkpoint(self, before_step=None):
        """The path of the newest checkpoint on disk (of a step < `before_step`), or None."""
        found = self._checkpoints() if os.path.isdir(self.directory) else []
        if before_step is not None:
            found = [path for path in found if checkpoint_step(path) < before_step]
        return found[-1] if found else None

    def _end_training(self, logs):
        if self._failed:
            return
        step = self._step()
        if not self._saved_step(step) and self._may_save(logs):
            self.save(step)
            if self._stop.received is None and self.after_save is not None:
                self.after_save(step)
        if self._stop.received is not None:
            self._stop_now(step)  # stopped, not finished: `fit` does not return

    def average_into(self, model):
        """Sets `model`'s weights to the average of the last `average_last` checkpoints.

        Paper 6.1. Call it once `fit` has returned, finished or stopped early
        (e.g. by a validation's patience): the final step is saved by then. A
        `fit` stopped by a signal or a non-finite loss does not return, so
        nothing is averaged then.

        Args:
            model: the model trained, or one of the same architecture.

        Returns:
            list of str, the checkpoints averaged (oldest first); empty when
            `average_last` is None or the directory holds no checkpoint (the
            model keeps its weights, with a warning).
        """
        if not self.average_last:
            return []
        available = len(self._checkpoints())
        if not available:
            _message(f"WARNING: no checkpoint in {self.directory} to average: the model keeps "
                     "its last weights.")  # fmt: skip
            return []
        paths = latest_checkpoints(self.directory, min(self.average_last, available))
        average_checkpoints(model, paths)
        return paths
