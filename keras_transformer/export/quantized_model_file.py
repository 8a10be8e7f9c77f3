"""The `.keras` file of a quantized model: how it is marked, and how it loads."""

import json
import os
import tempfile
import zipfile

import keras

from keras_transformer.models.quantization import quantization_mode, quantize_model

# The zip member naming the quantization of a model file's weights, e.g. {"mode": "int8"}.
QUANTIZATION_MEMBER = "keras_transformer_quantization.json"
# Where a `.keras` file keeps its weights (Keras' layout).
WEIGHTS_MEMBER = "model.weights.h5"


def quantization_member(model):
    """The JSON text of `QUANTIZATION_MEMBER` for `model`, or None for a float model."""
    mode = quantization_mode(model)
    return None if mode is None else json.dumps({"mode": mode})


def saved_quantization(path):
    """The quantization mode a `.keras` file's weights were saved in ("int8"), or None."""
    with zipfile.ZipFile(path) as archive:
        if QUANTIZATION_MEMBER not in archive.namelist():
            return None
        return json.loads(archive.read(QUANTIZATION_MEMBER))["mode"]


def load_quantized_model(path, mode, safe_mode=True):
    """Loads a `.keras` file of a quantized model, for decoding.

    Keras builds a model file's layers from its config, in float: the
    quantized layers of a model (created in their parents' `build`) are not
    in it. So the model is built from the config, quantized to `mode` as it
    was (`quantize_model`), and then given the file's int8 weights.

    Args:
        path: str, a `.keras` file holding `QUANTIZATION_MEMBER`.
        mode: str, the mode it names.
        safe_mode: bool, Keras' `safe_mode` for the config.

    Returns:
        The model, its weights as saved (int8 kernels and their scales).
    """
    with zipfile.ZipFile(path) as archive:
        config = json.loads(archive.read("config.json"))
        config.pop("compile_config", None)  # for decoding
        with tempfile.TemporaryDirectory() as directory:
            archive.extract(WEIGHTS_MEMBER, directory)
            model = keras.saving.deserialize_keras_object(config, safe_mode=safe_mode)
            quantize_model(model, mode)
            model.load_weights(os.path.join(directory, WEIGHTS_MEMBER))
    return model
