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

    `initial_rate` starts the warmup from a rate above zero: the warmup then
    runs linearly from `initial_rate` (at `step_num = 0`) to the peak (at
    `step_num = warmup_steps`), as fairseq's `inverse_sqrt` schedule with its
    `--warmup-init-lr` does; the decay is unchanged. With the default 0 this
    is the paper's formula.

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
        initial_rate: float. Rate the linear warmup starts from (paper: 0).

    Example:

    >>> schedule = TransformerSchedule(d_model=512)
    >>> optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    """

    def __init__(
        self, d_model, warmup_steps=4000, scale=1.0, accumulation_steps=1, initial_rate=0.0
    ):
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
        peak = scale * d_model**-0.5 * warmup_steps**-0.5
        if not 0.0 <= initial_rate <= peak:
            raise ValueError(
                f"`initial_rate` must be in [0, the peak rate {peak:.3g}]. "
                f"Received: initial_rate={initial_rate!r}"
            )
        self.initial_rate = float(initial_rate)
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
        rate = ops.cast(self.scale * self.d_model**-0.5, "float32") * rate
        if self.initial_rate:
            # Warmup from `initial_rate`: (1 - step_num / warmup) of it added to the paper's ramp.
            remaining = ops.maximum(1.0 - step_num / warmup, 0.0)
            rate = rate + ops.cast(self.initial_rate, "float32") * remaining
        return rate

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
            "accumulation_steps": self.accumulation_steps,
            "initial_rate": self.initial_rate,
        }
