"""Marian / OPUS-MT models of Hugging Face's `save_pretrained` folders, without transformers.

A folder holds `config.json` (a `MarianConfig`), `model.safetensors` or `pytorch_model.bin`
(the weights), and `source.spm`, `target.spm`, `vocab.json` (the tokenizer). Marian is the
paper's post-LN Transformer with these differences, each a `TransformerConfig` option:
biases on the attention projections, the sinusoid laid out as [sin | cos] halves from
position 0, the feed-forward activation of `activation_function` (OPUS-MT: swish), a
`final_logits_bias` added to the logits, LayerNorm epsilon 1e-5 (torch's default), EOS id 0,
padding the last id, and the decoder starting from the padding id.
"""

import json
import os

import numpy as np

from keras_transformer.models.transformer_config import TransformerConfig
from keras_transformer.pretrained.state_dict import StateDict
from keras_transformer.pretrained.tensor_names import bart_layer_names, layer_tensor_names
from keras_transformer.pretrained.torch_load_error import torch_load_error
from keras_transformer.pretrained.weight_setter import (
    Tensor,
    check_position_tables,
    set_weights,
)

NAME = "marian"
# What a `save_pretrained` folder holds besides its weights (one of WEIGHT_FILES).
FOLDER_FILES = ("config.json", "source.spm", "target.spm", "vocab.json")
FOLDER_HINT = f"a Marian folder ({', '.join(FOLDER_FILES)}, model.safetensors)"
MISSING_HINT = "a Marian folder (no source.spm)"
MARIAN_LAYERS = bart_layer_names("model.encoder", "model.decoder")

CONFIG_FILE = "config.json"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# `MarianConfig`'s defaults: `save_pretrained` writes only the settings that differ from them.
MARIAN_DEFAULTS = {
    "vocab_size": 58101,
    "decoder_vocab_size": None,
    "max_position_embeddings": 1024,
    "encoder_layers": 12,
    "encoder_ffn_dim": 4096,
    "encoder_attention_heads": 16,
    "decoder_layers": 12,
    "decoder_ffn_dim": 4096,
    "decoder_attention_heads": 16,
    "activation_function": "gelu",
    "d_model": 1024,
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "decoder_start_token_id": 58100,
    "scale_embedding": False,
    "pad_token_id": 58100,
    "eos_token_id": 0,
    "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True,
}
# Settings of older Marian configs that change the architecture; the value our model has.
FIXED_SETTINGS = {
    "normalize_before": False,
    "normalize_embedding": False,
    "layernorm_embedding": False,
    "add_final_layer_norm": False,
    "add_bias_logits": False,
    "static_position_embeddings": True,
}
ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
# torch.nn.LayerNorm's epsilon, which Marian's layers use.
LAYER_NORM_EPSILON = 1e-5


