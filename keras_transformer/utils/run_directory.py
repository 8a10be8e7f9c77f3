"""The run folder (a recipe's `--output-dir`, the commands' `--run-dir`): every name in it.

`RunDirectory` is the one owner of the folder's layout: a run writes each of
its files at the path this object gives, and the commands read them back
through it.
"""

import dataclasses
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
VALID_LOG_FILE = "valid_log.csv"
SAVED_MODEL_DIR = "saved_model"
SCORES_FILE = "scores.json"
DATA_ORDER_FILE = "data_order.json"
CONFIG_FILE = "config.json"
ADAPTER_FILE = "adapter.lora"
LOCK_FILE = ".run.lock"
DATA_DIR = "data"
# Where `keras-transformer plot` draws a run's figures unless told another folder.
FIGURES_DIR = "figures"
# TensorBoard's events, in the training monitor's and the validation's log folder.
TRAIN_EVENTS_DIR = "train"
VALID_EVENTS_DIR = "validation"
# JAX's persistent compilation cache of the run's programs.
COMPILATION_CACHE_DIR = "xla_cache"
HYPOTHESES_SUFFIX = ".hyp"
# A SavedModel directory holds this file; a run directory holds one in SAVED_MODEL_DIR.
SAVED_MODEL_PROTO = "saved_model.pb"
# The member of a `.keras` file that holds the model's serialized config.
KERAS_CONFIG_MEMBER = "config.json"
# Files at the top of the run folder that a run writes or replaces (the test translations,
# `{test target file}.hyp`, come on top), and the folders whose files it writes, replaces or
# deletes: checkpoints (pruned), the SavedModel (replaced), TensorBoard's events, the cache.
RUN_FILES = (
    CONFIG_FILE,
    DATA_ORDER_FILE,
    MODEL_FILE,
    TRAIN_LOG_FILE,
    VALID_LOG_FILE,
    SCORES_FILE,
    ADAPTER_FILE,
    LOCK_FILE,
)
RUN_FOLDERS = (
    CHECKPOINTS_DIR,
    SAVED_MODEL_DIR,
    TRAIN_EVENTS_DIR,
    VALID_EVENTS_DIR,
    COMPILATION_CACHE_DIR,
)


@dataclasses.dataclass(frozen=True)
class RunDirectory:
    """A training run's folder, as `run_experiment` writes it: the path of each of its files.

    A run folder holds `model.keras` (the final model with its tokenizer),
    `vocabulary.model`, `checkpoints/ckpt-*.weights.h5` (and
    `checkpoints/best.weights.h5`), `train_log.csv`, `valid_log.csv`,
    `saved_model/`, `scores.json`, `data_order.json`, `config.json` (the
    run's settings), `adapter.lora` (a LoRA run), `data/` (generated data)
    and the test translations `*.hyp`. The `*_path` attributes name where a
    run writes each (whether it exists or not); the `*_file()` readers
    return a path that exists or raise `ValueError` with one line naming the
    folder and the missing file. `RunDirectory.existing(path)` checks that
    the folder is there.

    Args:
        path: str or path-like (another `RunDirectory` too: it is path-like),
            the folder.

    Example:

    >>> run = RunDirectory.existing("runs/base")
    >>> run.model_file()
    'runs/base/model.keras'
    >>> RunDirectory("runs/new").scores_path
    'runs/new/scores.json'
    """

    path: str

    def __post_init__(self):
        object.__setattr__(self, "path", os.fspath(self.path))

    def __fspath__(self):
        return self.path

    @classmethod
    def existing(cls, path):
        """The `RunDirectory` of `path`, a folder that exists.

        Raises:
            ValueError: `path` is missing, or a file.
        """
        run = cls(path)
        if not os.path.exists(run.path):
            raise ValueError(f"{run.path}: no such run directory")
        if not os.path.isdir(run.path):
            raise ValueError(f"{run.path}: not a run directory (a file, not a directory)")
        return run

    def member(self, name):
        """The run folder of one process of a run that shares this folder (`name` "" for self)."""
        return RunDirectory(os.path.join(self.path, name)) if name else self

    @property
    def model_path(self):
        return self.join(MODEL_FILE)

    @property
    def vocabulary_path(self):
        return self.join(VOCABULARY_FILE)

    @property
    def checkpoints_path(self):
        return self.join(CHECKPOINTS_DIR)

    @property
    def train_log_path(self):
        return self.join(TRAIN_LOG_FILE)

    @property
    def valid_log_path(self):
        return self.join(VALID_LOG_FILE)

    @property
    def saved_model_path(self):
        return self.join(SAVED_MODEL_DIR)

    @property
    def scores_path(self):
        return self.join(SCORES_FILE)

    @property
    def data_order_path(self):
        return self.join(DATA_ORDER_FILE)

    @property
    def config_path(self):
        return self.join(CONFIG_FILE)

    @property
    def adapter_path(self):
        return self.join(ADAPTER_FILE)

    @property
    def lock_path(self):
        return self.join(LOCK_FILE)

    @property
    def data_path(self):
        """The folder of the data a run without `--data-dir` generates."""
        return self.join(DATA_DIR)

    @property
    def figures_path(self):
        return self.join(FIGURES_DIR)

    @property
    def compilation_cache_path(self):
        return self.join(COMPILATION_CACHE_DIR)

    def hypotheses_path(self, reference):
        """Where the run writes its translations of the test split whose target is `reference`."""
        return self.join(os.path.basename(reference) + HYPOTHESES_SUFFIX)

    def written_paths(self, test_target=None):
        """The paths a run in this folder writes over: `(files, folders)`, lists of str.

        Args:
            test_target: str or None, the test split's target file (the run
                writes its translations beside it as `hypotheses_path`).
        """
        files = [self.join(name) for name in RUN_FILES]
        if test_target is not None:
            files.append(self.hypotheses_path(test_target))
        return files, [self.join(name) for name in RUN_FOLDERS]

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
        path = RunDirectory.existing(path).model_file()
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
