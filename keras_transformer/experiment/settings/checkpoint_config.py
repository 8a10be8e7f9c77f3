"""When a training run saves checkpoints, how many it keeps, and which model it ends with."""

import dataclasses

from keras_transformer.experiment.settings.config_checks import (
    check_at_least,
    check_choices,
    check_positive,
)
from keras_transformer.utils.dataclass_config import DataclassConfig, setting

FINAL_MODELS = ("average", "best", "last")


@dataclasses.dataclass(frozen=True)
class CheckpointConfig(DataclassConfig):
    """Checkpoints every 10 minutes, the last ones averaged at the end (paper 6.1).

    `average_last` left None takes the model preset's number (5 base, 20
    big; `ExperimentConfig.checkpoints_averaged`).

    Example:

    >>> CheckpointConfig(checkpoint_every_minutes=None, checkpoint_every_steps=1000)
    """

    checkpoint_every_minutes: float | None = setting(
        10.0, "Minutes between checkpoints (6.1: 10); none for steps only."
    )
    checkpoint_every_steps: int | None = setting(
        None, "Updates between checkpoints; none for minutes only."
    )
    average_last: int | None = setting(
        None,
        "Checkpoints averaged at the end (6.1: 5 base, 20 big); 1 keeps the last checkpoint "
        "without averaging; none takes the preset's.",
    )
    keep_checkpoints: int | None = setting(
        None,
        "Checkpoints kept on disk, the newest (older ones are deleted); none: as many as "
        "are averaged, at least 5. Keeping more lets you average other spans after training "
        "(keras-transformer average), and --select-on-valid also tries their average.",
    )
    final_model: str = setting(
        "average",
        "The model scored and exported at the end: average of the last --average-last "
        "checkpoints (paper 6.1), best (checkpoints/best.weights.h5) or last (final weights).",
        choices=FINAL_MODELS,
    )

    def __post_init__(self):
        self.check_types()
        check_choices(self, final_model=FINAL_MODELS)
        check_at_least(self, 1, "checkpoint_every_steps", "average_last", "keep_checkpoints")
        check_positive(self, "checkpoint_every_minutes")
        if self.checkpoint_every_minutes is None and self.checkpoint_every_steps is None:
            raise ValueError("Set `checkpoint_every_minutes`, `checkpoint_every_steps` or both.")

    def averaged(self, preset_averaged):
        """`average_last`, or `preset_averaged` (the preset's number, 6.1) when it is None."""
        return preset_averaged if self.average_last is None else self.average_last

    def kept(self, preset_averaged):
        """`keep_checkpoints`, or as many as are averaged and at least 5."""
        if self.keep_checkpoints is not None:
            return self.keep_checkpoints
        return max(self.averaged(preset_averaged), 5)
