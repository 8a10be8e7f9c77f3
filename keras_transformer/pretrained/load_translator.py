"""`load_translator`: a ready `Translator` from a file, a folder or a Hugging Face id."""

import dataclasses

from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.pretrained.model_source import load_model_source


def load_translator(source, decoding=None, **settings):
    """A `Translator` of a model named by a path or a Hugging Face id, ready to translate.

    `source` is any of:

    - a `.keras` file of `save_translation_model` (a run's `model.keras`,
      `keras-transformer import`'s output);
    - a run directory (its `model.keras`);
    - a Marian / OPUS-MT folder as `save_pretrained` writes it;
    - a fairseq checkpoint (`model.pt`, its dictionaries and BPE codes in its
      folder), or that folder;
    - a Hugging Face id (`Helsinki-NLP/opus-mt-en-de`): its files are
      downloaded once into huggingface_hub's cache (`HF_HUB_OFFLINE=1` uses
      the cache only). Needs huggingface_hub
      (`pip install 'keras-transformer-mt[hub]'`).

    Args:
        source: str or path-like, or a `ModelSource`.
        decoding: a `DecodingConfig`, or None for the paper's settings (beam
            4, alpha 0.6, 50 extra tokens). A source longer than the model's
            positions allow is cut to them (`max_source_length`).
        **settings: `DecodingConfig` fields (`beam_size=5`) or `Translator`
            arguments (`search="greedy"`).

    Returns:
        A `Translator`.

    Raises:
        ValueError: one line saying why `source` cannot be loaded.
        ImportError: a Hugging Face id without huggingface_hub, or a
            checkpoint whose reader (torch, subword-nmt) is not installed.

    Example:

    >>> import keras_transformer as kt
    >>> kt.load_translator("Helsinki-NLP/opus-mt-en-de").translate(["A dog runs."])
    ['Ein Hund läuft.']
    """
    from keras_transformer.decoding.translator import Translator

    fields = {field.name for field in dataclasses.fields(DecodingConfig)}
    decoding = DecodingConfig.from_settings(
        decoding, **{key: value for key, value in settings.items() if key in fields}
    )
    others = {key: value for key, value in settings.items() if key not in fields}
    model, tokenizer = load_model_source(source)
    decoding = decoding.replace(max_source_length=decoding.kept_source_length(model.config))
    return Translator(model, tokenizer, decoding=decoding, **others)
