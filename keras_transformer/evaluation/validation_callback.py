"""A `model.fit` callback: dev perplexity and BLEU while training, best checkpoint, patience."""

import csv
import math
import os
import sys
import time

import keras

from keras_transformer.checkpoints.training_state import (
    UnreadableCheckpointError,
    read_checkpoint_metadata,
    save_training_state,
)
from keras_transformer.evaluation.bleu import sacre_bleu
from keras_transformer.evaluation.perplexity import compile_batch_nll
from keras_transformer.evaluation.perplexity import perplexity as dev_perplexity
from keras_transformer.training.batch_counter import BatchCounter
from keras_transformer.training.csv_log import append_log_row, truncate_log
from keras_transformer.training.optimizer_state import accumulation_steps, batches_trained
from keras_transformer.utils.live_line import end_live_line
from keras_transformer.utils.run_directory import (
    BEST_CHECKPOINT_FILE,
    VALID_EVENTS_DIR,
    VALID_LOG_FILE,
)

METRICS = ("bleu", "perplexity")


class ValidationCallback(keras.callbacks.Callback):
    """Scores the dev set while training, keeps the best checkpoint, stops on a plateau.

    Each validation measures, with dropout off, the per-token negative
    log-likelihood (`loss`, nats, no label smoothing) and perplexity
    (`exp(loss)`, `evaluation.perplexity`, paper Table 3's "PPL (dev)") on
    `batches`, and the corpus sacreBLEU of `translator`'s translations of
    `sources` against `references`. The translator, and so its compiled
    search, is built once by the caller and reused: validations after the
    first run the programs already compiled for their shapes.

    Results go to stderr (one line with the best so far), to
    `log_dir/valid_log.csv` (`step,loss,perplexity,bleu,seconds,best_step,best`;
    rows beyond the restored step are dropped on resume) and to TensorBoard
    (`log_dir/validation`, tags `loss`, `perplexity`, `bleu`).

    When `best_metric`'s value beats every earlier one (higher BLEU, lower
    perplexity), the training state is written atomically to
    `best_dir/best.weights.h5` with the step, metric and value in its
    metadata (`read_checkpoint_metadata`); `PeriodicCheckpoint` never
    rotates that file away. A resumed run reads the best value back from
    it and the validations since from the CSV, so the no-improvement count
    continues. After `patience` validations in a row without improvement,
    training stops cleanly (`model.stop_training`), so everything after
    `fit` (averaging, selection, test scores, export) still runs.

    Validations happen every `every_steps` optimizer updates and at the end
    of training (if its step was not validated), or, with `every_steps=None`,
    whenever `validate(step)` is called: pass it as `PeriodicCheckpoint`'s
    `after_save` to validate at every checkpoint.

    Args:
        translator: a `decoding.Translator` of the model being trained.
        sources: list of str, the dev sources translated for BLEU.
        references: list of str, their references.
        batches: iterable of `(inputs, labels)` batches for perplexity (a
            finite `tf.data.Dataset`, read into memory at the first
            validation; each batch shape is compiled once), or None to skip it.
        every_steps: int or None. Validate every this many updates.
        log_dir: str or None. Where the CSV and TensorBoard events go.
        best_dir: str or None. Where `best.weights.h5` goes; None keeps none.
        best_metric: "bleu" or "perplexity".
        patience: int or None. Stop after this many validations without
            improvement; None or 0 never stops.
        start_step: int or None. Batches trained on before this `fit`
            (`PeriodicCheckpoint.restore`'s value); None reads the optimizer.
        stream: text stream for the lines, or None for stderr.
        verbose: bool. Write the lines (False: only the CSV and TensorBoard).
        monitor: a `TrainingMonitor` or None, told the time each validation
            takes so that its tokens/s counts training only.
        lowercase: bool. Case-insensitive BLEU, for a model trained on
            case-folded text.

    Example:

    >>> translator = Translator(model, tokenizer, search="greedy")
    >>> validation = ValidationCallback(translator, sources[:200], targets[:200], dev,
    ...                                 every_steps=1000, log_dir="runs/base",
    ...                                 best_dir="runs/base/checkpoints", patience=10)
    >>> model.fit(train, steps_per_epoch=1000, epochs=100, callbacks=[validation])
    """

    CSV_NAME = VALID_LOG_FILE
    COLUMNS = ("step", "loss", "perplexity", "bleu", "seconds", "best_step", "best")
    BEST_NAME = BEST_CHECKPOINT_FILE

    def __init__(
        self,
        translator,
        sources,
        references,
        batches,
        *,
        every_steps=None,
        log_dir=None,
        best_dir=None,
        best_metric="bleu",
        patience=None,
        start_step=None,
        stream=None,
        verbose=True,
        monitor=None,
        lowercase=False,
    ):
        super().__init__()
        if best_metric not in METRICS:
            raise ValueError(f"`best_metric` must be one of {METRICS}. Received: {best_metric!r}")
        if every_steps is not None and (not isinstance(every_steps, int) or every_steps < 1):
            raise ValueError(
                f"`every_steps` must be an int >= 1 or None. Received: {every_steps!r}"
            )
        if patience is not None and (not isinstance(patience, int) or patience < 0):
            raise ValueError(f"`patience` must be an int >= 0 or None. Received: {patience!r}")
        if len(sources) != len(references):
            raise ValueError(
                f"{len(sources)} sources but {len(references)} references: one each is needed."
            )
        if not sources and batches is None:
            raise ValueError("Nothing to validate on: no sentences and no batches.")
        self.translator = translator
        self.sources = list(sources)
        self.references = list(references)
        self.batches = batches
        self.every_steps = every_steps
        self.log_dir = None if log_dir is None else os.fspath(log_dir)
        self.best_dir = None if best_dir is None else os.fspath(best_dir)
        self.best_metric = best_metric
        self.patience = patience or None
        self.start_step = start_step
        self.stream = stream
        self.verbose = verbose
        self.monitor = monitor
        self.lowercase = lowercase
        self.best = None  # the best value of `best_metric` so far
        self.best_step = None
        self.without_improvement = 0  # validations since the best
        self.history = []  # (step, metrics dict) of this fit's validations
        self.stopped = False  # patience ran out
        self._counter = None
        self._writer = None
        self._last_validated = None
        self._batch_nll = None  # compiled once, at the first validation

    @property
    def best_path(self):
        """`best_dir/best.weights.h5`, or None without `best_dir`."""
        return None if self.best_dir is None else os.path.join(self.best_dir, self.BEST_NAME)

    def on_train_begin(self, logs=None):
        start = self.start_step
        if start is None:
            start = batches_trained(self.model.optimizer)
        self._counter = BatchCounter(start, accumulation_steps(self.model.optimizer))
        self._last_validated = self._counter.step
        self.history = []
        self.stopped = False
        self._restore_best(self._counter.step)
        if self.log_dir is not None:
            os.makedirs(self.log_dir, exist_ok=True)
            self._writer = self._create_writer()

    def _create_writer(self):
        """TensorBoard's writer for `log_dir/validation` (TF is installed with either backend)."""
        import tensorflow as tf

        return tf.summary.create_file_writer(os.path.join(self.log_dir, VALID_EVENTS_DIR))

    def _restore_best(self, step):
        """The best value and the count since it, from `best.weights.h5` and the CSV."""
        self.best, self.best_step, self.without_improvement = None, None, 0
        earlier = []
        if self.log_dir is not None:
            path = os.path.join(self.log_dir, self.CSV_NAME)
            truncate_log(path, step)
            if os.path.exists(path):
                with open(path, newline="", encoding="utf-8") as file:
                    earlier = [row for row in csv.DictReader(file) if row[self.best_metric]]
        for row in earlier:
            self._count(int(row["step"]), float(row[self.best_metric]))
        path = self.best_path
        if path is None or not os.path.exists(path):
            return
        try:
            metadata = read_checkpoint_metadata(path)
        except UnreadableCheckpointError as error:
            self._print(f"WARNING: {error} It will be replaced by the next best validation.")
            self.best, self.best_step = None, None
            return
        if metadata.get("metric") != self.best_metric:
            self._print(
                f"WARNING: {path} was kept for the best {metadata.get('metric')}, this run "
                f"ranks by {self.best_metric}: it will be replaced by the next validation."
            )
            self.best, self.best_step = None, None
            return
        self.best, self.best_step = float(metadata["value"]), int(metadata["step"])
        self.without_improvement = sum(int(row["step"]) > self.best_step for row in earlier)

    def _improves(self, value):
        if self.best is None:
            return math.isfinite(value)
        return value > self.best if self.best_metric == "bleu" else value < self.best

    def _count(self, step, value):
        """Updates the best and the no-improvement count; True when `value` is a new best."""
        if self._improves(value):
            self.best, self.best_step, self.without_improvement = value, step, 0
            return True
        self.without_improvement += 1
        return False

    def on_epoch_begin(self, epoch, logs=None):
        self._counter.epoch_begin()

    def on_train_batch_end(self, batch, logs=None):
        self._counter.batch_end(batch)
        if self.every_steps is None or not self._counter.update_ended():
            return
        if self._counter.crossed(self.every_steps):
            self.validate(self._counter.step)

    def on_train_end(self, logs=None):
        step = self._counter.step
        if (
            self.every_steps is not None
            and step > self._last_validated
            and self._counter.update_ended()
        ):
            self.validate(step)
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def compute_metrics(self, perplexity=True, bleu=True):
        """`{"loss", "perplexity", "bleu"}` of the model as it is now (None: not measured).

        Args:
            perplexity: bool. Measure loss and perplexity (if there are batches).
            bleu: bool. Measure BLEU (if there are sentences).
        """
        # On JAX, `fit` keeps the state outside the variables between syncs; reading
        # `self.model` syncs it, so the translator's compiled search sees this step's weights.
        model = self.model
        metrics = {"loss": None, "perplexity": None, "bleu": None}
        if perplexity and self.batches is not None:
            if self._batch_nll is None:
                # Read once: tf.data's per-pass start-up would cost more than the batches.
                if hasattr(self.batches, "as_numpy_iterator"):
                    self.batches = list(self.batches.as_numpy_iterator())
                self._batch_nll = compile_batch_nll(model)
            metrics["perplexity"] = dev_perplexity(model, self.batches, batch_nll=self._batch_nll)
            metrics["loss"] = math.log(metrics["perplexity"])
        if bleu and self.sources:
            hypotheses = self.translator.translate(self.sources, verbose=0)
            metrics["bleu"], _ = sacre_bleu(hypotheses, [self.references], lowercase=self.lowercase)
        return metrics

    def validate(self, step):
        """Scores the model at `step`; keeps it if best; stops training when patience ran out.

        Returns:
            dict of the metrics.
        """
        began = time.monotonic()
        metrics = self.compute_metrics()
        value = metrics[self.best_metric]
        if value is None:
            raise ValueError(f"best_metric={self.best_metric!r} was not measured (no data).")
        improved = self._count(step, value)
        if improved and self.best_path is not None:
            save_training_state(
                self.model,
                self.best_path,
                batches=self._counter.batches,
                metadata={"step": step, "metric": self.best_metric, "value": value},
            )
        seconds = time.monotonic() - began
        self._last_validated = step
        self.history.append((step, metrics))
        row = {"step": step, **metrics, "seconds": seconds}
        row.update(best_step=self.best_step, best=self.best)
        self._log(row, improved)
        if self.monitor is not None:
            self.monitor.exclude_time(time.monotonic() - began)
        if self.patience and self.without_improvement >= self.patience:
            self.stopped = True
            self.model.stop_training = True
            self._print(
                f"Stopping early at step {step}: no better valid {self.best_metric} in "
                f"{self.patience} validations (best {self.best:.2f} at step {self.best_step})."
            )
        return metrics

    def _log(self, row, improved):
        parts = [f"valid step {row['step']}"]
        if row["loss"] is not None:
            parts.append(f"loss {row['loss']:.3f}")
        if row["perplexity"] is not None:
            parts.append(f"ppl {row['perplexity']:.2f}")
        if row["bleu"] is not None:
            parts.append(f"BLEU {row['bleu']:.2f} ({len(self.sources)} sentences)")
        best = f"best {self.best_metric} {self.best:.2f} at step {self.best_step}"
        parts.append(best + (" (new)" if improved else f", {self.without_improvement} since"))
        parts.append(f"{row['seconds']:.1f}s")
        self._print(" | ".join(parts))
        if self.log_dir is None:
            return
        append_log_row(os.path.join(self.log_dir, self.CSV_NAME), self.COLUMNS, row)
        import tensorflow as tf

        # A validation after `on_train_end` closed the writer (the final checkpoint's,
        # saved by a callback that ends after this one) writes through a writer of its own.
        writer = self._writer or self._create_writer()
        with writer.as_default(step=row["step"]):
            for name in ("loss", "perplexity", "bleu"):
                if row[name] is not None:
                    tf.summary.scalar(name, row[name])
        writer.flush()
        if writer is not self._writer:
            writer.close()

    def _print(self, line):
        if not self.verbose:
            return
        stream = sys.stderr if self.stream is None else self.stream
        end_live_line(stream)
        print(line, file=stream, flush=True)
