"""What a training run writes in its output directory, and the check that no input is there.

A run writes, replaces or deletes the files and folders below inside `--output-dir`. A run
given one of them as an input (`train --init-from DIR/model.keras --output-dir DIR`) would
write over the file it started from; `check_inputs_not_overwritten` refuses it before
anything is written.

Plain Python only: `input_checks` runs this before a backend loads.
"""

import os

from keras_transformer.utils.run_directory import RUN_FILES, RUN_FOLDERS, RunDirectory  # noqa: F401
from keras_transformer.utils.same_file import is_inside, same_file


def run_inputs(config, splits):
    """`(flag, path)` of every file the run reads: the model, the vocabulary, the splits."""
    inputs = [
        ("--init-from", config.model.init_from),
        ("--vocabulary", config.data.vocabulary_file),
        ("--extra-source", config.extra_data.extra_source),
        ("--extra-target", config.extra_data.extra_target),
    ]
    if splits is not None:
        for flag, pair in (
            ("--train-split", splits.train),
            ("--valid-split", splits.valid),
            ("--test-split", splits.test),
        ):
            inputs += [(flag, path) for path in pair or ()]
    return [(flag, path) for flag, path in inputs if path is not None]


def check_inputs_not_overwritten(config, splits):
    """Raises `ValueError` for an input of the run that the run would write over.

    Args:
        config: the run's `ExperimentConfig`.
        splits: its `SplitFiles`, or None (generated data).

    Raises:
        ValueError: one line naming the flag, the file and the `--output-dir`.
    """
    output_dir = config.output_dir
    run = RunDirectory(output_dir)
    files, folders = run.written_paths(splits.test[1] if splits is not None else None)
    for flag, path in run_inputs(config, splits):
        hit = next((file for file in files if same_file(path, file)), None)
        hit = hit or next((folder for folder in folders if is_inside(path, folder)), None)
        if hit is not None:
            raise ValueError(
                f"{flag} {path}: the run would write over this file (it writes "
                f"{os.path.relpath(hit, output_dir)} in --output-dir {output_dir}); move "
                "the file out of that folder, or use another --output-dir"
            )
