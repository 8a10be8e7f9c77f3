"""A `model.fit` callback logging loss, learning rate and tokens/s, and stopping at a step."""

import math
import os
import time

import keras
from keras import ops

from keras_transformer import compat
from keras_transformer.training.batch_counter import BatchCounter
from keras_transformer.training.csv_log import append_log_row, last_value, truncate_log
from keras_transformer.training.divergence_watch import DivergenceWatch
from keras_transformer.training.optimizer_state import (
    accumulation_steps,
    batches_trained,
    inner_optimizer,
)
from keras_transformer.training.progress_line import format_progress
from keras_transformer.utils.live_line import write_progress
from keras_transformer.utils.run_directory import TRAIN_EVENTS_DIR, TRAIN_LOG_FILE


class TrainingMonitor(keras.callbacks.Callback):
    """Writes training curves to TensorBoard and a CSV file; stops after `max_steps`.

    Every `every_steps` optimizer updates, and at the end of training, it
    records for the updates since the previous record: the mean training loss
    (from Keras' own loss tracker: the loss `fit` reports, but per step
    rather than a running mean over the epoch), the learning rate of the
    last update, and the throughput in target tokens per second. Values go
    to TensorBoard (`log_dir/train`, tags `loss`, `learning_rate`,
    `tokens_per_second`) and are appended to `log_dir/train_log.csv`
    (`step,loss,learning_rate,tokens_per_second,elapsed_seconds`), which
    survives restarts: a resumed run first drops the rows beyond its restored
    step (written after the checkpoint it resumes from), then appends, so the
    file holds one row per step, and its `elapsed_seconds` go on from the
    last kept row: the training time of the run, not of this process. With
    `progress=True` the same record is also a line on stderr
    (`format_progress`: step of `max_steps`, loss, learning rate, tokens/s,
    elapsed, ETA), rewritten in place when stderr is a terminal. A record
    whose loss is not finite stops training with a `FloatingPointError`
    naming the step (use `fit(verbose=0)` with it); with `divergence_steps`,
    so does a finite loss that stays far above its running level. The
    divergence watch judges the mean loss of every step since its previous
    judgement at each record, before each checkpoint save (through
    `divergence_suspect`) and when training ends; a run that ends while the
    loss is far above its level raises too (its last weights are no model to
    keep), whatever the patience.

    Steps are optimizer updates (paper 5.3's step_num); with gradient
    accumulation one step takes `accumulation_steps` batches. The model's
    state is read only when a record is written, so on JAX the training
    loop keeps its asynchronous dispatch between records. With
    `compile(steps_per_execution=N)`, Keras reaches callbacks only every N
    batches: batches are still counted exactly, a record is written at the
    first such point after its step comes due, and training stops at the
    first one at or after `max_steps` (up to N - 1 batches later).

    Args:
        log_dir: str or None. Directory for the TensorBoard events and the
            CSV file (created). None records nothing (use for `max_steps`).
        every_steps: int. Record every this many steps (paper-scale runs:
            100; tests: 1).
        tokens_per_batch: float or None. Real target tokens per batch, for
            tokens/s; `TranslationDataset.summary.target_tokens /
            steps_per_epoch` is the exact mean over an epoch. None leaves the
            column empty.
        max_steps: int or None. Stop training after this many steps (the
            paper: 100,000 base, 300,000 big), counting restored ones, so a
            resumed run ends where the uninterrupted one would.
        start_step: int or None. Batches trained on before this `fit` (what
            `PeriodicCheckpoint.restore` returns). None reads the optimizer's
            batch counter, which does not count the steps a
            `LossScaleOptimizer` skipped.
        progress: bool. Also write each record as a line on stderr.
        divergence_steps: int or None. Stop training with a
            `TrainingDivergedError` (a `FloatingPointError`) when the training
            loss stays far above its running level for this many steps, or
            is far above it when training ends (`DivergenceWatch`: more than
            twice the level and 1 nat above it); None does not watch.
            `divergence_suspect()` says meanwhile why a checkpoint should not
            be saved.
        initial_loss_level: float or None. The running level before the
            first record: ln(vocabulary size), the loss of a uniform
            prediction, for a fresh model; None takes the first record's.

    Example:

    >>> monitor = TrainingMonitor("runs/base", tokens_per_batch=train.summary.target_tokens
    ...                           / train.steps_per_epoch, max_steps=100_000)
    >>> model.fit(train.dataset, steps_per_epoch=1000, epochs=100, callbacks=[monitor])
    """

    CSV_NAME = TRAIN_LOG_FILE
    COLUMNS = ("step", "loss", "learning_rate", "tokens_per_second", "elapsed_seconds")

    def __init__(
        self,
        log_dir=None,
        every_steps=100,
        tokens_per_batch=None,
        max_steps=None,
        start_step=None,
        progress=False,
        divergence_steps=None,
        initial_loss_level=None,
    ):
        super().__init__()
        if isinstance(every_steps, bool) or not isinstance(every_steps, int) or every_steps < 1:
            raise ValueError(f"`every_steps` must be an int >= 1. Received: {every_steps!r}")
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"`max_steps` must be an int >= 1 or None. Received: {max_steps!r}")
        self.log_dir = None if log_dir is None else os.fspath(log_dir)
        self.every_steps = every_steps
        self.tokens_per_batch = tokens_per_batch
        self.max_steps = max_steps
        self.start_step = start_step
        self.progress = progress
        self.divergence_steps = divergence_steps
        self.initial_loss_level = initial_loss_level
        self._watch = None
        self._writer = None
        self._counter = None  # set while `fit` runs
        self._tracker_holds_training = True

    def on_train_begin(self, logs=None):
        start = self.start_step
        if start is None:
            start = batches_trained(self.model.optimizer)
        self._counter = BatchCounter(start, accumulation_steps(self.model.optimizer))
        self._start_time = time.monotonic()
        self._elapsed_before = 0.0  # training time of the earlier processes of a resumed run
        self._last = (0.0, 0.0, start, self._start_time)  # total, count, batch, time
        self._first_step = self._counter.step
        # The watch's loss sums and step at its last judgement (offsets, as `_last`).
        self._judged = (0.0, 0.0, self._counter.step)
        if self.divergence_steps is not None:
            self._watch = DivergenceWatch(self.divergence_steps, self.initial_loss_level)
        self._tracker_holds_training = True  # False from validation until the next epoch
        if self.log_dir is not None:
            import tensorflow as tf  # TensorBoard's writer; TF is installed with either backend

            os.makedirs(self.log_dir, exist_ok=True)
            log_path = os.path.join(self.log_dir, self.CSV_NAME)
            truncate_log(log_path, self._counter.step)
            self._elapsed_before = last_value(log_path, "elapsed_seconds") or 0.0
            self._writer = tf.summary.create_file_writer(
                os.path.join(self.log_dir, TRAIN_EVENTS_DIR)
            )
        if self.max_steps is not None and self._counter.step >= self.max_steps:
            self.model.stop_training = True

    def _loss_sums(self):
        """The training loss summed over this epoch's batches so far, and their count."""
        if not self._tracker_holds_training:
            return 0.0, 0.0  # validation reused the tracker; the offsets in `_last` hold it
        tracker = next(metric for metric in self.model.metrics if metric.name == "loss")
        return (
            float(ops.convert_to_numpy(tracker.total)),
            float(ops.convert_to_numpy(tracker.count)),
        )

    def _end_epoch_sums(self):
        # Keras resets its loss tracker when validation begins and when the next
        # epoch begins: carry the sums since the last record over, as negative
        # offsets from zero.
        if not (self._recording() or self._watch) or not self._tracker_holds_training:
            return
        total, count = self._loss_sums()
        last_total, last_count, batches, last_time = self._last
        self._last = (last_total - total, last_count - count, batches, last_time)
        judged_total, judged_count, judged_step = self._judged
        self._judged = (judged_total - total, judged_count - count, judged_step)
        self._tracker_holds_training = False

    def on_test_begin(self, logs=None):
        # `fit`'s validation calls this before resetting the tracker. (Outside `fit`,
        # an `evaluate` that was given this callback has no curve to keep.)
        if self._counter is not None:
            self._end_epoch_sums()

    def on_epoch_end(self, epoch, logs=None):
        self._end_epoch_sums()

    def on_epoch_begin(self, epoch, logs=None):
        self._counter.epoch_begin()
        self._tracker_holds_training = True

    def on_train_batch_end(self, batch, logs=None):
        self._counter.batch_end(batch)
        if not self._counter.update_ended():
            return
        step = self._counter.step
        if self._recording() and self._counter.crossed(self.every_steps):
            self._record(step)
        if self.max_steps is not None and step >= self.max_steps:
            self.model.stop_training = True

    def exclude_time(self, seconds):
        """Leaves `seconds` spent outside training (a validation) out of the next tokens/s."""
        if self._counter is not None:
            total, count, batches, last_time = self._last
            self._last = (total, count, batches, last_time + seconds)

    def _recording(self):
        return self._writer is not None or self.progress

    def _record(self, step, final=False):
        total, count = self._loss_sums()
        last_total, last_count, last_batches, last_time = self._last
        now = time.monotonic()
        loss = (total - last_total) / (count - last_count) if count > last_count else math.nan
        tokens_per_second = None
        if self.tokens_per_batch is not None and now > last_time:
            tokens_per_second = self.tokens_per_batch * (self._counter.batches - last_batches)
            tokens_per_second /= now - last_time
        self._last = (total, count, self._counter.batches, now)
        row = {
            "step": step,
            "loss": loss,
            "learning_rate": self._last_learning_rate(),
            "tokens_per_second": tokens_per_second,
            "elapsed_seconds": self._elapsed_before + now - self._start_time,
        }
        if self._writer is not None:
            self._write(row)
        if self.progress:
            done = step - self._first_step
            eta = None
            if self.max_steps is not None and done > 0:
                eta = (now - self._start_time) / done * max(self.max_steps - step, 0)
            line = format_progress(
                step, self.max_steps, loss, row["learning_rate"], tokens_per_second,
                row["elapsed_seconds"], eta,
            )  # fmt: skip
            write_progress(line, final=final)
        if count > last_count and not math.isfinite(loss):
            raise FloatingPointError(
                f"Non-finite training loss ({loss}) by step {step} (mean of steps "
                f"{step - self.every_steps + 1}-{step})."
            )
        self._judge(step)

    def _judge(self, step):
        """Gives the watch the mean loss of the steps since its last judgement."""
        if self._watch is None:
            return
        total, count = self._loss_sums()
        last_total, last_count, last_step = self._judged
        if count <= last_count or step <= last_step:
            return  # no update since
        self._judged = (total, count, step)
        self._watch.update(step, (total - last_total) / (count - last_count), step - last_step)

    def divergence_suspect(self):
        """Why the current weights should not be saved (a divergence in progress), or None.

        Judges the steps since the last judgement first: called before each
        save, it raises `TrainingDivergedError` when the patience ran out.
        """
        if self._watch is None:
            return None
        if self._counter is not None and self._counter.update_ended():
            self._judge(self._counter.step)
        return self._watch.suspect()

    def _last_learning_rate(self):
        optimizer = inner_optimizer(self.model.optimizer)
        schedule = compat.learning_rate_schedule(optimizer)
        if schedule is not None:
            # The rate of the update just applied, not of the next one.
            return float(ops.convert_to_numpy(schedule(self._counter.batches - 1)))
        return float(ops.convert_to_numpy(optimizer.learning_rate))

    def _write(self, row):
        import tensorflow as tf

        with self._writer.as_default(step=row["step"]):
            for name in ("loss", "learning_rate", "tokens_per_second"):
                if row[name] is not None:
                    tf.summary.scalar(name, row[name])
        append_log_row(os.path.join(self.log_dir, self.CSV_NAME), self.COLUMNS, row)

    def on_train_end(self, logs=None):
        step = self._counter.step
        if (
            self._recording()
            and self._counter.batches > self._last[2]
            and self._counter.update_ended()
        ):
            self._record(step, final=True)  # the curve's last point
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None
        if self._watch is not None and self._counter.update_ended():
            self._judge(step)
        self._counter = None
        if self._watch is not None:
            self._watch.check_end(step)  # ended far above the level: no model to keep
