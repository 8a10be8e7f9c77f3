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

    Args:
        d_model: int. Model width; sets the peak rate.
        warmup_steps: int. Warmup length (paper: 4000).
        scale: float. Multiplies the whole schedule (paper: 1.0). Useful for
            small models and small batches.

    Example:

    >>> schedule = TransformerSchedule(d_model=512)
    >>> optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        if not isinstance(d_model, int) or d_model <= 0:
            raise ValueError(f"`d_model` must be a positive int. Received: d_model={d_model!r}")
        if not isinstance(warmup_steps, int) or warmup_steps <= 0:
            raise ValueError(
                f"`warmup_steps` must be a positive int. Received: warmup_steps={warmup_steps!r}"
            )
        if scale <= 0:
            raise ValueError(f"`scale` must be positive. Received: scale={scale!r}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = float(scale)

    def __call__(self, step):
        step_num = ops.cast(step, "float32") + 1.0
        warmup = ops.cast(self.warmup_steps, "float32")
        rate = ops.minimum(ops.rsqrt(step_num), step_num * ops.power(warmup, -1.5))
        return ops.cast(self.scale * self.d_model**-0.5, "float32") * rate

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}
