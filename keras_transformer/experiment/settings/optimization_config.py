"""How a training run updates the weights: steps, schedule, Adam, smoothing, safeguards."""

import dataclasses

from keras_transformer.experiment.settings.config_checks import check_at_least, check_positive
from keras_transformer.utils.dataclass_config import DataclassConfig, setting


@dataclasses.dataclass(frozen=True)
class OptimizationConfig(DataclassConfig):
    """The optimizer updates of a run (paper 5.2-5.4); defaults are the paper's.

    `train_steps` and `label_smoothing` left None take the model preset's
    values (`ExperimentConfig.steps_to_train`, `ExperimentConfig.smoothing`).

    Example:

    >>> OptimizationConfig(accumulation_steps=8).warmup_steps  # 8 GPUs' batch on one
    4000
    """

    train_steps: int | None = setting(
        None,
        "Optimizer updates (5.2: 100k base, 300k big); none takes the preset's.",
        flag="--max-steps",
    )
    warmup_steps: int = setting(4000, "Learning-rate warmup steps (5.3: 4000).")
    learning_rate_scale: float = setting(1.0, "Multiplier of the schedule (paper: 1).")
    warmup_initial_rate: float = setting(
        0.0, "Rate the linear warmup starts from (paper: 0; fairseq's --warmup-init-lr: 1e-7)."
    )
    clip_norm: float | None = setting(
        None, "Clip each update's gradient to this global norm (paper: none; fairseq: 25)."
    )
    adam_epsilon: float = setting(1e-9, "Adam's epsilon (5.3: 1e-9; fairseq's default: 1e-8).")
    label_smoothing: float | None = setting(
        None, "Label smoothing (5.4: 0.1); none takes the preset's (Table 3 row D varies it)."
    )
    accumulation_steps: int = setting(
        1,
        "Batches accumulated into one update, token-weighted; 8 on one device gives the "
        "paper's 8-GPU batch.",
    )
    divergence_check: bool = setting(
        True,
        "Stop the run when the training loss stays far above its running level (more than "
        "twice it and 1 nat above it) for --divergence-steps updates: a diverged run, "
        "stopped before its checkpoints replace the good ones (docs/training.md).",
    )
    divergence_steps: int = setting(
        200, "Updates the loss must stay far above its running level to stop the run."
    )

    def __post_init__(self):
        self.check_types()
        check_at_least(self, 1, "train_steps", "warmup_steps", "accumulation_steps")
        check_at_least(self, 1, "divergence_steps")
        check_at_least(self, 0, "warmup_initial_rate")
        check_positive(self, "learning_rate_scale")
        if self.label_smoothing is not None and not 0 <= self.label_smoothing < 1:
            raise ValueError(
                f"`label_smoothing` must be in [0, 1). Received: {self.label_smoothing!r}"
            )
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"`clip_norm` must be positive or None. Received: {self.clip_norm!r}")
        if not self.adam_epsilon > 0:
            raise ValueError(f"`adam_epsilon` must be positive. Received: {self.adam_epsilon!r}")
