"""The Seq2SeqTransformer model, its config and the paper's presets."""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "build_model": "build_model",
        "PRESETS": "presets",
        "Preset": "presets",
        "get_preset": "presets",
        "quantize_model": "quantization",
        "Seq2SeqTransformer": "seq2seq_transformer",
        "TransformerConfig": "transformer_config",
    },
)
