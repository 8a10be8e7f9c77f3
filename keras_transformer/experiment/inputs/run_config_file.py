"""`config.json`: a run's settings, written when it starts and checked when it resumes."""

import fnmatch
import hashlib
import importlib.metadata
import json
import os
import platform

from keras_transformer import __version__
from keras_transformer.checkpoints.checkpoint_files import checkpoint_step
from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.experiment.inputs.init_from import (
    init_settings,
    run_model_config,
    vocabulary_file_size,
)
from keras_transformer.experiment.settings.experiment_config import flat_settings
from keras_transformer.text.text_files import atomic_output
from keras_transformer.utils.json_file import read_json_object
from keras_transformer.utils.run_directory import CHECKPOINT_PATTERN, RunDirectory
from keras_transformer.utils.run_directory import CONFIG_FILE as RUN_CONFIG_FILE  # noqa: F401

FORMAT_VERSION = 1
# Fields of ExperimentConfig and its configs a resumed run may change: none of them shapes
# the trained state (schedule, data order, model), only when training stops, what is saved
# and logged, how it decodes, and what is done with the model afterwards. The resume check
# compares fields by name, in `config.json` files written flat (earlier versions) or nested
# by config (`ExperimentConfig.to_dict`). Two exceptions change the schedule from the
# resumed step on: the learning-rate scale and warmup may change to recover from a
# divergence (docs/training.md); `config.json` records each change (`setting_changes`).
# Every other field must keep its first value;
# the model is compared as the resolved TransformerConfig and the preset's training values
# as resolved (so a `preset` + `model_overrides` that give the same run are the same).
MAY_CHANGE_ON_RESUME = (
    "output_dir",
    "valid_split",
    "test_split",
    "train_steps",
    "learning_rate_scale",
    "warmup_steps",
    "checkpoint_every_minutes",
    "checkpoint_every_steps",
    "average_last",
    "keep_checkpoints",
    *DecodingConfig.fields_with("may_change_on_resume"),
    "metrics",
    "evaluate_valid",
    "select_on_valid",
    "select_metric",
    "validate",
    "validate_every_steps",
    "valid_max_sentences",
    "valid_search",
    "best_metric",
    "patience",
    "final_model",
    "export",
    "distribution",
    "log_every_steps",
    "divergence_check",
    "divergence_steps",
    "verbose",
    "model_overrides",
    "preset",
)
_PACKAGES = ("keras", "tensorflow", "jax", "torch")


def library_versions():
    """`{package: version}` of Python and the installed packages a run depends on."""
    # This package's own version by its import name: PyPI's "keras-transformer" is another
    # project, and the distribution's name may differ in an older editable install.
    versions = {"python": platform.python_version(), "keras_transformer": __version__}
    for package in _PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def _resolved_training(config):
    """The preset's training values the run uses where `config` leaves them None."""
    return {"label_smoothing": config.label_smoothing()}


def data_fingerprint(paths):
    """`{file name: {"bytes": size, "sha256": digest}}` of a run's training files.

    Recorded in `config.json`: the data position a checkpoint holds counts
    batches of these files, so a resume on edited files would continue in
    other sentences. Hashing reads each file once (about 1 s per GB).

    Args:
        paths: the training files' paths: the training split's `(source,
            target)`, then the extra pair's (`--extra-source/--extra-target`).

    Returns:
        dict, keyed by file name, or by path where two files share a name.
    """
    names = [os.path.basename(path) for path in paths]
    return {
        name if names.count(name) == 1 else path: _file_fingerprint(path)
        for name, path in zip(names, paths, strict=True)
    }


# `{(path, size, mtime_ns): fingerprint}`: the command checks a resume before the backend
# loads and `run_experiment` again, and a file is read once for both.
_FINGERPRINTS = {}


def _file_fingerprint(path):
    """`{"bytes": size, "sha256": digest}` of one file, hashed once per size and time."""
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if key not in _FINGERPRINTS:
        digest = hashlib.sha256()
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
        _FINGERPRINTS[key] = {"bytes": stat.st_size, "sha256": digest.hexdigest()}
    return dict(_FINGERPRINTS[key])


def run_settings(config, pipeline, command_line=None, data_files=None):
    """The content of `config.json` for `config` (an ExperimentConfig).

    Args:
        config: the run's `ExperimentConfig`.
        pipeline: the `PipelineConfig` of its training batches.
        command_line: str or None, the command that started it.
        data_files: the training split's paths to fingerprint
            (`data_fingerprint`), or None (generated or TFDS data).

    Returns:
        dict with `experiment` (`ExperimentConfig.to_dict()`: its own fields,
        and each config's fields under the config's name), `model` (the
        resolved TransformerConfig: the preset with the overrides applied,
        which `keras-transformer average/export --config` read), `pipeline`,
        `training` (the label smoothing used), `versions` and `command_lines`
        (this one last); with `init_from`, `model` is the model file's and
        `init_from` holds the file's path and SHA-256.
    """
    return json.loads(
        json.dumps(
            {
                "format": FORMAT_VERSION,
                "experiment": config.to_dict(),
                "model": _model_config(config).to_dict(),
                "training": _resolved_training(config),
                "pipeline": pipeline.to_dict(),
                "versions": library_versions(),
                "command_lines": [command_line] if command_line else [],
                **({"data": data_fingerprint(data_files)} if data_files else {}),
                **(
                    {"init_from": init_settings(config.model.init_from)}
                    if config.model.init_from
                    else {}
                ),
            }
        )
    )


