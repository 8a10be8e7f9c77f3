"""The paper's optimizer (5.3): Adam with beta_1=0.9, beta_2=0.98, epsilon=1e-9."""

import keras

from keras_transformer.training.transformer_schedule import TransformerSchedule


def paper_optimizer(d_model, warmup_steps=4000, scale=1.0, **adam_kwargs):
    """Adam with the paper's betas and epsilon and the schedule of 5.3.

    Args:
        d_model: int. Model width, for the schedule.
        warmup_steps: int. Schedule warmup (paper: 4000).
        scale: float. Multiplier of the schedule (paper: 1.0).
        **adam_kwargs: other `keras.optimizers.Adam` arguments (for example
            `clipnorm`, `gradient_accumulation_steps`); they may also override
            the paper's `beta_1`, `beta_2` and `epsilon`.

    Returns:
        A `keras.optimizers.Adam`.

    Example:

    >>> model.compile(optimizer=paper_optimizer(512), loss=LabelSmoothedCrossEntropy())
    """
    settings = {"beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9, **adam_kwargs}
    schedule = TransformerSchedule(d_model, warmup_steps=warmup_steps, scale=scale)
    return keras.optimizers.Adam(learning_rate=schedule, **settings)
