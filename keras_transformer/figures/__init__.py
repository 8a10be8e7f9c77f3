"""Figures people look for, written as PNGs: training curves, the schedule, attention.

Needs matplotlib (the `plots` extra: `pip install 'keras-transformer[plots]'`); it
is imported only when a figure is drawn, on the non-interactive Agg canvas.
`python -m keras_transformer.figures --run-dir RUN` (or `keras-transformer plot`)
draws them all for a recipe's run directory.
"""

from keras_transformer.figures.plot_attention import plot_attention
from keras_transformer.figures.plot_learning_rate_schedule import plot_learning_rate_schedule
from keras_transformer.figures.plot_training_curves import plot_training_curves
from keras_transformer.figures.read_training_log import read_training_log

__all__ = [
    "plot_attention",
    "plot_learning_rate_schedule",
    "plot_training_curves",
    "read_training_log",
]
