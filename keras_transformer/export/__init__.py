"""Export for serving (SavedModel for TF Serving, CTranslate2) and `.keras` files for training.

Depends on the model, the tokenizer and decoding; never on training code
(`keras_transformer.training`), and the exported graph holds none of it.
"""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "apply_adapter": "lora_adapter",
        "read_adapter_settings": "lora_adapter",
        "save_adapter": "lora_adapter",
        "weights_fingerprint": "lora_adapter",
        "export_ctranslate2": "ctranslate2_export",
        "SETTINGS_FILE": "export_saved_model",
        "default_max_source_length": "export_saved_model",
        "export_saved_model": "export_saved_model",
        "load_model_files": "model_files",
        "load_translation_model": "load_translation_model",
        "save_translation_model": "save_translation_model",
        "IDS_SIGNATURE": "translation_module",
        "TEXT_SIGNATURE": "translation_module",
        "TranslationModule": "translation_module",
        "TensorFlowExport": "tensorflow_export",
    },
)
