"""How a run's training ends: the weights it keeps, with one line saying which and why, or
the one-line error of a divergence, its checkpoints set aside."""

import logging
import os
import sys

from keras_transformer.checkpoints import (
    average_checkpoints,
    checkpoint_step,
    read_checkpoint_metadata,
)
from keras_transformer.checkpoints.checkpoint_files import DIVERGED_SUFFIX, set_aside_checkpoints
from keras_transformer.experiment.valid_split import select_on_valid
from keras_transformer.training.divergence_watch import TrainingDivergedError

logger = logging.getLogger("keras_transformer.experiment")
# What the error line of a run stopped by its loss advises (docs/training.md).
RECOVERY = (
    "rerun the same command with a lower --learning-rate-scale (or more --warmup-steps) to "
    "resume from {where}"
)


def _final(text):
    """The line naming the weights the run keeps (stderr: stdout is the summary's)."""
    logger.info("Final model: %s", text)
    print(f"Final model: {text}", file=sys.stderr, flush=True)


def _set_aside_best(validation, first_step):
    """Renames the best checkpoint when a validation of the diverged steps saved it."""
    path = validation.best_path if validation is not None else None
    if path is None or not os.path.exists(path):
        return []
    if read_checkpoint_metadata(path).get("step", 0) < first_step:
        return []
    os.replace(path, path + DIVERGED_SUFFIX)
    return [path + DIVERGED_SUFFIX]


def stopped_by_loss(error, checkpoint, validation):
    """The one-line error of a run whose loss diverged (or was not finite).

    The checkpoints written from the divergence's first step on (held saves
    do not cover the steps before a judgement) are renamed `<name>.diverged`,
    so the last good checkpoint is the newest one a resume, an average or a
    selection sees.

    Args:
        error: the `FloatingPointError` that stopped `fit` (a
            `TrainingDivergedError` names the divergence's first step).
        checkpoint: the run's `PeriodicCheckpoint`.
        validation: its `ValidationCallback`, or None.

    Returns:
        A `TrainingDivergedError` (or `FloatingPointError`) to raise: the
        error, the last good checkpoint, the files set aside, the recovery.
    """
    if "Last good checkpoint: none" in str(error):  # PeriodicCheckpoint's, which names it
        return FloatingPointError(f"{error}; {RECOVERY.format(where='the start')}")
    if "Last good checkpoint" in str(error):
        return FloatingPointError(f"{error}; {RECOVERY.format(where='it')}")
    first = getattr(error, "first_step", None)
    renamed = []
    if first is not None:
        renamed = set_aside_checkpoints(checkpoint.directory, first)
        renamed += _set_aside_best(validation, first)
    last = checkpoint.last_checkpoint(before_step=first)
    message = f"{error} Training stopped; last good checkpoint: "
    message += last or f"none in {checkpoint.directory}"
    if renamed:
        names = ", ".join(os.path.basename(path) for path in renamed)
        message += f" (written after the divergence began, so renamed: {names})"
    message += "; " + RECOVERY.format(where="it" if last else "the start")
    if isinstance(error, TrainingDivergedError):
        return TrainingDivergedError(message, first_step=first)
    return FloatingPointError(message)


def _steps(paths):
    """`step N` or `steps N to M` of checkpoint paths, oldest first."""
    steps = [checkpoint_step(path) for path in paths]
    return f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]} to {steps[-1]}"


def final_weights(config, setup, valid):
    """Phase 5: the weights the run keeps: averaging (paper 6.1), selection on valid, the
    best checkpoint or the last weights, with one line on stderr saying which and why.

    Reached only when `fit` returned (finished, or stopped by patience): a signal, a
    non-finite loss or a divergence ends the run inside `fit`, before any of this.

    Returns:
        The `CheckpointSelection` of --select-on-valid, or None.
    """
    model, checkpoint, validation = setup.model, setup.checkpoint, setup.validation
    best_path = validation.best_path if validation is not None else None
    has_best = best_path is not None and os.path.exists(best_path)
    if config.validation.select_on_valid:
        # The candidates include the average of the last checkpoints: none is put in first.
        selection = select_on_valid(config, valid, model, checkpoint, validation, has_best)
        order = "higher" if selection.higher_is_better else "lower"
        scores = ", ".join(f"{name} {score:.3f}" for name, score in selection.scores.items())
        _final(
            f"{selection.selected}, the best of {len(selection.scores)} candidates on "
            f"{config.data.valid_split} by {config.validation.select_metric} (--select-on-valid; "
            f"{order} is better: {scores})"
        )
        return selection
    final_model = config.checkpoint.final_model
    if final_model == "best" and has_best:
        average_checkpoints(model, [best_path])
        step = read_checkpoint_metadata(best_path).get("step")
        _final(
            f"{best_path}, the best valid {config.validation.best_metric} (step {step}; "
            "--final-model best)"
        )
    elif final_model == "best":
        print(
            "WARNING: --final-model best, but no validation ran (no best checkpoint): "
            "the final model is the last weights.",
            file=sys.stderr,
        )
    elif final_model == "average":
        paths = checkpoint.average_into(model)
        if paths:
            asked = config.checkpoints_averaged()
            fewer = f", of the {asked} asked for" if len(paths) < asked else ""
            _final(
                f"the average of the last {len(paths)} checkpoints{fewer} in "
                f"{checkpoint.directory} ({_steps(paths)}; --final-model average, paper 6.1)"
            )
        else:
            _final("the last weights (no checkpoint to average; --final-model average)")
    else:
        last = checkpoint.last_checkpoint()
        _final(f"the last weights ({os.path.basename(last) if last else 'not saved'}; "
               "--final-model last)")  # fmt: skip
    return None
