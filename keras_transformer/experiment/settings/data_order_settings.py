"""The settings that fix a run's sequence of batches, recorded so a resume can check them."""

import json
import os

from keras_transformer.text.text_files import atomic_output

# The run folder's file holding the settings of the run's first start.
from keras_transformer.utils.run_directory import DATA_ORDER_FILE as SETTINGS_FILE  # noqa: F401

# DataConfig fields that decide which batches come in which order (with the accumulation
# and the seed); a resume continues "at batch N" of that sequence, so it needs the same values.
DATA_ORDER_FIELDS = (
    "data_dir",
    "tfds_name",
    "source_language",
    "target_language",
    "train_split",
    "synthetic_sizes",
    "vocabulary_size",
    "vocabulary_type",
    "vocabulary_lowercase",
    "token_budget",
    "pipeline_overrides",
)


def _settings(config, num_replicas):
    settings = {name: getattr(config.data, name) for name in DATA_ORDER_FIELDS}
    settings["accumulation_steps"] = config.optimization.accumulation_steps
    settings["seed"] = config.seed
    if settings["data_dir"] is not None:
        settings["data_dir"] = os.path.abspath(settings["data_dir"])
    settings["synthetic_sizes"] = list(settings["synthetic_sizes"])
    settings["num_replicas"] = num_replicas  # batch sizes are multiples of it
    return settings


def check_data_order_settings(config, run, num_replicas, resumed):
    """Records the batch-order settings of a new run, or checks a resumed run's.

    A resumed run continues at the checkpoint's batch of the same sequence of
    batches, which only exists with the same data, vocabulary, token budget,
    bucketing, accumulation, seed and replica count. A run that starts from
    step 0 writes them to `data_order.json` in the run folder; a resumed run with
    other values fails before it trains, naming each changed setting. Anything
    else (steps, checkpoint interval, decoding) may change between starts.

    Args:
        config: the run's `ExperimentConfig`.
        run: the `RunDirectory` this process writes in.
        num_replicas: int, devices sharing every global batch.
        resumed: bool, whether the run restored a checkpoint.

    Raises:
        ValueError: the output directory holds a run started with other settings.
    """
    path = run.data_order_path
    settings = _settings(config, num_replicas)
    if not resumed or not os.path.exists(path):  # a run from before this file: record it
        with atomic_output(path, "w") as file:
            file.write(json.dumps(settings, indent=2, sort_keys=True) + "\n")
        return
    try:
        with open(path, encoding="utf-8") as file:
            recorded = json.load(file)
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} is unreadable ({error}); delete it to record it again.") from None
    changed = [
        f"{name} was {recorded[name]!r}, now {settings[name]!r}"
        for name in sorted(settings)
        if name in recorded and recorded[name] != settings[name]
    ]
    if changed:
        raise ValueError(
            f"{run.path} holds a run started with other data settings ({'; '.join(changed)}; "
            f"recorded in {path}). Resuming would continue at its data position in a different "
            "sequence of batches: pass the same values, or another --output-dir."
        )
