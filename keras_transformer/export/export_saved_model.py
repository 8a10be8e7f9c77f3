"""`export_saved_model`: a SavedModel that stock TF Serving serves, from either backend."""

import json
import os
import shutil
import tempfile
import uuid

import keras
import tensorflow as tf
import tensorflow_text
from tensorflow.core.protobuf import saved_model_pb2

from keras_transformer import backend
from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.export.save_translation_model import save_translation_model
from keras_transformer.export.tensorflow_export import MODULE, TensorFlowExport
from keras_transformer.export.translation_module import (
    IDS_SIGNATURE,
    TEXT_SIGNATURE,
    TranslationModule,
)
from keras_transformer.models.quantization import quantized_copy
from keras_transformer.utils.dataclass_config import field_types
from keras_transformer.utils.run_directory import MODEL_FILE
from keras_transformer.version import __version__

SETTINGS_FILE = "translation_settings.json"
SIGNATURES = {
    TEXT_SIGNATURE: {
        "inputs": {"sentences": "string [batch]: raw UTF-8 sentences"},
        "outputs": {
            "translations": "string [batch]: UTF-8 translations",
            "scores": "float32 [batch]: length-penalized log-probabilities (0.0 for blank rows)",
            "truncated": "bool [batch]: the source was cut to max_source_length ids",
        },
    },
    IDS_SIGNATURE: {
        "inputs": {"token_ids": "int32 [batch, length]: source ids, padded with pad_id, no EOS"},
        "outputs": {
            "token_ids": "int32 [batch, length]: output ids, padded with pad_id, no EOS",
            "scores": "float32 [batch]",
            "truncated": "bool [batch]",
        },
    },
}


def default_max_source_length(config, max_extra_length):
    """The source length a served model keeps (`DecodingConfig.source_length_limit`)."""
    return DecodingConfig(max_extra_length=max_extra_length).source_length_limit(config)


def _served_settings(model, tokenizer, decoding):
    """The settings the served graph decodes with, as `translation_settings.json` lists them."""
    if decoding.num_results != 1:
        raise ValueError(
            "A SavedModel serves one translation per sentence. "
            f"Received: num_results={decoding.num_results}"
        )
    if not getattr(tokenizer, "has_vocabulary", False):
        raise ValueError("`tokenizer` has no SentencePiece model (no vocabulary).")
    served = decoding.served_settings()  # the fields marked `served`, of its strategy
    served.update(
        max_source_length=decoding.kept_source_length(model.config),
        # The served graph runs on TensorFlow, whichever backend exports it.
        batch_tokens=decoding.batch_tokens or backend.DECODING_BATCH_TOKENS,
    )
    kinds = field_types(DecodingConfig)
    return {
        name: float(value) if kinds[name][0] is float else value for name, value in served.items()
    }


def _settings(model, tokenizer, **decoding):
    return {
        "format_version": 1,
        "signatures": SIGNATURES,
        "decoding": decoding,
        "special_ids": {
            "pad_id": model.config.pad_id,
            "bos_id": tokenizer.bos_id,
            "eos_id": tokenizer.eos_id,
        },
        "tokenizer": type(tokenizer).__name__,
        "model_config": model.config.to_dict(),
        "versions": {
            "tensorflow": tf.__version__,
            "tensorflow_text": tensorflow_text.__version__,
            "keras": keras.__version__,
            "keras_transformer": __version__,
        },
    }


def _check_no_xla(directory):
    """Raises if the SavedModel in `directory` needs XLA (a safety net; tests audit every op)."""
    with open(os.path.join(directory, "saved_model.pb"), "rb") as file:
        saved_model = saved_model_pb2.SavedModel.FromString(file.read())
    for meta_graph in saved_model.meta_graphs:
        functions = list(meta_graph.graph_def.library.function)
        for function in functions:
            if function.attr["_XlaMustCompile"].b:
                raise RuntimeError(
                    f"The serving graph has a must-compile function {function.signature.name!r}; "
                    "tensorflow_model_server runs without XLA."
                )
        nodes = list(meta_graph.graph_def.node) + [n for f in functions for n in f.node_def]
        for node in nodes:
            if node.op.startswith(("Xla", "_Xla")) or node.attr["_XlaMustCompile"].b:
                raise RuntimeError(
                    f"The serving graph needs XLA (op {node.op!r} in {node.name!r}); "
                    "tensorflow_model_server runs without it. Please report this."
                )


def _replace_directory(temporary, path):
    """Moves the complete export `temporary` to `path`, replacing an old export."""
    for directory, _, files in os.walk(temporary):
        for name in files:
            with open(os.path.join(directory, name), "rb") as file:
                os.fsync(file.fileno())
    if not os.path.exists(path):
        os.rename(temporary, path)
        return
    old = f"{temporary}.old"
    os.rename(path, old)
    os.rename(temporary, path)
    shutil.rmtree(old)