def read_marian_settings(directory):
    """`config.json` of a Marian folder with `MarianConfig`'s defaults filled in.

    Raises:
        FileNotFoundError: no config.json.
        ValueError: not JSON, or not a Marian config.
    """
    path = os.path.join(os.fspath(directory), CONFIG_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: not found (a save_pretrained folder has config.json)")
    try:
        with open(path, encoding="utf-8") as file:
            settings = json.load(file)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a JSON file ({error})") from None
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: expected a JSON object")
    model_type = settings.get("model_type", "marian")
    if model_type != "marian":
        raise ValueError(f"{path}: model_type is {model_type!r}, not 'marian'")
    return {**MARIAN_DEFAULTS, **settings}


def _single_id(settings, name, path):
    value = settings.get(name)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{path}: {name} must be one token id. Received: {value!r}")
    return value


def marian_special_ids(settings, path=CONFIG_FILE):
    """`{"pad_id", "eos_id", "bos_id"}` of a Marian config; bos is the decoder's start id."""
    return {
        "pad_id": _single_id(settings, "pad_token_id", path),
        "eos_id": _single_id(settings, "eos_token_id", path),
        "bos_id": _single_id(settings, "decoder_start_token_id", path),
    }


def _check_supported(s, path):
    for name, value in FIXED_SETTINGS.items():
        if s.get(name, value) != value:
            raise ValueError(f"{path}: {name}={s[name]!r} is not supported (only {value!r})")
    for setting in ("layers", "ffn_dim", "attention_heads"):
        encoder, decoder = s[f"encoder_{setting}"], s[f"decoder_{setting}"]
        if encoder != decoder:
            raise ValueError(
                f"{path}: encoder_{setting}={encoder} and decoder_{setting}={decoder} differ; "
                "this package's models have one value for both"
            )
    if not s["share_encoder_decoder_embeddings"] or s["decoder_vocab_size"] not in (
        None,
        s["vocab_size"],
    ):
        raise ValueError(
            f"{path}: separate source and target vocabularies are not supported "
            "(share_encoder_decoder_embeddings must be true)"
        )
    if s["activation_function"] not in ACTIVATIONS:
        raise ValueError(
            f"{path}: activation_function {s['activation_function']!r} is not supported "
            f"(one of {', '.join(ACTIVATIONS)})"
        )


def marian_transformer_config(settings, path=CONFIG_FILE):
    """The `TransformerConfig` of a Marian config (from `read_marian_settings`).

    Raises:
        ValueError: an architecture this package does not have; the message
            names the setting.
    """
    s = settings
    _check_supported(s, path)
    special = marian_special_ids(s, path)
    try:
        return TransformerConfig(
            vocabulary_size=s["vocab_size"],
            num_layers=s["encoder_layers"],
            d_model=s["d_model"],
            num_heads=s["encoder_attention_heads"],
            intermediate_dim=s["encoder_ffn_dim"],
            dropout=float(s["dropout"]),
            attention_dropout=float(s["attention_dropout"]),
            activation_dropout=float(s["activation_dropout"]),
            attention_bias=True,
            max_position=s["max_position_embeddings"],
            position_layout="halves",
            position_frequencies="paper",
            position_offset=0,
            activation=ACTIVATIONS[s["activation_function"]],
            final_logits_bias=True,
            share_embeddings=True,
            tie_output_projection=bool(s["tie_word_embeddings"]),
            scale_embeddings=bool(s["scale_embedding"]),
            layer_norm_epsilon=LAYER_NORM_EPSILON,
            pad_id=special["pad_id"],
        )
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: {error}") from None


def read_state_dict(directory):
    """The weights of a Marian folder as a `StateDict` of float32 numpy arrays.

    `model.safetensors` is read with the `safetensors` package and numpy;
    `pytorch_model.bin` needs torch (read with `weights_only=True`: no code
    from the file runs).

    Raises:
        FileNotFoundError: neither file.
        ImportError: only pytorch_model.bin, and torch is not installed.
        ValueError: the file cannot be read.
    """
    directory = os.fspath(directory)
    safetensors_path, torch_path = (os.path.join(directory, name) for name in WEIGHT_FILES)
    if os.path.isfile(safetensors_path):
        from safetensors.numpy import load_file

        try:
            tensors = load_file(safetensors_path)
        except Exception as error:
            message = " ".join(str(error).split())[:200]
            raise ValueError(
                f"{safetensors_path}: not a readable safetensors file ({message})"
            ) from None
        return StateDict(tensors, safetensors_path)
    if os.path.isfile(torch_path):
        return StateDict(_read_torch_file(torch_path), torch_path)
    raise FileNotFoundError(f"{directory}: no {' or '.join(WEIGHT_FILES)} in it")


def _read_torch_file(path):
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"{path}: reading pytorch_model.bin needs PyTorch (pip install "
            "'keras-transformer-mt[torch]'), or convert it to model.safetensors"
        ) from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise torch_load_error(path, error, "a state dict of tensors") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a state dict")
    return {name: tensor.float().numpy() for name, tensor in state.items()}


def _embedding_name(tensors, tied):
    """The name the embedding matrix is read from; its tied copies must equal it and go."""
    names = (
        "model.shared.weight",
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
    ) + (("lm_head.weight",) if tied else ())
    present = [name for name in names if name in tensors]
    if not present:
        raise ValueError(f"{tensors.source}: no tensor {names[0]!r}")
    embedding = tensors.tensors[present[0]]
    for other in present[1:]:  # the same matrix saved under its other names
        if not np.array_equal(tensors.take(other), embedding):
            raise ValueError(f"{tensors.source}: {other} differs from {present[0]}; expected tied")
    return present[0]


def tensor_names(config, embedding="model.shared.weight", logits_bias=True):
    """Marian's tensor-name map of a model of `config` (see weight_setter.py).

    Args:
        config: the model's `TransformerConfig`.
        embedding: str, the name the embedding matrix is saved under.
        logits_bias: bool, whether the file has `final_logits_bias`
            (transformers leaves an absent one at zero).
    """
    rule = "same" if logits_bias else "zeros"
    names = {
        "target_embedding": Tensor(embedding),
        "logits_bias": Tensor("final_logits_bias" if logits_bias else None, rule),
    }
    if not config.tie_output_projection:
        names["output_projection"] = Tensor("lm_head.weight", "linear")
    names.update(layer_tensor_names(config, MARIAN_LAYERS))
    return names


def set_marian_weights(model, tensors):
    """Puts a Marian state dict into a built `Seq2SeqTransformer` of its config.

    Raises:
        ValueError: a tensor missing, of another shape, or left over.
    """
    if not model.config.tie_output_projection and "lm_head.weight" not in tensors:
        raise ValueError(f"{tensors.source}: no tensor 'lm_head.weight'")
    embedding = _embedding_name(tensors, model.config.tie_output_projection)
    names = tuple(f"model.{stack}.embed_positions.weight" for stack in ("encoder", "decoder"))
    check_position_tables(model, tensors, names, "Marian's sinusoid table")
    if "final_logits_bias" in tensors:  # saved as (1, vocabulary)
        tensors.tensors["final_logits_bias"] = tensors.tensors["final_logits_bias"].reshape(-1)
    names = tensor_names(model.config, embedding, "final_logits_bias" in tensors)
    set_weights(model, names, tensors)


