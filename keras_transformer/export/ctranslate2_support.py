"""What the command line needs of the optional CTranslate2 package, without importing it."""

# CTranslate2's weight types (`ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES`), listed here
# so that the command line can offer them without importing the optional package.
QUANTIZATIONS = (
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)
INSTALL_HINT = "pip install 'keras-transformer-mt[ctranslate2]'"


def import_ctranslate2():
    """Imports `ctranslate2`, or raises an ImportError that says how to install it.

    Returns:
        The `ctranslate2` module.
    """
    try:
        import ctranslate2
    except ImportError:
        raise ImportError(f"CTranslate2 is not installed: {INSTALL_HINT}") from None
    return ctranslate2
