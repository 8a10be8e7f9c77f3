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

from keras_transformer import __version__
from keras_transformer.export.run_export_command import run_export_command
from keras_transformer.export.save_translation_model import save_translation_model
from keras_transformer.export.translation_module import (
    IDS_SIGNATURE,
    TEXT_SIGNATURE,
    TranslationModule,
)
from keras_transformer.utils.numeric_settings import check_decoding_settings

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
    """The source length a served model keeps: `config.max_position` ids.

    With learned positions (Table 3 row E) decoder positions must stay below
    `max_position` too, so sources keep `max_position - max_extra_length - 1`.
    """
    if config.position_embedding == "learned":
        return config.max_position - max_extra_length - 1
    return config.max_position


def check_max_source_length(config, max_extra_length, max_source_length):
    """Raises `ValueError` if learned positions cannot reach `max_source_length` sources.

    With learned positions, sources of `max_source_length` ids and outputs
    `max_extra_length` longer must fit in `config.max_position`; sinusoidal
    positions have no limit.
    """
    limit = default_max_source_length(config, max_extra_length)
    if config.position_embedding == "learned" and max_source_length > limit:
        raise ValueError(
            f"With learned positions (max_position={config.max_position}) and "
            f"max_extra_length={max_extra_length}, `max_source_length` must be <= {limit}. "
            f"Received: {max_source_length}"
        )


def _check_arguments(model, tokenizer, beam_size, alpha, max_extra_length, max_source_length):
    check_decoding_settings(
        beam_size=beam_size,
        alpha=alpha,
        max_extra_length=max_extra_length,
        max_source_length=max_source_length,
    )
    check_max_source_length(model.config, max_extra_length, max_source_length)
    if not getattr(tokenizer, "has_vocabulary", False):
        raise ValueError("`tokenizer` has no SentencePiece model (no vocabulary).")


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
    *,
    beam_size=4,
    alpha=0.6,
    max_extra_length=50,
    max_source_length=None,
    overwrite=False,
    length_penalty_rule="gnmt",
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

    Translations equal `Translator(model, tokenizer, beam_size=...,
    alpha=..., max_extra_length=..., max_source_length=...).translate`.
    Invalid UTF-8 is replaced by U+FFFD; blank sentences give `""` and score
    0.0; sources longer than `max_source_length` ids (EOS included) are cut
    and flagged in `truncated`; an empty batch gives empty outputs. The
    decoding settings, special ids, model config and library versions are
    written to `assets/translation_settings.json`.

    The graph is traced on the TensorFlow backend, with no XLA op and no
    must-compile function. On another backend (JAX) the model and tokenizer
    are saved to a temporary `.keras` file and exported by
    `python -m keras_transformer.export` in a TensorFlow-backend subprocess:
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
        beam_size: int. Paper: 4.
        alpha: float. Length penalty exponent; paper: 0.6.
        max_extra_length: int. Output tokens beyond the source length;
            paper: 50.
        max_source_length: int or None. Source ids kept, EOS included;
            None: `default_max_source_length` (`config.max_position`, 512
            by default).
        overwrite: bool. Replace an existing `path`.
        length_penalty_rule: "gnmt" (paper: `((5 + length) / 6) ** alpha`)
            or "average" (`length ** alpha`, transformers' `length_penalty`).

    Returns:
        str, `path`.

    Example:

    >>> export_saved_model(model, tokenizer, "serving/translator/1")  # then, in a shell:
    docker run -p 8501:8501 -v "$PWD/serving/translator:/models/translator" \\
        -e MODEL_NAME=translator tensorflow/serving:<version>
    """
    if max_source_length is None:
        max_source_length = default_max_source_length(model.config, max_extra_length)
    _check_arguments(model, tokenizer, beam_size, alpha, max_extra_length, max_source_length)
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"Export directory already exists: {path} (pass overwrite=True).")
    decoding = {
        "beam_size": beam_size,
        "alpha": float(alpha),
        "length_penalty_rule": length_penalty_rule,
        "max_extra_length": max_extra_length,
        "max_source_length": max_source_length,
    }
    if keras.backend.backend() != "tensorflow":
        return _export_in_tensorflow_process(model, tokenizer, path, decoding, overwrite)
    if not model.built:
        model.build()
    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    temporary = os.path.join(parent, f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    os.mkdir(temporary)  # a dot name: TF Serving only loads numbered directories
    try:
        module = TranslationModule(model, tokenizer, **decoding)
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
        model_path = os.path.join(directory, "model.keras")
        save_translation_model(model, tokenizer, model_path)
        arguments = ["--model", model_path, "--output", path]
        for name, value in decoding.items():
            arguments += [f"--{name.replace('_', '-')}", str(value)]
        if overwrite:
            arguments.append("--overwrite")
        result = run_export_command(arguments, capture_stderr=True)
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        raise RuntimeError(
            "Exporting on the TensorFlow backend failed "
            f"(python -m keras_transformer.export, exit {result.returncode}): "
            + (lines[-1] if lines else "no error message")
        )
    return path