def export_saved_model(
    model,
    tokenizer,
    path,
    decoding=None,
    *,
    overwrite=False,
    **settings,
):
    """Writes a SavedModel that translates strings: tokenize, beam search, detokenize.

    The SavedModel runs on stock `tensorflow_model_server` (TensorFlow core
    ops plus the tensorflow-text op library, XLA off) and in any Python
    process that imports `tensorflow` and `tensorflow_text`; it holds no
    Python code, of Keras or of this package. Signatures:

    - `serving_default`: `sentences`, string [batch], raw UTF-8 ->
      `translations` string [batch], `scores` float32 [batch] (the
      length-penalized log-probability, paper 6.1), `truncated` bool [batch].
    - `translate_ids`: `token_ids`, int32 [batch, length], SentencePiece ids
      right-padded with the padding id (0; an imported Marian model's: its
      last id) and without EOS -> `token_ids` int32 [batch, length] (padded
      likewise, no EOS), `scores`, `truncated`.

    Translations equal `Translator(model, tokenizer, decoding).translate`
    with the served `max_source_length`.
    Invalid UTF-8 is replaced by U+FFFD; blank sentences give `""` and score
    0.0; sources longer than `max_source_length` ids (EOS included) are cut
    and flagged in `truncated`; an empty batch gives empty outputs. The
    decoding settings, special ids, model config and library versions are
    written to `assets/translation_settings.json`.

    The graph is traced on the TensorFlow backend, with no XLA op and no
    must-compile function. On another backend (JAX) the model and tokenizer
    are saved to a temporary `.keras` file and exported in a TensorFlow-backend
    subprocess (`TensorFlowExport`, with the decoding settings as data):
    weights do not depend on the backend.

    The directory is written under a temporary name next to `path` and
    renamed when complete, so a server polling the parent directory never
    loads a partial export.

    Args:
        model: a `Seq2SeqTransformer`.
        tokenizer: its `SubwordTokenizer` or `JointVocabularyTokenizer`.
        path: str or path-like, the directory to create, e.g.
            `serving/translator/1` (TF Serving wants a numbered version
            directory under the model's base path).
        decoding: a `DecodingConfig`; None for the paper's settings (6.1:
            beam 4, alpha 0.6, 50 extra tokens). Its `max_source_length`
            None keeps `DecodingConfig.source_length_limit` ids
            (`config.max_position`, 512 by default); the served model gives
            one translation per sentence (`num_results` 1) and splits a
            request into sub-batches of at most `batch_tokens` source ids
            (`batch_size` does not apply).
            With `quantize="int8"` a copy of the model with int8 weight
            matrices is exported (`quantized_copy`; `model` stays float),
            and the graph decodes with int8 variables and matmuls.
        overwrite: bool. Replace an existing `path`.
        **settings: single `DecodingConfig` fields (e.g. `beam_size=5`),
            applied over `decoding`.

    Returns:
        str, `path`.

    Example:

    >>> export_saved_model(model, tokenizer, "serving/translator/1")  # then, in a shell:
    docker run -p 8501:8501 -v "$PWD/serving/translator:/models/translator" \\
        -e MODEL_NAME=translator tensorflow/serving:<version>
    """
    decoding = _served_settings(
        model, tokenizer, DecodingConfig.from_settings(decoding, **settings)
    )
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"Export directory already exists: {path} (pass overwrite=True).")
    if not backend.is_tensorflow():
        return _export_in_tensorflow_process(model, tokenizer, path, decoding, overwrite)
    if not model.built:
        model.build()
    if decoding.get("quantize") is not None:
        model = quantized_copy(model, decoding["quantize"])  # the caller's model stays float
    parent, name = os.path.split(path)
    temporary = os.path.join(parent, f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        os.makedirs(parent, exist_ok=True)
        os.mkdir(temporary)  # a dot name: TF Serving only loads numbered directories
    except OSError as error:  # named by `path`, not the temporary
        raise type(error)(error.errno, error.strerror, path) from None
    try:
        module = TranslationModule(model, tokenizer, DecodingConfig(**decoding))
        with tempfile.TemporaryDirectory() as directory:
            settings_path = os.path.join(directory, SETTINGS_FILE)
            with open(settings_path, "w", encoding="utf-8") as file:
                json.dump(_settings(model, tokenizer, **decoding), file, indent=2)
            signatures = {
                TEXT_SIGNATURE: module.translate.get_concrete_function(),
                IDS_SIGNATURE: module.translate_ids.get_concrete_function(),
            }
            # Only the state the signatures read: saving `module` itself would
            # trace and store its functions a second time.
            root = tf.Module()
            root.model_variables = module.model_variables
            root.sentencepiece = module.sentencepiece
            root.settings_file = tf.saved_model.Asset(settings_path)
            tf.saved_model.save(root, temporary, signatures=signatures)
        _check_no_xla(temporary)
        _replace_directory(temporary, path)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return path


def _export_in_tensorflow_process(model, tokenizer, path, decoding, overwrite):
    with tempfile.TemporaryDirectory() as directory:
        model_path = os.path.join(directory, MODEL_FILE)
        save_translation_model(model, tokenizer, model_path)
        export = TensorFlowExport(path, decoding, model=model_path, overwrite=overwrite)
        result = export.run(capture_stderr=True)
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        raise RuntimeError(
            "Exporting on the TensorFlow backend failed "
            f"(python -m {MODULE}, exit {result.returncode}): "
            + (lines[-1] if lines else "no error message")
        )
    return path
