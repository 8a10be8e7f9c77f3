"""`build_model`: a built `Seq2SeqTransformer` from a config file, a preset or settings."""

from keras_transformer.models.presets import get_preset
from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
from keras_transformer.models.transformer_config import TransformerConfig


def build_model(config_file=None, preset=None, vocabulary_size=None, settings=None):
    """A built `Seq2SeqTransformer` from exactly one source of model settings.

    The commands that load weights into a fresh model (`average`, `export
    --weights`) build it here, so that every source is read alike and fails
    with the same messages.

    Args:
        config_file: str or path-like, a JSON file: a run's `config.json` (its
            `"model"`), the dict of `Seq2SeqTransformer.get_config()` (its
            `"config"`) or a dict of `TransformerConfig` fields.
        preset: str, a preset name ("base", "big", ...), with `vocabulary_size`.
        vocabulary_size: int, the vocabulary size of `preset`.
        settings: dict, what `config_file` would hold (e.g.
            `RunDirectory.model_settings()`).

    Returns:
        A built `Seq2SeqTransformer`, its weights freshly initialized.

    Raises:
        ValueError: not exactly one source, `preset` without `vocabulary_size`,
            or settings that are not a valid config (the message names the file).
        OSError: `config_file` cannot be read.

    Example:

    >>> model = build_model("runs/base/config.json")
    >>> model.load_weights("runs/base/checkpoints/best.weights.h5")
    """
    given = [name for name, value in locals().items() if value is not None]
    if len([name for name in given if name != "vocabulary_size"]) != 1:
        raise ValueError(
            "Build a model from one of config_file, preset (with vocabulary_size) or "
            f"settings. Received: {', '.join(given) or 'none'}"
        )
    if preset is not None:
        if vocabulary_size is None:
            raise ValueError(f"preset={preset!r} needs a vocabulary_size.")
        model = Seq2SeqTransformer(get_preset(preset).config(vocabulary_size))
    elif config_file is not None:
        model = Seq2SeqTransformer(TransformerConfig.from_json_file(config_file))
    else:
        try:
            if isinstance(settings.get("config"), dict):  # Seq2SeqTransformer.get_config()
                model = Seq2SeqTransformer.from_config(settings)
            else:
                model = Seq2SeqTransformer(TransformerConfig.from_dict(settings))
        except (TypeError, ValueError) as error:
            raise ValueError(f"The model settings are not a valid config: {error}") from None
    model.build()
    return model
