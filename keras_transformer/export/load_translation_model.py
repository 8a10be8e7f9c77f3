"""`load_translation_model`: the model and tokenizer of a `save_translation_model` file."""

import json
import os
import zipfile

import keras

from keras_transformer.export.save_translation_model import TOKENIZER_MEMBER
from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
from keras_transformer.text.subword_tokenizer import SubwordTokenizer


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
        `(model, tokenizer)`: a `Seq2SeqTransformer` and a `SubwordTokenizer`.

    Example:

    >>> model, tokenizer = load_translation_model("runs/base/translator.keras")
    >>> model.fit(train.dataset, epochs=1)  # continues where it stopped
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Translation model file not found: {path}")
    with zipfile.ZipFile(path) as archive:
        if TOKENIZER_MEMBER not in archive.namelist():
            raise ValueError(
                f"{path} holds no tokenizer ({TOKENIZER_MEMBER}): it was not written by "
                "save_translation_model. Load the model with keras.saving.load_model and "
                "the tokenizer from its SentencePiece model file."
            )
        tokenizer_config = json.loads(archive.read(TOKENIZER_MEMBER))
    tokenizer = keras.saving.deserialize_keras_object(tokenizer_config, safe_mode=safe_mode)
    model = keras.saving.load_model(path, compile=compile, safe_mode=safe_mode)
    if not isinstance(model, Seq2SeqTransformer) or not isinstance(tokenizer, SubwordTokenizer):
        raise ValueError(
            f"{path} must hold a Seq2SeqTransformer and a SubwordTokenizer. Received: "
            f"{type(model).__name__} and {type(tokenizer).__name__}"
        )
    return model, tokenizer
