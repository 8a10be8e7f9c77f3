"""Stopping a run whose training loss stays far above its running level (a divergence)."""

import math


class TrainingDivergedError(FloatingPointError):
    """The training loss stayed far above its running level for too many steps.

    Attributes:
        first_step: int, the first step of the stretch far above the level:
            checkpoints of earlier steps are good.
    """

    def __init__(self, message, first_step=None):
        super().__init__(message)
        self.first_step = first_step


class DivergenceWatch:
    """Watches the recorded training loss for a divergence: finite, but far too high.

    A loss that is not finite is caught elsewhere (`TrainingMonitor`); a
    learning rate far too high can instead drive the loss to 1e14 and keep it
    finite. The rule, applied to each record of the mean loss over the steps
    since the previous one (`TrainingMonitor` records at its log steps,
    before each checkpoint save and when training ends):

    - The running level starts at `initial_level` (for a fresh model, the
      loss of a uniform prediction, ln V; or the first record's loss when
      None) and follows the records as an exponential moving average with a
      decay of `DECAY` per step (a horizon of about 50 steps), fed only by
      records that are not far above it.
    - A record is far above the level when it exceeds both `FACTOR` times
      the level and the level plus `MARGIN` nats.
    - When records stay far above the level from step `s` to step `t` with
      `t - s + 1 >= patience_steps`, `update` raises `TrainingDivergedError`
      naming both steps. A record back at the level ends the stretch.
    - `check_end` raises it when training ends inside such a stretch,
      whatever its length: the last weights are not a model to keep.

    Args:
        patience_steps: int >= 1. Steps the loss must stay far above its level.
        initial_level: float or None. The level before the first record.

    Example:

    >>> watch = DivergenceWatch(patience_steps=200, initial_level=math.log(37000))
    >>> watch.update(step=100, loss=5.2, steps=100)  # at the level: nothing happens
    """

    FACTOR = 2.0
    MARGIN = 1.0
    DECAY = 0.98

    def __init__(self, patience_steps=200, initial_level=None):
        if isinstance(patience_steps, bool) or not isinstance(patience_steps, int):
            raise ValueError(f"`patience_steps` must be an int. Received: {patience_steps!r}")
        if patience_steps < 1:
            raise ValueError(f"`patience_steps` must be >= 1. Received: {patience_steps!r}")
        self.patience_steps = patience_steps
        self.level = initial_level
        self.high_since = None  # first step of the current stretch far above the level
        self.last_loss = None  # the last record's loss

    def far_above(self, loss):
        """Whether `loss` is far above the running level (see the class's rule)."""
        if self.level is None:
            return False
        return loss > max(self.FACTOR * self.level, self.level + self.MARGIN)

    def update(self, step, loss, steps=1):
        """Takes the record of `step`: the mean `loss` of its last `steps` steps.

        Raises:
            TrainingDivergedError: the loss has stayed far above its level
                for `patience_steps` steps.
        """
        if not math.isfinite(loss):
            return  # the monitor's non-finite check reports it
        self.last_loss = loss
        if self.level is None:
            self.level = loss
            return
        if not self.far_above(loss):
            self.high_since = None
            weight = 1.0 - self.DECAY ** max(steps, 1)
            self.level += weight * (loss - self.level)
            return
        if self.high_since is None:
            self.high_since = step - max(steps, 1) + 1
        if step - self.high_since + 1 >= self.patience_steps:
            raise TrainingDivergedError(
                f"Training diverged: the loss stayed above {self.FACTOR:g} times its running "
                f"level ({self.level:.4g}) from step {self.high_since} to step {step} (last "
                f"{loss:.4g}; --no-divergence-check turns this off).",
                first_step=self.high_since,
            )

    def check_end(self, step):
        """Raises `TrainingDivergedError` when training ends (at `step`) inside a stretch.

        Example:

        >>> watch.check_end(step=60)  # after the last record, once training has ended
        """
        if self.high_since is None:
            return
        raise TrainingDivergedError(
            f"Training diverged: the loss was above {self.FACTOR:g} times its running level "
            f"({self.level:.4g}) from step {self.high_since} to the last step, {step} (last "
            f"{self.last_loss:.4g}; --no-divergence-check turns this off).",
            first_step=self.high_since,
        )

    def suspect(self):
        """A reason not to save now (the loss is far above its level), or None."""
        if self.high_since is None:
            return None
        return (
            f"the training loss has been far above its running level ({self.level:.4g}) "
            f"since step {self.high_since}"
        )
