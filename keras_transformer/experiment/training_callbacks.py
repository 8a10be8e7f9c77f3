"""The callbacks of a run's `fit`, each built with what it works with."""

import math
import typing

from keras_transformer.checkpoints import PeriodicCheckpoint
from keras_transformer.evaluation import ValidationCallback
from keras_transformer.experiment.valid_split import validation_callback
from keras_transformer.training import TrainingMonitor


class TrainingCallbacks(typing.NamedTuple):
    """The monitor, the validation (None when the run does not validate) and the checkpoint.

    Each gets the others it works with at construction: the validation tells
    the monitor the time it takes (not counted in tokens/s); the checkpoint
    holds its saves while the monitor suspects a divergence (no checkpoint of
    a diverging run replaces the good ones, docs/training.md) and validates
    after each save when `validate_every_steps` is None. `fit` takes them in
    this order: on SIGTERM the checkpoint saves and stops after the monitor
    logged the step.
    """

    monitor: TrainingMonitor
    validation: ValidationCallback | None
    checkpoint: PeriodicCheckpoint

    @classmethod
    def for_run(cls, config, distribution, model, start, train, tokenizer, valid, run):
        """The callbacks of a run.

        Args:
            config: the run's `ExperimentConfig`.
            distribution: its `RunDistribution`.
            model: the compiled model.
            start: int, the batches trained on before (a resumed run's).
            train: the `make_translation_dataset` result (its token count per batch).
            tokenizer: the run's tokenizer.
            valid: `(corpus, batches)` of the valid split, or None.
            run: the `RunDirectory` where logs and checkpoints go.
        """
        optimization = config.optimization
        monitor = TrainingMonitor(
            run.path,
            every_steps=config.log_every_steps,
            tokens_per_batch=train.summary.target_tokens / train.steps_per_epoch,
            max_steps=config.steps_to_train(),
            start_step=start,
            progress=bool(config.verbose),
            divergence_steps=optimization.divergence_steps
            if optimization.divergence_check
            else None,
            # A fresh model's loss is about that of a uniform prediction: ln V.
            initial_loss_level=math.log(tokenizer.vocabulary_size()),
        )
        # In the strategy's scope: the search it compiles may build the model's variables,
        # which a distribution strategy must own.
        with distribution.scope:
            validation = validation_callback(
                config.validation,
                config.decoding,
                valid,
                model,
                tokenizer,
                run=run,
                start=start,
                verbose=bool(config.verbose),
                lowercase=config.data.vocabulary_lowercase,
                monitor=monitor,
            )
        at_saves = validation is not None and config.validation.validate_every_steps is None
        settings = config.checkpoint
        checkpoint = PeriodicCheckpoint(
            run.checkpoints_path,
            every_steps=settings.checkpoint_every_steps,
            every_minutes=settings.checkpoint_every_minutes,
            keep=config.checkpoints_kept(),
            # --final-model best or last: no average is put into the model at the end.
            average_last=config.checkpoints_averaged()
            if settings.final_model == "average"
            else None,
            after_save=validation.validate if at_saves else None,
            hold_saves=monitor.divergence_suspect,
            start_step=start,
        )
        return cls(monitor, validation, checkpoint)

    def for_fit(self):
        """The callbacks in the order `fit` takes them (the checkpoint last)."""
        return [self.monitor, *([self.validation] if self.validation else []), self.checkpoint]
