"""`plot_learning_rate_schedule`: the paper's learning-rate schedule (5.3, eq. 3) as a PNG."""

import numpy as np
from keras import ops

from keras_transformer.figures._matplotlib import new_figure, save_png
from keras_transformer.training.transformer_schedule import TransformerSchedule

# The pairs of the well-known plot of eq. (3) (The Annotated Transformer), beside the paper's.
DEFAULT_VARIANTS = ((512, 8000), (256, 4000))


def plot_learning_rate_schedule(
    path,
    d_model=512,
    warmup_steps=4000,
    steps=100_000,
    variants=DEFAULT_VARIANTS,
    scale=1.0,
    dpi=100,
):
    """Draws `lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup^-1.5)` as a PNG.

    The rates are those `keras_transformer.training.TransformerSchedule`
    gives the optimizer (so `step_num` = update number, starting at 1), for
    `(d_model, warmup_steps)` and each extra pair of `variants`: linear
    warmup to a peak at `step_num = warmup_steps`, then inverse square root
    decay. The defaults draw the paper's base setting (512, 4000) beside
    (512, 8000) and (256, 4000).

    Args:
        path: str or path-like, the PNG to write (atomically; parent folders
            are created).
        d_model: int. Model width of the main curve (paper base: 512).
        warmup_steps: int. Warmup of the main curve (paper: 4000).
        steps: int. Updates drawn, from 1 to `steps` (paper base: 100,000).
        variants: iterable of `(d_model, warmup_steps)` pairs drawn as well;
            `()` draws the main curve only.
        scale: float. The schedule's `scale` for every curve (paper: 1.0).
        dpi: int. Resolution of the PNG (the figure is 6.4 x 3.6 inches).

    Returns:
        A dict: `"step_num"`, the 1-D int array `1..steps`, and
        `"learning_rates"`, a dict from each `(d_model, warmup_steps)` pair
        (the main one first) to its 1-D float32 array of rates.

    Raises:
        ImportError: matplotlib is missing (install the `plots` extra).
        ValueError: `steps` is not a positive int, or a pair is invalid.

    Example:

    >>> curves = plot_learning_rate_schedule("figures/learning_rate.png")
    >>> curves["learning_rates"][(512, 4000)].argmax() + 1  # the peak's step_num
    4000
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"`steps` must be a positive int. Received: steps={steps!r}")
    pairs = []
    for pair in [(d_model, warmup_steps), *variants]:
        pair = tuple(pair)
        if len(pair) != 2:
            raise ValueError(
                f"Each variant must be a (d_model, warmup_steps) pair. Received: {pair}"
            )
        if pair not in pairs:
            pairs.append(pair)
    iterations = np.arange(steps, dtype="int32")  # the optimizer's 0-based counter
    learning_rates = {}
    for width, warmup in pairs:
        schedule = TransformerSchedule(width, warmup_steps=warmup, scale=scale)
        learning_rates[(width, warmup)] = np.asarray(
            ops.convert_to_numpy(schedule(iterations)), dtype="float32"
        )
    step_num = iterations + 1

    figure = new_figure(figsize=(6.4, 3.6), layout="constrained")
    axes = figure.subplots()
    for (width, warmup), rates in learning_rates.items():
        axes.plot(step_num, rates, linewidth=1.5, label=f"d_model={width}, warmup={warmup}")
    axes.set_title("Learning rate schedule (paper 5.3, eq. 3)")
    axes.set_xlabel("step_num")
    axes.set_ylabel("learning rate")
    axes.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    axes.grid(True, alpha=0.3)
    axes.legend()
    save_png(figure, path, dpi)
    return {"step_num": step_num, "learning_rates": learning_rates}
