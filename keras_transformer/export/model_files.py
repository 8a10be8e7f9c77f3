"""`load_model_files`: the model and tokenizer an export reads, from the files a user names."""

import keras

from keras_transformer.checkpoints.model_file_check import check_model_file, reading_model_file
from keras_transformer.export.load_translation_model import load_translation_model
from keras_transformer.export.lora_adapter import apply_adapter
from keras_transformer.models.build_model import build_model
from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
from keras_transformer.text.subword_tokenizer import SubwordTokenizer


def load_model_files(
    model=None, *, weights=None, config=None, preset=None, tokenizer=None, adapter=None
):
    """The `(model, tokenizer)` of a model file, or of weights with their settings.

    One of `model` and `weights` is given. A `model` file without `tokenizer`
    is a `save_translation_model` file (model and tokenizer); with
    `tokenizer`, a `Seq2SeqTransformer` `.keras` file. `weights` (a
    `.weights.h5` file, e.g. averaged checkpoints) go into the model that
    `config` or `preset` describes, sized to `tokenizer`.

    Args:
        model: str or None, a `.keras` file.
        weights: str or None, a `.weights.h5` file.
        config: str or None, with `weights`: a run's `config.json` or a JSON
            file of `TransformerConfig` fields (`build_model`).
        preset: str or None, with `weights`: a model preset name.
        tokenizer: str or None, a SentencePiece `.model` file.
        adapter: str or None, a LoRA adapter file (`adapter.lora`) of the
            model: its factors are merged into the kernels in memory, as the
            adapter run's `model.keras` holds them (no file is written).

    Returns:
        `(model, tokenizer)`: a `Seq2SeqTransformer` and its tokenizer.

    Raises:
        ValueError, OSError: a file that cannot be read as what it is given as,
            or an adapter of another base model.

    Example:

    >>> model, tokenizer = load_model_files("runs/base/model.keras")
    """
    loaded, tokenizer = _load(model, weights, config, preset, tokenizer)
    if adapter is not None:
        loaded = apply_adapter(loaded, adapter).merged_model()
    return loaded, tokenizer


def _load(model, weights, config, preset, tokenizer):
    tokenizer = SubwordTokenizer(proto=tokenizer) if tokenizer else None
    if model is not None:
        if tokenizer is None:
            return load_translation_model(model, compile=False)
        with reading_model_file(check_model_file(model)):
            loaded = keras.saving.load_model(model, compile=False)
        if not isinstance(loaded, Seq2SeqTransformer):
            raise ValueError(f"{model} holds a {type(loaded).__name__}, not a Seq2SeqTransformer.")
        return loaded, tokenizer
    built = build_model(
        config,
        preset=preset,
        vocabulary_size=tokenizer.vocabulary_size() if preset else None,
    )
    with reading_model_file(check_model_file(weights)):
        built.load_weights(weights)
    return built, tokenizer
