"""Export for serving (SavedModel for TF Serving, CTranslate2) and `.keras` files for training.

Depends on the model, the tokenizer and decoding; never on training code
(`keras_transformer.training`), and the exported graph holds none of it.
"""

from keras_transformer.export.ctranslate2_export import export_ctranslate2
from keras_transformer.export.export_saved_model import (
    SETTINGS_FILE,
    default_max_source_length,
    export_saved_model,
)
from keras_transformer.export.load_translation_model import load_translation_model
from keras_transformer.export.run_export_command import run_export_command
from keras_transformer.export.save_translation_model import save_translation_model
from keras_transformer.export.translation_module import (
    IDS_SIGNATURE,
    TEXT_SIGNATURE,
    TranslationModule,
)

__all__ = [
    "IDS_SIGNATURE",
    "SETTINGS_FILE",
    "TEXT_SIGNATURE",
    "TranslationModule",
    "default_max_source_length",
    "export_ctranslate2",
    "export_saved_model",
    "load_translation_model",
    "run_export_command",
    "save_translation_model",
]