def _model_config(config):
    """The TransformerConfig the run trains: the preset's (for the `--vocabulary` file's
    size), or its `init_from` file's."""
    if config.model.init_from is not None:
        return run_model_config(config.model)
    if config.data.vocabulary_file is not None:
        return config.model_config(vocabulary_file_size(config.data.vocabulary_file))
    return config.model_config()


def read_run_config(path):
    """The dict of a `config.json`; ValueError/OSError name the file."""
    return read_json_object(path)


def _differences(recorded, settings):
    """`{name: (recorded, asked)}` of the settings a resume must keep."""
    changed = {}
    old = flat_settings(recorded.get("experiment", {}))
    new = flat_settings(settings["experiment"])
    for name in sorted(set(old) & set(new) - set(MAY_CHANGE_ON_RESUME)):
        before, after = old[name], new[name]
        if name in ("data_dir", "init_from", "vocabulary_file") and before and after:
            before, after = os.path.abspath(before), os.path.abspath(after)
        if before != after:
            changed[name] = (old[name], new[name])
    for section in ("model", "training"):
        old, new = recorded.get(section, {}), settings[section]
        for name in sorted(set(old) & set(new)):
            if old[name] != new[name] and name not in changed:
                changed[name] = (old[name], new[name])
    # The --init-from file's bytes (its path is `init_from`, compared above).
    before = recorded.get("init_from", {}).get("sha256")
    after = settings.get("init_from", {}).get("sha256")
    if before and after and before != after:
        changed["init_from file's sha256"] = (before, after)
    return changed


def _check_same_data(recorded, current, run):
    """Raises ValueError when the training files differ from the fingerprint of the run."""
    if not recorded or not current or recorded == current:
        return
    changes = []
    for name in sorted(set(recorded) | set(current)):
        before, after = recorded.get(name), current.get(name)
        if before != after:

            def shown(entry):
                if entry is None:
                    return "absent"
                return f"{entry['bytes']} bytes, sha256 {entry['sha256'][:12]}"

            changes.append(f"{name} was {shown(before)}, is now {shown(after)}")
    raise ValueError(
        f"{run.path}: the training data changed since the run started ({'; '.join(changes)}): "
        "its checkpoints' data position would point into other sentences; restore the files "
        "or use a new --output-dir"
    )


def check_resumed_settings(settings, run):
    """The recorded `config.json` of `run`, after checking `settings` may resume it.

    Args:
        settings: `run_settings(...)` of the new command.
        run: the `RunDirectory` (or its path).

    Returns:
        The recorded dict, or None for a new run (no `config.json` yet).

    Raises:
        ValueError: a setting that shapes the trained state differs, one line
            naming each such setting's recorded and asked values; or the
            training files changed (their sizes and SHA-256, `data_fingerprint`).
    """
    run = RunDirectory(run)
    path = run.config_path
    if not os.path.exists(path):
        return None
    recorded = read_run_config(path)
    _check_same_data(recorded.get("data"), settings.get("data"), run)
    changed = _differences(recorded, settings)
    if changed:

        def listed(index):
            return ", ".join(f"{name}={pair[index]!r}" for name, pair in changed.items())

        raise ValueError(
            f"{run.path}: the run was started with {listed(0)}; this command asks for "
            f"{listed(1)} (resuming must keep the model and data settings; use a new "
            "--output-dir)"
        )
    return recorded


def _setting_changes(recorded, settings, run):
    """`recorded`'s `setting_changes`, and this command's entry when it changes settings.

    An entry: `{"command_line": index in command_lines, "from_step": the newest
    checkpoint's step when it started (0: none), "changed": {field: [before, after]}}`.
    """
    history = list(recorded.get("setting_changes", []))
    old = flat_settings(recorded.get("experiment", {}))
    new = flat_settings(settings["experiment"])
    changed = {
        name: [old[name], new[name]]
        for name in sorted(set(old) & set(new))
        if old[name] != new[name] and name not in ("output_dir", "verbose")
    }
    if changed:
        folder = run.checkpoints_path  # PeriodicCheckpoint's files
        steps = [
            checkpoint_step(name)
            for name in (os.listdir(folder) if os.path.isdir(folder) else [])
            if fnmatch.fnmatchcase(name, CHECKPOINT_PATTERN)
        ]
        history.append(
            {
                "command_line": len(recorded.get("command_lines", [])),
                "from_step": max([step for step in steps if step is not None], default=0),
                "changed": changed,
            }
        )
    return history


def write_run_config(settings, run, recorded=None):
    """Writes `settings` to `config.json` of `run` (a `RunDirectory` or path); returns the path.

    A resumed run's file keeps the earlier command lines before this one, and
    lists the settings each resume changed, with the step it resumed from, under
    `setting_changes` (the settings above are the last command's).
    """
    run = RunDirectory(run)
    if recorded is not None:
        earlier = recorded.get("command_lines", [])
        settings = {**settings, "command_lines": [*earlier, *settings["command_lines"]]}
        history = _setting_changes(recorded, settings, run)
        if history:
            settings["setting_changes"] = history
    path = run.config_path
    with atomic_output(path, "w") as file:
        file.write(json.dumps(settings, indent=2) + "\n")
    return path
