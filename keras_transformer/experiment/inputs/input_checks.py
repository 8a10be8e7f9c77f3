"""A training run's checks that need no backend, run before TensorFlow, JAX or torch loads.

`keras-transformer train` calls `check_before_training` right after parsing its
flags: a missing split file, a missing or damaged `--init-from` file, a bad
`--vocabulary` file, a distribution the backend lacks, an output directory
another run holds or a resume on changed settings or data end the command in
well under a second, with one line. `run_experiment` runs the same checks again
(a caller may skip the command line), then those that need the backend.

Plain Python only (os, json, zipfile, hashlib; h5py and sentencepiece, which
load no backend): nothing here may import keras, tensorflow, jax or torch.
"""

import os

from keras_transformer.compat import configured_backend
from keras_transformer.experiment.inputs.extra_pairs import (
    check_extra_files,
    check_init_from_tag,
    check_vocabulary_tag,
    training_files,
)
from keras_transformer.experiment.inputs.init_from import (
    check_vocabulary_file,
    run_model_config,
    run_source_eos,
)
from keras_transformer.experiment.inputs.output_dir_lock import check_output_dir_free
from keras_transformer.experiment.inputs.run_config_file import (
    check_resumed_settings,
    run_settings,
)
from keras_transformer.experiment.inputs.run_outputs import check_inputs_not_overwritten
from keras_transformer.experiment.inputs.split_files import SplitFiles, check_files, split_paths
from keras_transformer.utils.run_directory import RunDirectory

# The environment variable for the number of JAX processes (`keras.distribution.initialize`).
PROCESSES_VARIABLE = "KERAS_DISTRIBUTION_NUM_PROCESSES"
# The backend each distribution runs on: `keras.distribution` is JAX's only, and
# `tf.distribute` TensorFlow's.
NEEDED_BACKEND = {"data_parallel": "jax", "mirrored": "tensorflow", "multi_worker": "tensorflow"}
# What a backend offers instead. Keras 3 has no multi-device `fit` on torch (its `fit` does
# not run under torch's DistributedDataParallel), so torch trains on one device.
ALTERNATIVES = {
    "tensorflow": "'mirrored' or 'multi_worker'",
    "jax": "'data_parallel'",
    "torch": "'none' (Keras trains on one device on torch)",
}
# Distributions whose every process writes in --output-dir itself (no member subfolder), so
# its lock and config.json can be checked before the distribution is set up.
TOP_LEVEL_WRITERS = ("none", "mirrored")


def jax_processes_requested():
    """`KERAS_DISTRIBUTION_NUM_PROCESSES` as an int (1 when unset); ValueError if not >= 1."""
    value = os.environ.get(PROCESSES_VARIABLE, "1")
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(
            f"The environment variable {PROCESSES_VARIABLE} must be a positive int (the "
            f"number of JAX processes). Received: {value!r}"
        )
    return count


def check_distribution(distribution, backend):
    """Raises ValueError for a distribution `backend` lacks, or a bad process count.

    Args:
        distribution: str, an `ExperimentConfig.distribution`.
        backend: str, the Keras backend's name.
    """
    if distribution == "none":
        return
    needed = NEEDED_BACKEND[distribution]
    if backend != needed:
        raise ValueError(
            f"distribution={distribution!r} needs KERAS_BACKEND={needed}, not "
            f"{backend}; use {ALTERNATIVES.get(backend, repr('none'))}."
        )
    if distribution == "data_parallel":
        jax_processes_requested()


def check_valid_settings(config):
    """Refuses settings that need the valid split without one.

    Args:
        config: the run's `ExperimentConfig`.

    Returns:
        bool, whether the run reads the valid split.

    Raises:
        ValueError: settings that need a valid split without one, or
            that contradict each other.
    """
    validation, final_model = config.validation, config.checkpoint.final_model
    needs = [
        name
        for name, on in (
            ("select_on_valid=True", validation.select_on_valid),
            ("evaluate_valid=True", validation.evaluate_valid),
            ("final_model='best'", final_model == "best"),
            ("validate=True", validation.validate),
        )
        if on
    ]
    if not needs:
        return False
    if not config.data.valid_split:
        if needs == ["validate=True"]:
            return False  # nothing to validate on, which the user chose
        raise ValueError(f"{needs[0]} needs a valid_split (--valid-split).")
    if final_model == "best" and not validation.validate:
        raise ValueError("final_model='best' needs validate=True (the best checkpoint's source).")
    if (
        validation.select_on_valid
        and validation.select_metric == "bleu"
        and not (validation.validate and validation.valid_max_sentences)
    ):
        raise ValueError(
            "select_metric='bleu' translates the valid sentences of the validation: it needs "
            "validate=True and valid_max_sentences > 0."
        )
    return True


