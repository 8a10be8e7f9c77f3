"""`save_translation_model`: the model and its tokenizer in one `.keras` file."""

import json
import zipfile

import keras

from keras_transformer.checkpoints.checkpoint_files import save_weights_atomic
from keras_transformer.export.quantized_model_file import QUANTIZATION_MEMBER, quantization_member

# The zip member holding the tokenizer. Keras' loader ignores it, so the file
# is also an ordinary `.keras` model file.
TOKENIZER_MEMBER = "keras_transformer_tokenizer.json"


def save_translation_model(model, tokenizer, path):
    """Saves `model` and `tokenizer` to one `.keras` file, for continued training.

    The file is what `model.save(path)` writes (config, weights and, for a
    compiled model, the optimizer state) with one more member holding the
    tokenizer's config, its SentencePiece models included as base64 (and,
    for a model quantized by `quantize_model`, one naming its mode). It is
    written under a temporary name and renamed when complete, so `path` is
    either the old file or the new one, never a partial file.

    Weights do not depend on the backend: a file saved under JAX loads
    under TensorFlow and the reverse (`export_saved_model` relies on it).

    Args:
        model: a built `Seq2SeqTransformer` (compiled or not).
        tokenizer: its tokenizer (`SubwordTokenizer`, `JointVocabularyTokenizer`).
        path: str or path-like ending in `.keras`.

    Returns:
        str, `path`.

    Example:

    >>> save_translation_model(model, tokenizer, "runs/base/translator.keras")
    >>> model, tokenizer = load_translation_model("runs/base/translator.keras")
    """
    if not str(path).endswith(".keras"):
        raise ValueError(f"`path` must end with `.keras`. Received: {path}")
    if not getattr(tokenizer, "has_vocabulary", False):
        raise ValueError(
            "`tokenizer` has no SentencePiece model to save (a `TranslationTokenizer` "
            "without its vocabulary)."
        )
    if not model.built:
        model.build()
    # Serialized before anything is written: a failure leaves `path` untouched.
    tokenizer_json = json.dumps(keras.saving.serialize_keras_object(tokenizer))

    quantization = quantization_member(model)  # int8 weights: how the loader rebuilds them

    def add_tokenizer(temporary):
        with zipfile.ZipFile(temporary, "a", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(TOKENIZER_MEMBER, tokenizer_json)
            if quantization is not None:
                archive.writestr(QUANTIZATION_MEMBER, quantization)

    return save_weights_atomic(model, path, before_rename=add_tokenizer)
