"""`--init-from MODEL.keras` and `--vocabulary FILE`: a run that starts from what exists.

`--init-from` takes a translation model file (a run's `model.keras`, or the output of
`keras-transformer import`): its architecture (the file's `TransformerConfig`), its
weights and its tokenizer. The run trains them on its own data, with a fresh optimizer
and its own schedule, into its own output directory. `--vocabulary` gives a new model
an existing SentencePiece model instead of training one.

Nothing here imports a backend until a model is loaded.
"""

import dataclasses
import hashlib
import json
import os
import sys
import zipfile

from keras_transformer.experiment.settings.model_settings import INIT_FROM_OVERRIDES
from keras_transformer.text.text_files import write_bytes_atomic

# The class `save_translation_model` files hold (the Keras config's `class_name`).
MODEL_CLASS = "Seq2SeqTransformer"
# What a model file that is not a translation model file is told to be instead.
EXPECTED = "a translation model file (a run's model.keras, or keras-transformer import's output)"


def file_sha256(path):
    """The SHA-256 of a file's bytes, read in blocks (about 1 s per GB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_init_config(path):
    """The `TransformerConfig` of a translation model file, checked without loading the model.

    Args:
        path: str, the `--init-from` file.

    Returns:
        A `TransformerConfig`.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is damaged (truncated, corrupt) or holds no
            translation model; the message names the flag and the file.
    """
    from keras_transformer.checkpoints.model_file_check import check_model_file
    from keras_transformer.models.transformer_config import TransformerConfig

    flag = f"--init-from {path}"
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{flag}: no such file; expected {EXPECTED}.")
    if not zipfile.is_zipfile(path) and path.endswith(".weights.h5"):
        raise ValueError(
            f"{flag}: a checkpoint (weights and training state, no tokenizer), not a model "
            "file; to continue its run, rerun that run's command with its --output-dir (it "
            "resumes from the newest good checkpoint), or give the run's model.keras"
        )
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{flag}: not a .keras (zip) file, or truncated; expected {EXPECTED}.")
    try:
        check_model_file(path)
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            keras_config = json.loads(archive.read("config.json"))
    except KeyError:
        raise ValueError(f"{flag}: holds no config.json; expected {EXPECTED}.") from None
    except ValueError as error:  # a damaged file, or config.json that is not JSON
        raise ValueError(f"{flag}: {' '.join(str(error).split())}") from None
    # The member `save_translation_model` adds (TOKENIZER_MEMBER; not imported: that
    # module loads Keras).
    found = keras_config.get("class_name") if isinstance(keras_config, dict) else None
    settings = (keras_config.get("config") or {}).get("config") if found == MODEL_CLASS else None
    if settings is None or "keras_transformer_tokenizer.json" not in names:
        what = f"a {found}" if found and found != MODEL_CLASS else "no tokenizer"
        raise ValueError(f"{flag}: holds {what}; expected {EXPECTED}.")
    try:
        return TransformerConfig.from_dict(settings)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{flag}: its model settings are invalid here: {error}") from None


def run_model_config(model):
    """The `TransformerConfig` a run with `--init-from` trains: the file's, with its dropouts
    changed by `model_overrides` (the only fields it may change; `ModelSettings` checks).

    Args:
        model: the run's `ModelSettings`, with `init_from` set.

    Returns:
        A `TransformerConfig`.
    """
    changes = {k: v for k, v in model.model_overrides.items() if k in INIT_FROM_OVERRIDES}
    return dataclasses.replace(read_init_config(model.init_from), **changes)


def run_source_eos(model):
    """Whether the run's sources end with EOS: as the `--init-from` model was trained
    (`TransformerConfig.source_eos`; an OpenNMT-py import's have none), else True.

    Args:
        model: the run's `ModelSettings`.
    """
    return run_model_config(model).source_eos if model.init_from is not None else True


def init_settings(path):
    """What `config.json` records of the `--init-from` file: its path and SHA-256.

    A resumed run is refused when the file's bytes changed since the run started.
    """
    return {"path": os.path.abspath(path), "sha256": file_sha256(path)}


def check_init_tokenizer(path):
    """Raises a one-line ValueError unless the file's tokenizer runs in TensorFlow ops.

    Training tokenizes its data inside `tf.data`; a tokenizer that runs in Python
    only (an imported fairseq model's Moses + BPE) translates, but cannot train.
    """
    import keras

    # Imported for the tokenizer classes it registers (and the member's name).
    from keras_transformer.export.load_translation_model import TOKENIZER_MEMBER

    with zipfile.ZipFile(path) as archive:
        tokenizer_config = json.loads(archive.read(TOKENIZER_MEMBER))
    tokenizer = keras.saving.deserialize_keras_object(tokenizer_config, safe_mode=True)
    try:
        tokenizer.tf_trackable  # noqa: B018 (the TensorFlow tokenizer, or ValueError)
    except ValueError:
        raise ValueError(
            f"--init-from {path}: its tokenizer ({type(tokenizer).__name__}) runs in Python "
            "only, and training tokenizes in tf.data: fine-tune a model with a SentencePiece "
            "tokenizer (one trained here, an OPUS-MT import); translate and evaluate take this one"
        ) from None


def load_init_model(path):
    """The model and tokenizer of the `--init-from` file (no optimizer state).

    Returns:
        `(model, tokenizer)`, as `load_translation_model` returns them.
    """
    from keras_transformer.export.load_translation_model import load_translation_model

    try:
        return load_translation_model(path, compile=False)
    except ValueError as error:
        raise ValueError(f"--init-from {path}: {' '.join(str(error).split())}") from None


def vocabulary_file_size(path):
    """The number of pieces of the SentencePiece model file `path` (`--vocabulary`)."""
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=path).get_piece_size()


def check_vocabulary_file(path):
    """Raises a one-line error unless `path` is a SentencePiece model with the package's ids.

    Args:
        path: str, the `--vocabulary` file.

    Returns:
        bytes, the serialized model.
    """
    from keras_transformer.text.sentencepiece_ids import check_special_ids

    flag = f"--vocabulary {path}"
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{flag}: no such file; expected a SentencePiece .model file.")
    with open(path, "rb") as file:
        proto = file.read()
    try:
        check_special_ids(proto)
    except ValueError as error:
        raise ValueError(f"{flag}: {' '.join(str(error).split())}") from None
    return proto


def given_vocabulary(vocabulary_file, path):
    """The `--vocabulary` file's bytes, checked, and copied into the run as `path`.

    Raises:
        ValueError: `path` holds another vocabulary (an earlier run's).
    """
    proto = check_vocabulary_file(vocabulary_file)
    if not os.path.exists(path):
        write_bytes_atomic(path, proto)
        return proto
    with open(path, "rb") as file:
        if file.read() != proto:
            raise ValueError(
                f"{path} (from an earlier run in this output directory) differs from "
                f"--vocabulary {vocabulary_file}: use another --output-dir."
            )
    return proto


def initial_model(init_from, run, verbose=True):
    """The `--init-from` file's model and tokenizer, or `(None, None)` without it.

    The tokenizer's SentencePiece models are copied into the run (`vocabulary.model`
    for the package's own tokenizer), as a trained vocabulary would be.

    Args:
        init_from: str or None, the model file (`ModelSettings.init_from`).
        run: the run's `RunDirectory`.
        verbose: bool, whether to say so on stderr.
    """
    if init_from is None:
        return None, None
    model, tokenizer = load_init_model(init_from)
    for name, proto in tokenizer.sentencepiece_files().items():
        if not os.path.exists(run.join(name)):
            write_bytes_atomic(run.join(name), proto)
    if verbose:
        print(
            f"Starting from {init_from}: its weights and tokenizer "
            f"({tokenizer.vocabulary_size()} pieces).",
            file=sys.stderr,
        )
    return model, tokenizer
