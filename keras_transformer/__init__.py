"""keras-transformer: the Transformer of "Attention Is All You Need" for Keras 3."""

from keras_transformer import data, layers, models, text, training
from keras_transformer.models import Seq2SeqTransformer, TransformerConfig
from keras_transformer.training import (
    LabelSmoothedCrossEntropy,
    TransformerSchedule,
    paper_optimizer,
)

__version__ = "0.1.0"

__all__ = [
    "LabelSmoothedCrossEntropy",
    "Seq2SeqTransformer",
    "TransformerConfig",
    "TransformerSchedule",
    "data",
    "layers",
    "models",
    "paper_optimizer",
    "text",
    "training",
]
