"""`load_translation_model`: the model and tokenizer of a `save_translation_model` file."""

import json
import os
import zipfile

import keras

from keras_transformer.checkpoints.model_file_check import check_model_file, reading_model_file
from keras_transformer.export.save_translation_model import TOKENIZER_MEMBER
from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
from keras_transformer.text import (  # noqa: F401 (registers the tokenizer classes)
    joint_vocabulary_tokenizer,
    moses_bpe_tokenizer,
    subword_tokenizer,
)
from keras_transformer.text.translation_tokenizer import TranslationTokenizer


def load_translation_model(path, compile=True, safe_mode=True):
    """Loads the model and tokenizer written by `save_translation_model`.

    Works on either backend, whichever backend saved the file.

    Args:
        path: str or path-like, a `.keras` file from `save_translation_model`.
        compile: bool. Restore the optimizer, loss and their state (to
            continue training); `False` for decoding or export only.
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
    tokenizer = keras.saving.deserialize_keras_object(tokenizer_config, safe_mode=safe_mode)
    if compile:
        _register_training_classes()
    with reading_model_file(path):
        model = keras.saving.load_model(path, compile=compile, safe_mode=safe_mode)
    if not isinstance(model, Seq2SeqTransformer) or not isinstance(tokenizer, TranslationTokenizer):
        raise ValueError(
            f"{path} must hold a Seq2SeqTransformer and a translation tokenizer "
            "(SubwordTokenizer, JointVocabularyTokenizer). Received: "
            f"{type(model).__name__} and {type(tokenizer).__name__}"
        )
    return model, tokenizer


def _register_training_classes():
    # A compiled model's file names the optimizer, schedule and loss, which register
    # themselves with Keras when their modules are imported. Decoding and export load with
    # compile=False and so never import the training code.
    from keras_transformer.training import (  # noqa: F401
        fused_adam,
        label_smoothed_cross_entropy,
        transformer_schedule,
    )
