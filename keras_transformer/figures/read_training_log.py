"""`read_training_log`: the curves of a `TrainingMonitor` CSV, one row per step."""

import csv
import math
import os

import numpy as np

COLUMNS = ("step", "loss", "learning_rate", "tokens_per_second", "elapsed_seconds")
REQUIRED_COLUMNS = ("step", "loss", "learning_rate")


def _number(text, column, path, line):
    if text is None or text.strip() == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise ValueError(
            f"{path}, line {line}: column {column!r} holds {text!r}, not a number."
        ) from None


def read_training_log(train_log_csv):
    """Reads the `train_log.csv` of `keras_transformer.training.TrainingMonitor`.

    The file has the columns `step,loss,learning_rate,tokens_per_second,
    elapsed_seconds`. A resumed run appends rows again from its restored
    step on, so a step can appear more than once: the last row of a step
    wins (it belongs to the run that went on). A row whose step is not after
    the previous row's marks such a restart, so it also drops the earlier
    rows of later steps (written by the abandoned run before it stopped).
    Empty cells (no tokens/s) read as NaN.

    Args:
        train_log_csv: str or path-like, the CSV file.

    Returns:
        A dict of 1-D numpy arrays of the same length, one entry per step:
        `"step"` (int64), and float64 `"loss"`, `"learning_rate"`,
        `"tokens_per_second"` and `"elapsed_seconds"` (NaN where the file has
        no such column or value).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a required column (`step`, `loss`, `learning_rate`) is
            missing, a value is not a number, or the file has no rows.

    Example:

    >>> log = read_training_log("runs/base/train_log.csv")
    >>> log["step"][-1], log["loss"][-1]
    (100000, 1.73...)
    """
    path = os.fspath(train_log_csv)
    with open(path, newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        missing = [name for name in REQUIRED_COLUMNS if name not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(
                f"{path} is not a TrainingMonitor log: it lacks the column(s) "
                f"{', '.join(missing)} (expected {','.join(COLUMNS)})."
            )
        rows = {}
        for row in reader:
            line = reader.line_num
            step = _number(row["step"], "step", path, line)
            if not math.isfinite(step) or step != int(step):
                raise ValueError(f"{path}, line {line}: step {row['step']!r} is not an integer.")
            step = int(step)
            if rows and step <= next(reversed(rows)):  # keys stay increasing
                rows = {kept: values for kept, values in rows.items() if kept < step}
            rows[step] = [_number(row.get(name), name, path, line) for name in COLUMNS[1:]]
    if not rows:
        raise ValueError(f"{path} holds no training steps yet.")
    steps = list(rows)
    values = np.array([rows[step] for step in steps], dtype="float64")
    log = {"step": np.array(steps, dtype="int64")}
    log.update({name: values[:, i] for i, name in enumerate(COLUMNS[1:])})
    return log
