"""What a training run writes in its output directory, and the check that no input is there.

A run writes, replaces or deletes the files and folders below inside `--output-dir`. A run
given one of them as an input (`train --init-from DIR/model.keras --output-dir DIR`) would
write over the file it started from; `check_inputs_not_overwritten` refuses it before
anything is written.

Plain Python only: `input_checks` runs this before a backend loads.
"""

import os

from keras_transformer.utils.same_file import is_inside, same_file

# Files at the top of the output directory that a run writes or replaces (the test
# translations, `{test target file}.hyp`, are added by `written_paths`). They match
# `RUN_CONFIG_FILE`, data_order_settings' `SETTINGS_FILE`, the saved model's name, the
# `CSV_NAME`s of TrainingMonitor and ValidationCallback, the scores, a LoRA run's adapters and
# `OutputDirLock.NAME`.
RUN_FILES = (
    "config.json",
    "data_order.json",
    "model.keras",
    "train_log.csv",
    "valid_log.csv",
    "scores.json",
    "adapter.lora",
    ".run.lock",
)
# Folders whose files a run writes, replaces or deletes: checkpoints (pruned), the
# SavedModel (replaced), TensorBoard's events, the compilation cache.
RUN_FOLDERS = ("checkpoints", "saved_model", "train", "validation", "xla_cache")


def written_paths(output_dir, test_target=None):
    """The paths a run in `output_dir` writes over: `(files, folders)`.

    Args:
        output_dir: str, the run's `--output-dir`.
        test_target: str or None, the test split's target file (the run
            writes its translations as `{basename}.hyp`).

    Returns:
        A tuple of two lists of str.
    """
    files = [os.path.join(output_dir, name) for name in RUN_FILES]
    if test_target is not None:
        files.append(os.path.join(output_dir, os.path.basename(test_target) + ".hyp"))
    return files, [os.path.join(output_dir, name) for name in RUN_FOLDERS]


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
    files, folders = written_paths(output_dir, splits.test[1] if splits is not None else None)
    for flag, path in run_inputs(config, splits):
        hit = next((file for file in files if same_file(path, file)), None)
        hit = hit or next((folder for folder in folders if is_inside(path, folder)), None)
        if hit is not None:
            raise ValueError(
                f"{flag} {path}: the run would write over this file (it writes "
                f"{os.path.relpath(hit, output_dir)} in --output-dir {output_dir}); move "
                "the file out of that folder, or use another --output-dir"
            )
