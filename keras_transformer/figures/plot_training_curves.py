"""`plot_training_curves`: loss and learning rate against the step, from a training log."""

from keras_transformer.figures._matplotlib import new_figure, save_png
from keras_transformer.figures.read_training_log import read_training_log


def plot_training_curves(train_log_csv, path, dpi=100, title=None):
    """Draws the training loss and the learning rate against the step, as a PNG.

    Reads the CSV that `keras_transformer.training.TrainingMonitor` writes
    (`train_log.csv`) with `read_training_log`, so when a resumed run logged
    a step twice the last row wins. Two panels share the step axis: the mean
    training loss of each logged interval (label-smoothed, as `fit` reports
    it) and the learning rate of the last update (paper 5.3). Steps are
    optimizer updates.

    Args:
        train_log_csv: str or path-like, the `train_log.csv` file.
        path: str or path-like, the PNG to write (atomically; parent folders
            are created).
        dpi: int. Resolution of the PNG (the figure is 8 x 3.2 inches).
        title: str or None. A title above both panels.

    Returns:
        A dict of the plotted 1-D numpy arrays: `"step"`, `"loss"` and
        `"learning_rate"` (one entry per logged step, sorted by step).

    Raises:
        ImportError: matplotlib is missing (install the `plots` extra).
        FileNotFoundError, ValueError: the log is missing or malformed.

    Example:

    >>> curves = plot_training_curves("runs/base/train_log.csv", "figures/training_curves.png")
    >>> curves["step"][-1]
    100000
    """
    log = read_training_log(train_log_csv)
    curves = {name: log[name] for name in ("step", "loss", "learning_rate")}
    figure = new_figure(figsize=(8, 3.2), layout="constrained")
    loss_axes, rate_axes = figure.subplots(1, 2, sharex=True)
    # Markers show where the points are when there are few (and draw a lone one).
    marker = "o" if len(curves["step"]) <= 60 else None
    style = {"linewidth": 1.5, "marker": marker, "markersize": 3}
    loss_axes.plot(curves["step"], curves["loss"], color="tab:blue", **style)
    loss_axes.set_title("Training loss")
    loss_axes.set_ylabel("loss (label-smoothed cross-entropy)")
    rate_axes.plot(curves["step"], curves["learning_rate"], color="tab:orange", **style)
    rate_axes.set_title("Learning rate")
    rate_axes.set_ylabel("learning rate")
    rate_axes.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    for axes in (loss_axes, rate_axes):
        axes.set_xlabel("step")
        axes.grid(True, alpha=0.3)
    if title:
        figure.suptitle(title)
    save_png(figure, path, dpi)
    return curves