def check_inputs(config):
    """Raises for a missing input file or contradictory settings, before anything is written.

    The `--init-from` file's tokenizer is checked by `run_experiment.check_inputs`
    (deserializing it needs the backend).

    Args:
        config: an `ExperimentConfig`.

    Returns:
        The `SplitFiles` of the data's `data_dir`, or None when the data is
        generated by the run (their files do not exist yet).

    Raises:
        FileNotFoundError: a data folder, a split's file, the --init-from
            model or the --vocabulary file does not exist.
        ValueError: settings that need a valid split without one; an
            --init-from file that holds no translation model (or is damaged);
            a --vocabulary file without the package's special ids; an input
            that the run would write over (inside --output-dir).
    """
    data = config.data
    if data.data_dir is not None and not os.path.isdir(data.data_dir):
        raise FileNotFoundError(f"--data-dir {data.data_dir} is not a directory.")
    if config.model.init_from is not None:
        # A translation model file, undamaged; a LoRA rank its projections allow.
        config.adaptation.check_model(run_model_config(config.model))
        check_init_from_tag(config.extra_data, config.model.init_from)
    if data.vocabulary_file is not None:
        proto = check_vocabulary_file(data.vocabulary_file)
        check_vocabulary_tag(config.extra_data, proto, f"--vocabulary {data.vocabulary_file}")
    check_extra_files(config.extra_data)
    needs_valid = check_valid_settings(config)
    if data.generated:
        _check_generated_splits(data, needs_valid)
        check_inputs_not_overwritten(config, None)
        return None
    splits = SplitFiles.find(data, data.data_dir, valid=needs_valid)
    check_inputs_not_overwritten(config, splits)
    return splits


def _check_generated_splits(data, needs_valid):
    """Raises for a split the generated corpus (no --data-dir) does not have."""
    generated = ("train", "valid", "test")
    for flag, split, needed in (
        ("--train-split", data.train_split, True),
        ("--valid-split", data.valid_split, needs_valid),
        ("--test-split", data.test_split, True),
    ):
        if not needed or split in generated:
            continue
        if os.sep in split or "/" in split:  # a path prefix of the user's files
            check_files(split_paths(data, split, None), flag.removeprefix("--"))
            continue
        raise FileNotFoundError(
            f"{flag} {split}: without --data-dir the run trains on its generated corpus, "
            f"whose splits are {', '.join(generated)} (or give a path prefix of existing "
            "files, or --data-dir)."
        )


def check_output_dir(path):
    """Raises OSError when `path` cannot be the output directory (a file, not writable)."""
    existing = path
    while existing and not os.path.exists(existing):  # the folder it would be created in
        existing = os.path.dirname(existing)
    if not existing:
        return  # relative to the working directory, which the run checks when it writes
    if not os.path.isdir(existing):
        where = "" if existing == path else f": {existing}"
        raise NotADirectoryError(f"--output-dir {path}{where} is a file, not a directory.")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == path else f": {existing}"
        raise PermissionError(f"--output-dir {path}{where} is not writable.")


def check_before_training(config, command_line=None, output_dir=True):
    """Every check of a run that needs no backend; raises the first user error.

    Args:
        config: the run's `ExperimentConfig`.
        command_line: str or None, as `run_experiment` records it.
        output_dir: bool, whether to check `config.output_dir` itself (its
            lock, and its `config.json` against these settings on a resume);
            False where the runs write in subfolders of it (Table 3).

    Returns:
        The `SplitFiles` of `check_inputs`.

    Raises:
        OSError, ValueError: one-line user errors (see `check_inputs`,
            `check_distribution`, `check_resumed_settings`, `OutputDirLock`).
    """
    splits = check_inputs(config)
    check_distribution(config.distribution, configured_backend())
    run = RunDirectory(os.path.abspath(config.output_dir))
    if not output_dir:
        return splits
    check_output_dir(config.output_dir)
    if config.distribution not in TOP_LEVEL_WRITERS:
        return splits  # other processes write in subfolders named once they start
    check_output_dir_free(run)
    if os.path.exists(run.config_path):
        data_files = training_files(config.extra_data, splits.train if splits is not None else None)
        pipeline = config.pipeline_config(add_source_eos=run_source_eos(config.model))
        settings = run_settings(config, pipeline, command_line, data_files)
        check_resumed_settings(settings, run)
    return splits
