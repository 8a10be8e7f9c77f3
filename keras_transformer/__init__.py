"""keras-transformer: the Transformer of "Attention Is All You Need" for Keras 3.

Importing the package is cheap: its names (and Keras with a backend) load when first used.
"""

from keras_transformer.utils.lazy_exports import lazy_exports
from keras_transformer.version import __version__  # noqa: F401 (the package's version)

__all__ = lazy_exports(
    __name__,
    {
        "LabelSmoothedCrossEntropy": "training",
        "Seq2SeqTransformer": "models",
        "TransformerConfig": "models",
        "TransformerSchedule": "training",
        "data": None,
        "layers": None,
        "load_translator": "pretrained",
        "models": None,
        "paper_optimizer": "training",
        "text": None,
        "training": None,
    },
)
