"""Figures people look for, written as PNGs: training curves, the schedule, attention.

Needs matplotlib (the `plots` extra: `pip install 'keras-transformer-mt[plots]'`); it
is imported only when a figure is drawn, on the non-interactive Agg canvas.
`python -m keras_transformer.figures --run-dir RUN` (or `keras-transformer plot`)
draws them all for a recipe's run directory.
"""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "plot_attention": "plot_attention",
        "plot_learning_rate_schedule": "plot_learning_rate_schedule",
        "plot_training_curves": "plot_training_curves",
        "read_training_log": "read_training_log",
    },
)
