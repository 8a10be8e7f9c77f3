"""Append-only CSV logs of a run that stay one row per step across resumes."""

import csv
import os

from keras_transformer.text.text_files import atomic_output


def truncate_log(path, last_step):
    """Drops the rows of `path` whose `step` is beyond `last_step`.

    A run resumed from the checkpoint of step `last_step` trains the later
    steps again; without this, their rows would appear twice. The file is
    rewritten atomically, and only when rows are dropped.

    Args:
        path: str, a CSV file with a `step` column (missing: nothing to do).
        last_step: int, the restored step.

    Returns:
        int, the number of rows dropped.

    Example:

    >>> truncate_log("runs/base/train_log.csv", 1200)
    3
    """
    if not os.path.exists(path):
        return 0
    with open(path, newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        columns = reader.fieldnames
        rows = list(reader)
    if not columns or "step" not in columns:
        raise ValueError(f"{path} has no `step` column; header: {columns}")
    kept = [row for row in rows if int(float(row["step"])) <= last_step]
    if len(kept) < len(rows):
        with atomic_output(path, "w") as file:
            writer = csv.DictWriter(file, fieldnames=columns, lineterminator="\r\n")
            writer.writeheader()
            writer.writerows(kept)
    return len(rows) - len(kept)


def append_log_row(path, columns, row):
    """Appends `row` (a dict over `columns`; None written empty), with a header if new."""
    new = not os.path.exists(path)
    with open(path, "a", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        if new:
            writer.writeheader()
        writer.writerow({name: "" if row[name] is None else row[name] for name in columns})


def last_value(path, column, up_to_step=None):
    """The last row's `column` of the CSV file `path` as a float; None if absent or empty.

    `up_to_step` (an int) reads the last row whose `step` is at most it instead.

    Example:

    >>> last_value("runs/base/train_log.csv", "elapsed_seconds")
    5856.9
    """
    if not os.path.exists(path):
        return None
    with open(path, newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    if up_to_step is not None:
        rows = [row for row in rows if int(float(row["step"])) <= up_to_step]
    if not rows or not rows[-1].get(column):
        return None
    return float(rows[-1][column])
