"""`load_translation_model`: the model and tokenizer of a `save_translation_model` file."""

import contextlib
import importlib
import json
import os
import re
import sys
import zipfile

import keras

from keras_transformer.checkpoints.model_file_check import check_model_file, reading_model_file
from keras_transformer.export.quantized_model_file import load_quantized_model, saved_quantization
from keras_transformer.export.save_translation_model import TOKENIZER_MEMBER
from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
from keras_transformer.text import (  # noqa: F401 (registers the tokenizer classes)
    joint_vocabulary_tokenizer,
    moses_bpe_tokenizer,
    subword_tokenizer,
)
from keras_transformer.text.translation_tokenizer import TranslationTokenizer

# A module of this package, as a `.keras` file names the module of each registered object.
_OWN_MODULE = re.compile(r"keras_transformer(\.[A-Za-z_][A-Za-z0-9_]*)+")


def load_translation_model(path, compile=True, safe_mode=True):
    """Loads the model and tokenizer written by `save_translation_model`.

    Works on either backend, whichever backend saved the file.

    Args:
        path: str or path-like, a `.keras` file from `save_translation_model`.
        compile: bool. Restore the optimizer, loss and their state (to
            continue training); `False` for decoding or export only. The
            classes a compiled file names (`FusedAdam`, `TransformerSchedule`,
            `LabelSmoothedCrossEntropy`) are imported from the modules the
            file names, so only `compile=True` loads the training code.
        safe_mode: bool. Refuse configs that would run arbitrary code
            (Keras' `safe_mode`, default on). It is no security boundary:
            load only files you trust.

    Returns:
        `(model, tokenizer)`: a `Seq2SeqTransformer` and its tokenizer (a
        `SubwordTokenizer`, or a `JointVocabularyTokenizer` for an imported
        Marian model).

    Example:

    >>> model, tokenizer = load_translation_model("runs/base/translator.keras")
    >>> model.fit(train.dataset, epochs=1)  # continues where it stopped
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Translation model file not found: {path}")
    check_model_file(path)  # a truncated or corrupt file: one error naming it
    with zipfile.ZipFile(path) as archive:
        if TOKENIZER_MEMBER not in archive.namelist():
            raise ValueError(
                f"{path} holds no tokenizer ({TOKENIZER_MEMBER}): it was not written by "
                "save_translation_model. Load the model with keras.saving.load_model and "
                "the tokenizer from its SentencePiece model file."
            )
        tokenizer_config = json.loads(archive.read(TOKENIZER_MEMBER))
        model_config = json.loads(archive.read("config.json"))
    tokenizer = keras.saving.deserialize_keras_object(tokenizer_config, safe_mode=safe_mode)
    if isinstance(model_config, dict):
        if not compile:
            model_config.pop("compile_config", None)
        _import_named_modules(model_config)
    quantized = saved_quantization(path)
    with reading_model_file(path):
        if quantized is not None:  # int8 weights: for decoding, not training
            model = load_quantized_model(path, quantized, safe_mode=safe_mode)
        else:
            model = keras.saving.load_model(path, compile=compile, safe_mode=safe_mode)
    if not isinstance(model, Seq2SeqTransformer) or not isinstance(tokenizer, TranslationTokenizer):
        raise ValueError(
            f"{path} must hold a Seq2SeqTransformer and a translation tokenizer "
            "(SubwordTokenizer, JointVocabularyTokenizer). Received: "
            f"{type(model).__name__} and {type(tokenizer).__name__}"
        )
    return model, tokenizer


def _import_named_modules(config):
    """Imports each module of this package that `config` names for a registered object.

    A `.keras` file records the module of every object beside its registered
    name. Keras imports the modules of its own packages (keras, keras_hub) by
    that record, but finds any other class only if its module has registered
    it already. This does the same for this package, so export never imports
    training: a compiled model's file names the optimizer, schedule and loss
    (`keras_transformer.training`), which a load for decoding (compile=False)
    leaves out. A module that does not exist is left to Keras' own error.
    """
    if isinstance(config, list):
        for value in config:
            _import_named_modules(value)
    if not isinstance(config, dict):
        return
    module, name = config.get("module"), config.get("registered_name")
    if (
        isinstance(module, str)
        and _OWN_MODULE.fullmatch(module)
        and isinstance(name, str)
        and name.startswith("keras_transformer>")
        and module not in sys.modules
    ):
        with contextlib.suppress(ImportError):  # Keras names the class it cannot find
            importlib.import_module(module)
    for value in config.values():
        _import_named_modules(value)
