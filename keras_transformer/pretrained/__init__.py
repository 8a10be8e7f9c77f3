"""Published translation models brought into this package: Marian / OPUS-MT, fairseq, OpenNMT-py.

Each format is a module (formats.py registers them; weight_setter.py puts any format's
tensors into a model by its tensor-name map). `keras-transformer import FORMAT ...` writes a
`save_translation_model` file that `translate`, `evaluate`, `export` and `train --init-from`
take as they take a trained model.
`load_translator` loads any of them, a model of this package or a Hugging Face id as a ready
`Translator`, converting in memory.
"""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "ModelSource": "model_source",
        "find_model_source": "model_source",
        "hub_snapshot": "hub",
        "import_fairseq": "fairseq",
        "import_opennmt": "opennmt",
        "import_marian": "marian",
        "load_model_source": "model_source",
        "load_translator": "load_translator",
    },
)
