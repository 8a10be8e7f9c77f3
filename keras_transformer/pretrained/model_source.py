"""`ModelSource`: which translation model a name means, found before any backend loads.

A name is a `.keras` translation model file, a run directory (its `model.keras`), a Marian /
OPUS-MT `save_pretrained` folder, a fairseq checkpoint (a `.pt` file, or a folder holding one
with its dictionaries), or a Hugging Face id such as `Helsinki-NLP/opus-mt-en-de`, which
`hub_snapshot` downloads into (or finds in) huggingface_hub's cache.
"""

import dataclasses
import glob
import os
import re

from keras_transformer.utils.run_directory import MODEL_FILE, SAVED_MODEL_PROTO, resolve_model_file

KINDS = ("keras", "marian", "fairseq")
# What a Marian `save_pretrained` folder holds besides its weights (one of MARIAN_WEIGHTS).
MARIAN_FILES = ("config.json", "source.spm", "target.spm", "vocab.json")
MARIAN_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
# A Hugging Face model id: ORG/NAME (letters, digits, '.', '_', '-').
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
FOLDER_KINDS = (
    f"{MODEL_FILE} (a run directory), a Marian folder ({', '.join(MARIAN_FILES)}, "
    f"{MARIAN_WEIGHTS[0]}) or a fairseq checkpoint folder (model.pt, dict.SRC.txt, dict.TGT.txt)"
)


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A translation model found on disk: what to load and how.

    Args:
        name: str, the name as given (a path or a Hugging Face id).
        kind: str, one of `KINDS`: "keras" (a `save_translation_model`
            file), "marian" (a `save_pretrained` folder) or "fairseq" (a
            checkpoint file whose folder holds the dictionaries).
        path: str, the `.keras` file, the Marian folder or the checkpoint.

    Example:

    >>> find_model_source("runs/base")
    ModelSource(name='runs/base', kind='keras', path='runs/base/model.keras')
    """

    name: str
    kind: str
    path: str

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}. Received: kind={self.kind!r}")


def is_hub_id(name):
    """Whether `name`, which is not a path on disk, reads as a Hugging Face id (ORG/NAME).

    A name whose first part is a local folder (`runs/bse` beside `runs/`), or that
    ends as a model file does (`.keras`, `.pt`), is a mistyped path, not an id.
    """
    name = os.fspath(name)
    if not isinstance(name, str) or not HUB_ID.fullmatch(name) or ".." in name:
        return False
    if name.endswith((".keras", ".pt")):  # a model file's name: a path that is missing
        return False
    return not os.path.exists(name) and not os.path.isdir(name.split("/")[0])


def find_model_source(name, command="load_translator"):
    """The `ModelSource` that `name` means (a Hugging Face id is downloaded or found cached).

    Args:
        name: str or path-like: a `.keras` file, a run directory, a Marian
            folder, a fairseq checkpoint (`.pt`) or folder, or a Hugging Face
            id (`ORG/NAME`, needs huggingface_hub).
        command: str, the command's name for the messages.

    Returns:
        A `ModelSource`.

    Raises:
        ValueError: one line saying what `name` is instead (missing, a
            SavedModel, a folder of none of these kinds, an id not found).
        ImportError: a Hugging Face id without huggingface_hub installed.

    Example:

    >>> find_model_source("Helsinki-NLP/opus-mt-en-de").kind
    'marian'
    """
    name = os.fspath(name)
    if os.path.isdir(name):
        return _folder_source(name, name, command)
    if os.path.isfile(name):
        if name.endswith(".pt"):
            return ModelSource(name, "fairseq", name)
        return ModelSource(name, "keras", resolve_model_file(name, command))
    if is_hub_id(name):
        from keras_transformer.pretrained.hub import hub_snapshot

        return _folder_source(name, hub_snapshot(name), command)
    raise ValueError(f"{name}: no such file or directory (nor a Hugging Face id, ORG/NAME)")


def _folder_source(name, folder, command):
    """The source of a folder: a run directory, a Marian folder or a fairseq one."""
    if os.path.isfile(os.path.join(folder, SAVED_MODEL_PROTO)) or os.path.isfile(
        os.path.join(folder, MODEL_FILE)
    ):
        return ModelSource(name, "keras", resolve_model_file(folder, command))
    present = [file for file in MARIAN_FILES if os.path.isfile(os.path.join(folder, file))]
    if set(present) - {"config.json"}:  # a run directory has a config.json too
        missing = [file for file in MARIAN_FILES if file not in present]
        if not any(os.path.isfile(os.path.join(folder, file)) for file in MARIAN_WEIGHTS):
            missing.append(" or ".join(MARIAN_WEIGHTS))
        if missing:
            raise ValueError(
                f"{name}: missing {', '.join(missing)}; expected a Marian folder as "
                "save_pretrained writes it"
            )
        return ModelSource(name, "marian", folder)
    checkpoints = sorted(glob.glob(os.path.join(glob.escape(folder), "*.pt")))
    if checkpoints and glob.glob(os.path.join(glob.escape(folder), "dict.*.txt")):
        if len(checkpoints) > 1:
            names = ", ".join(os.path.basename(path) for path in checkpoints)
            raise ValueError(f"{name}: several fairseq checkpoints ({names}); name one")
        return ModelSource(name, "fairseq", checkpoints[0])
    if folder != name:
        raise ValueError(
            f"{name}: this Hugging Face model is no Marian / OPUS-MT model and holds no "
            f"{MODEL_FILE}; those are the ones that load"
        )
    try:
        resolve_model_file(folder, command)  # a run directory's own error
    except ValueError as error:
        raise ValueError(
            f"{str(error).rstrip('.')}; nor a Marian folder (no source.spm) or a fairseq "
            "checkpoint folder (no *.pt)"
        ) from None
    raise ValueError(f"{name}: not a model folder; expected {FOLDER_KINDS}")


def load_model_source(source):
    """The model and tokenizer of a `ModelSource` (or of a name `find_model_source` takes).

    A Marian folder or a fairseq checkpoint is converted in memory, as
    `keras-transformer import` converts it, without writing a file.

    Args:
        source: a `ModelSource`, or a str or path-like name.

    Returns:
        `(model, tokenizer)`: a `Seq2SeqTransformer` (not compiled) and its
        tokenizer.

    Raises:
        ValueError, OSError, ImportError: one line naming the file.

    Example:

    >>> model, tokenizer = load_model_source("runs/base")
    """
    if not isinstance(source, ModelSource):
        source = find_model_source(source)
    if source.kind == "marian":
        from keras_transformer.pretrained.marian import marian_translation_model

        return marian_translation_model(source.path)
    if source.kind == "fairseq":
        from keras_transformer.pretrained.fairseq import fairseq_translation_model

        return fairseq_translation_model(source.path, os.path.dirname(source.path) or ".")
    from keras_transformer.export.load_translation_model import load_translation_model

    return load_translation_model(source.path, compile=False)