def load_marian_model(directory):
    """The `Seq2SeqTransformer` of a Marian folder, and its special ids.

    Args:
        directory: str or path-like, a `save_pretrained` folder.

    Returns:
        `(model, special_ids)`: the model with the folder's weights, and
        `{"pad_id", "eos_id", "bos_id"}` (bos: the decoder's start id).

    Raises:
        FileNotFoundError, ImportError, ValueError: as `read_marian_settings`,
            `read_state_dict` and `set_marian_weights`.
    """
    from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer

    path = os.path.join(os.fspath(directory), CONFIG_FILE)
    settings = read_marian_settings(directory)
    config = marian_transformer_config(settings, path)
    tensors = read_state_dict(directory)
    model = Seq2SeqTransformer(config, dtype="float32")
    model.build()
    set_marian_weights(model, tensors)
    return model, marian_special_ids(settings, path)


def import_marian(directory, output_path):
    """Writes a Marian / OPUS-MT folder as a `save_translation_model` file.

    Reads `config.json`, `model.safetensors` (or `pytorch_model.bin`, which
    needs torch) and the tokenizer files `source.spm`, `target.spm` and
    `vocab.json` (a `JointVocabularyTokenizer`); `transformers` is not
    needed. The file translates with `keras-transformer translate` (use
    `--length-penalty-rule average --alpha 1` to rank beams as transformers'
    `generate` does), and `export` and `train --init-from` take it.

    Args:
        directory: str or path-like, a `save_pretrained` folder.
        output_path: str or path-like ending in `.keras`, written atomically.

    Returns:
        str, `output_path`.

    Raises:
        FileNotFoundError: a file of the folder is missing.
        ImportError: only pytorch_model.bin, and torch is not installed.
        ValueError: an unsupported architecture or inconsistent files.

    Example:

    >>> import_marian("opus-mt-en-de", "opus-mt-en-de.keras")
    >>> model, tokenizer = load_translation_model("opus-mt-en-de.keras")
    """
    from keras_transformer.export.save_translation_model import save_translation_model

    if not str(output_path).endswith(".keras"):
        raise ValueError(f"the output must end with .keras. Received: {output_path}")
    model, tokenizer = marian_translation_model(directory)
    return save_translation_model(model, tokenizer, os.fspath(output_path))


def marian_translation_model(directory):
    """The model and tokenizer of a Marian / OPUS-MT folder, in memory (nothing written).

    Args:
        directory: str or path-like, a `save_pretrained` folder.

    Returns:
        `(model, tokenizer)`: a `Seq2SeqTransformer` with the folder's weights
        and its `JointVocabularyTokenizer`, as `import_marian` writes them.

    Raises:
        FileNotFoundError, ImportError, ValueError: as `import_marian`.

    Example:

    >>> model, tokenizer = marian_translation_model("opus-mt-en-de")
    """
    from keras_transformer.text.joint_vocabulary_tokenizer import JointVocabularyTokenizer

    model, special = load_marian_model(directory)
    tokenizer = JointVocabularyTokenizer.from_marian_directory(directory)
    ours = {"pad_id": tokenizer.pad_id, "eos_id": tokenizer.eos_id, "bos_id": tokenizer.bos_id}
    if ours != special:
        raise ValueError(f"{directory}: the tokenizer's ids {ours} differ from config.json's")
    if tokenizer.vocabulary_size() != model.config.vocabulary_size:
        raise ValueError(
            f"{directory}: vocab.json has {tokenizer.vocabulary_size()} pieces, config.json's "
            f"vocab_size is {model.config.vocabulary_size}"
        )
    return model, tokenizer


def accepts_file(path):
    """Whether a file given as a model is this format's: never (a Marian model is a folder)."""
    return False


def find_in_folder(name, folder):
    """`folder` if it is a Marian folder, else None.

    Raises:
        ValueError: a Marian folder with files missing.
    """
    present = [file for file in FOLDER_FILES if os.path.isfile(os.path.join(folder, file))]
    if not set(present) - {"config.json"}:  # a run directory has a config.json too
        return None
    missing = [file for file in FOLDER_FILES if file not in present]
    if not any(os.path.isfile(os.path.join(folder, file)) for file in WEIGHT_FILES):
        missing.append(" or ".join(WEIGHT_FILES))
    if missing:
        raise ValueError(
            f"{name}: missing {', '.join(missing)}; expected a Marian folder as "
            "save_pretrained writes it"
        )
    return folder


translation_model = marian_translation_model
