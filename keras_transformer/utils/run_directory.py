"""The files of a run directory (a recipe's `--output-dir`), for the commands' `--run-dir`."""

import glob
import json
import os
import zipfile

from keras_transformer.utils.json_file import read_json_object

MODEL_FILE = "model.keras"
VOCABULARY_FILE = "vocabulary.model"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_PATTERN = "ckpt-*.weights.h5"
BEST_CHECKPOINT_FILE = "best.weights.h5"
TRAIN_LOG_FILE = "train_log.csv"
SAVED_MODEL_DIR = "saved_model"
SCORES_FILE = "scores.json"
DATA_ORDER_FILE = "data_order.json"
CONFIG_FILE = "config.json"
DATA_DIR = "data"
HYPOTHESES_SUFFIX = ".hyp"
# A SavedModel directory holds this file; a run directory holds one in SAVED_MODEL_DIR.
SAVED_MODEL_PROTO = "saved_model.pb"
# The member of a `.keras` file that holds the model's serialized config.
KERAS_CONFIG_MEMBER = "config.json"


class RunDirectory:
    """A training run's directory, as `run_experiment` writes it, and its files.

    A run directory holds `model.keras` (the final model with its tokenizer),
    `vocabulary.model`, `checkpoints/ckpt-*.weights.h5` (and
    `checkpoints/best.weights.h5`), `train_log.csv`, `saved_model/`,
    `scores.json`, `data_order.json`, `config.json` (the run's settings) and
    the test translations `*.hyp`. Each accessor returns a path or raises
    `ValueError` with one line naming the directory and the missing file.

    Args:
        path: str or path-like, the directory.

    Raises:
        ValueError: `path` is not a directory.

    Example:

    >>> run = RunDirectory("runs/base")
    >>> run.model_file()
    'runs/base/model.keras'
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise ValueError(f"{self.path}: no such run directory")
        if not os.path.isdir(self.path):
            raise ValueError(f"{self.path}: not a run directory (a file, not a directory)")

    def join(self, *names):
        return os.path.join(self.path, *names)

    def _require(self, name, why):
        path = self.join(name)
        if not os.path.exists(path):
            raise ValueError(f"{self.path}: not a run directory (no {name}; {why})")
        return path

    def model_file(self):
        """The final model, bundled with its tokenizer (`save_translation_model`)."""
        return self._require(MODEL_FILE, "is the run finished?")

    def vocabulary_file(self):
        return self._require(VOCABULARY_FILE, "was it written by a recipe?")

    def train_log(self):
        return self._require(TRAIN_LOG_FILE, "has the run started training?")

    def config_file(self):
        """The run's settings (`config.json`), as `run_experiment` recorded them."""
        return self._require(CONFIG_FILE, "was it written by a recipe?")

    def checkpoints_dir(self):
        return self._require(CHECKPOINTS_DIR, "has the run written a checkpoint?")

    def hypotheses_file(self):
        """The run's one test-set translation file (`NAME.hyp`, NAME its reference's name)."""
        found = sorted(glob.glob(self.join(f"*{HYPOTHESES_SUFFIX}")))
        if not found:
            raise ValueError(
                f"{self.path}: no *{HYPOTHESES_SUFFIX} translations (is the run finished?)"
            )
        if len(found) > 1:
            names = ", ".join(os.path.basename(path) for path in found)
            raise ValueError(f"{self.path}: several translation files ({names}); pick one")
        return found[0]

    def reference_file(self, hypotheses):
        """The reference of `NAME.hyp`: NAME in the run's data folder.

        The data folder is `config.json`'s `data_dir` (top level, or in the
        run's data settings) if the run has one, else `RUN/data`.
        """
        name = os.path.basename(hypotheses).removesuffix(HYPOTHESES_SUFFIX)
        settings = self.settings() or {}
        folders = [
            section.get("data_dir")
            for section in (settings, self.data_settings())
            if isinstance(section, dict)
        ]
        folders = [folder for folder in folders if isinstance(folder, str)] + [self.join(DATA_DIR)]
        for folder in folders:
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                return path
        raise ValueError(
            f"{self.path}: the reference {name} is not in {' or '.join(folders)}; pass --references"
        )

    def data_settings(self):
        """The run's data settings (`DataConfig` fields: languages, splits, vocabulary) as a dict.

        `config.json`'s `experiment.data`, or its flat `experiment` as earlier
        versions wrote it; {} when the run has no `config.json`.
        """
        experiment = (self.settings() or {}).get("experiment")
        if not isinstance(experiment, dict):
            return {}
        data = experiment.get("data")
        return {**experiment, **data} if isinstance(data, dict) else experiment

    def settings(self):
        """The run's `config.json` as a dict, or `None` if the run has none."""
        path = self.join(CONFIG_FILE)
        if not os.path.isfile(path):
            return None
        settings = read_json_object(path)
        return settings

    def model_settings(self):
        """The model's settings, as the commands' `--config` JSON takes them.

        Read from `config.json`'s `"model"` object if the run has one, else
        from the config stored in `model.keras`.

        Returns:
            A dict: `TransformerConfig` fields, or a `Seq2SeqTransformer.get_config()`
            (which has a `"config"` key).
        """
        settings = self.settings() or {}
        model = settings.get("model")
        if isinstance(model, dict) and model:
            return model
        path = self.model_file()
        try:
            with zipfile.ZipFile(path) as archive:
                stored = json.loads(archive.read(KERAS_CONFIG_MEMBER))
        except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: no readable model config ({error})") from None
        return stored["config"]


def _is_saved_model(path):
    return os.path.isfile(os.path.join(path, SAVED_MODEL_PROTO))


# The member `save_translation_model` adds to a `.keras` file (its TOKENIZER_MEMBER; not
# imported: that module loads Keras).
TOKENIZER_MEMBER = "keras_transformer_tokenizer.json"


def resolve_model_file(path, command, needs_tokenizer=True):
    """The `.keras` file a `--model PATH` means: the file itself, or a run directory's model.

    Args:
        path: str or path-like, what the user passed.
        command: str, the command's name, for the messages ("translate").
        needs_tokenizer: bool, whether the file must hold its tokenizer (False
            where the command is given a tokenizer file of its own).

    Returns:
        str, the path of a zip archive (a `.keras` file).

    Raises:
        ValueError: one line saying what `path` is instead: missing, a
            SavedModel directory, a directory without `model.keras`, a file
            that is not a zip archive, or one without a tokenizer.

    Example:

    >>> resolve_model_file("runs/base", "translate")
    'runs/base/model.keras'
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        if _is_saved_model(path):
            raise ValueError(
                f"{path} is a SavedModel directory; {command} takes a .keras model file or a "
                "run directory (serve a SavedModel with TensorFlow Serving)"
            )
        path = RunDirectory(path).model_file()
    if not zipfile.is_zipfile(path):
        raise ValueError(
            f"{path} is not a .keras model file (not a zip archive: truncated or corrupt, "
            "or another kind of file)"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path} cannot be read as a zip archive: {error}") from None
    if needs_tokenizer and TOKENIZER_MEMBER not in names:
        raise ValueError(
            f"{path} holds no tokenizer ({TOKENIZER_MEMBER}): it was not written by "
            f"save_translation_model; {command} takes a run's model.keras or "
            "keras-transformer import's output"
        )
    return path
