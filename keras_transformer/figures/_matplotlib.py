"""Lazy matplotlib access for the figures: the Agg canvas and atomic PNG writes."""

import os

from keras_transformer.text.text_files import atomic_output

INSTALL_HINT = (
    "keras_transformer.figures needs matplotlib: install the `plots` extra "
    "(pip install 'keras-transformer-mt[plots]') or `pip install matplotlib`."
)


def new_figure(**kwargs):
    """A matplotlib `Figure` drawn by the non-interactive Agg canvas.

    The figure is built with the object-oriented API rather than `pyplot`,
    so no global backend is switched and no figure is kept alive in
    pyplot's registry.

    Args:
        **kwargs: `matplotlib.figure.Figure` arguments (`figsize`, ...).

    Returns:
        A `matplotlib.figure.Figure` with an Agg canvas attached.

    Raises:
        ImportError: matplotlib is not installed; the message names the
            `plots` extra.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error
    figure = Figure(**kwargs)
    FigureCanvasAgg(figure)
    return figure


def check_matplotlib():
    """Raises the `plots` extra's ImportError now if matplotlib is missing."""
    new_figure()


def save_png(figure, path, dpi):
    """Writes `figure` to `path` as a PNG atomically (temp file + `os.replace`).

    An error leaves an existing `path` as it was (`text.text_files.atomic_output`).

    Args:
        figure: a figure from `new_figure`.
        path: str or path-like; parent folders are created.
        dpi: int, dots per inch.

    Returns:
        str, the path written.
    """
    path = os.fspath(path)
    with atomic_output(path, "wb") as file:
        figure.savefig(file, format="png", dpi=dpi)
    return path
