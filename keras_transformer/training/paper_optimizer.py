"""The paper's optimizer (5.3): Adam with beta_1=0.9, beta_2=0.98, epsilon=1e-9."""

from keras_transformer.training.fused_adam import FusedAdam
from keras_transformer.training.transformer_schedule import TransformerSchedule


def paper_optimizer(
    d_model, warmup_steps=4000, scale=1.0, accumulation_steps=1, initial_rate=0.0, **adam_kwargs
):
    """Adam with the paper's betas and epsilon and the schedule of 5.3.

    Args:
        d_model: int. Model width, for the schedule.
        warmup_steps: int. Schedule warmup (paper: 4000).
        scale: float. Multiplier of the schedule (paper: 1.0).
        accumulation_steps: int. Apply one update every this many batches
            (Keras' `gradient_accumulation_steps`), with the schedule counting
            updates. For token-weighted accumulation, build the dataset with
            the same `accumulation_steps` and use the loss with
            `reduction="sum"` (see `docs/training.md`).
        initial_rate: float. Rate the linear warmup starts from (paper: 0;
            fairseq's `--warmup-init-lr`, e.g. 1e-7).
        **adam_kwargs: other `keras.optimizers.Adam` arguments (for example
            `clipnorm`); they may also override the paper's `beta_1`,
            `beta_2` and `epsilon`.

    Returns:
        A `FusedAdam`: Keras' `Adam`, whose TensorFlow update outside XLA is
        one kernel per variable.

    Example:

    >>> model.compile(optimizer=paper_optimizer(512), loss=LabelSmoothedCrossEntropy())
    """
    if "gradient_accumulation_steps" in adam_kwargs:
        raise ValueError(
            "Pass `accumulation_steps` (it also sets the schedule's step counting), not "
            "`gradient_accumulation_steps`. Received: gradient_accumulation_steps="
            f"{adam_kwargs['gradient_accumulation_steps']!r}"
        )
    settings = {"beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9, **adam_kwargs}
    if accumulation_steps > 1:
        settings["gradient_accumulation_steps"] = accumulation_steps
    schedule = TransformerSchedule(
        d_model,
        warmup_steps=warmup_steps,
        scale=scale,
        accumulation_steps=accumulation_steps,
        initial_rate=initial_rate,
    )
    return FusedAdam(learning_rate=schedule, **settings)
