"""Published translation models brought into this package: Marian / OPUS-MT and fairseq.

`keras-transformer import marian|fairseq ...` writes a `save_translation_model` file that
`translate`, `evaluate`, `export` and `train --init-from` take as they take a trained model.
"""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "import_fairseq": "fairseq",
        "import_marian": "marian",
    },
)
