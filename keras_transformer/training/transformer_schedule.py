"""The learning-rate schedule of paper section 5.3."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)` (5.3).

    Linear warmup for `warmup_steps` steps, then decay with the inverse square
    root of the step; the peak is at `step_num = warmup_steps`.

    The optimizer calls the schedule with its 0-based `iterations` counter
    before applying update `iterations + 1`, so `step_num = step + 1`: the
    first update uses `step_num = 1` (as tensor2tensor does), never the zero
    rate of `step_num = 0`.

    With gradient accumulation over `k` batches, Keras' optimizer still
    passes its per-batch counter, so the schedule divides it by `k`:
    `step_num` counts parameter updates, as in the paper.

    Args:
        d_model: int. Model width; sets the peak rate.
        warmup_steps: int. Warmup length (paper: 4000).
        scale: float. Multiplies the whole schedule (paper: 1.0). Useful for
            small models and small batches.
        accumulation_steps: int. Batches accumulated per update (the
            optimizer's `gradient_accumulation_steps`; 1: none).

    Example:

    >>> schedule = TransformerSchedule(d_model=512)
    >>> optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0, accumulation_steps=1):
        if not isinstance(d_model, int) or d_model <= 0:
            raise ValueError(f"`d_model` must be a positive int. Received: d_model={d_model!r}")
        if not isinstance(warmup_steps, int) or warmup_steps <= 0:
            raise ValueError(
                f"`warmup_steps` must be a positive int. Received: warmup_steps={warmup_steps!r}"
            )
        if scale <= 0:
            raise ValueError(f"`scale` must be positive. Received: scale={scale!r}")
        if (
            isinstance(accumulation_steps, bool)
            or not isinstance(accumulation_steps, int)
            or accumulation_steps < 1
        ):
            raise ValueError(
                "`accumulation_steps` must be a positive int. "
                f"Received: accumulation_steps={accumulation_steps!r}"
            )
        self.d_model = d_model
        self.accumulation_steps = accumulation_steps
        self.warmup_steps = warmup_steps
        self.scale = float(scale)

    def __call__(self, step):
        if self.accumulation_steps > 1:
            step = ops.floor_divide(step, self.accumulation_steps)
        step_num = ops.cast(step, "float32") + 1.0
        warmup = ops.cast(self.warmup_steps, "float32")
        rate = ops.minimum(ops.rsqrt(step_num), step_num * ops.power(warmup, -1.5))
        return ops.cast(self.scale * self.d_model**-0.5, "float32") * rate

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
            "accumulation_steps": self.accumulation_steps,
        }
