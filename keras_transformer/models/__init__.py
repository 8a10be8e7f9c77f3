"""The Seq2SeqTransformer model, its config and the paper's presets."""

from keras_transformer.models.build_model import build_model
from keras_transformer.models.presets import PRESETS, Preset, get_preset
from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
from keras_transformer.models.transformer_config import TransformerConfig

__all__ = [
    "PRESETS",
    "Preset",
    "Seq2SeqTransformer",
    "TransformerConfig",
    "build_model",
    "get_preset",
]
