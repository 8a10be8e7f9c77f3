"""`ModelSource`: which translation model a name means, found before any backend loads.

A name is a `.keras` translation model file, a run directory (its `model.keras`), a model of
one of the registered formats (formats.py: a Marian / OPUS-MT `save_pretrained` folder, a
fairseq or OpenNMT-py checkpoint or its folder), or a Hugging Face id such as
`Helsinki-NLP/opus-mt-en-de`, which `hub_snapshot` downloads into (or finds in)
huggingface_hub's cache.
"""

import dataclasses
import os
import re

from keras_transformer.pretrained.formats import FORMATS, formats, get_format
from keras_transformer.utils.run_directory import MODEL_FILE, SAVED_MODEL_PROTO, resolve_model_file

KINDS = ("keras", *FORMATS)
# A Hugging Face model id: ORG/NAME (letters, digits, '.', '_', '-').
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def _or_list(items):
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A translation model found on disk: what to load and how.

    Args:
        name: str, the name as given (a path or a Hugging Face id).
        kind: str, one of `KINDS`: "keras" (a `save_translation_model`
            file) or a format of formats.py: "marian" (a `save_pretrained`
            folder), "fairseq" (a checkpoint file whose folder holds the
            dictionaries), "opennmt" (a checkpoint file).
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
            folder, a fairseq or OpenNMT-py checkpoint (`.pt`) or folder, or a
            Hugging Face id (`ORG/NAME`, needs huggingface_hub).
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
        for module in formats():
            if module.accepts_file(name):
                return ModelSource(name, module.NAME, name)
        return ModelSource(name, "keras", resolve_model_file(name, command))
    if is_hub_id(name):
        from keras_transformer.pretrained.hub import hub_snapshot

        return _folder_source(name, hub_snapshot(name), command)
    raise ValueError(f"{name}: no such file or directory (nor a Hugging Face id, ORG/NAME)")


def _folder_source(name, folder, command):
    """The source of a folder: a run directory or a folder of a registered format."""
    if os.path.isfile(os.path.join(folder, SAVED_MODEL_PROTO)) or os.path.isfile(
        os.path.join(folder, MODEL_FILE)
    ):
        return ModelSource(name, "keras", resolve_model_file(folder, command))
    for module in formats():
        found = module.find_in_folder(name, folder)
        if found is not None:
            return ModelSource(name, module.NAME, found)
    if folder != name:
        raise ValueError(
            f"{name}: this Hugging Face model is no Marian / OPUS-MT model and holds no "
            f"{MODEL_FILE}; those are the ones that load"
        )
    try:
        resolve_model_file(folder, command)  # a run directory's own error
    except ValueError as error:
        hints = _or_list(module.MISSING_HINT for module in formats())
        raise ValueError(f"{str(error).rstrip('.')}; nor {hints}") from None
    kinds = _or_list([f"{MODEL_FILE} (a run directory)", *(m.FOLDER_HINT for m in formats())])
    raise ValueError(f"{name}: not a model folder; expected {kinds}")


def load_model_source(source):
    """The model and tokenizer of a `ModelSource` (or of a name `find_model_source` takes).

    A model of a registered format (a Marian folder, a fairseq or OpenNMT-py
    checkpoint) is converted in memory, as `keras-transformer import`
    converts it, without writing a file.

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
    if source.kind in FORMATS:
        return get_format(source.kind).translation_model(source.path)
    from keras_transformer.export.load_translation_model import load_translation_model

    return load_translation_model(source.path, compile=False)
