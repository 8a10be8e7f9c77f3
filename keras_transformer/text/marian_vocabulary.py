"""Reading the tokenizer files of a Hugging Face Marian folder (`save_pretrained`)."""

import json
import os

from keras_transformer.text.sentencepiece_file import read_sentencepiece_model

SOURCE_MODEL_FILE = "source.spm"
TARGET_MODEL_FILE = "target.spm"
VOCABULARY_FILE = "vocab.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
MODEL_CONFIG_FILE = "config.json"
# MarianTokenizer's default special pieces.
DEFAULT_PIECES = {"unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>"}


def _read_json(path, required=True):
    if not os.path.isfile(path):
        if required:
            raise FileNotFoundError(f"Marian folder file not found: {path}")
        return {}
    with open(path, encoding="utf-8") as file:
        try:
            return json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from None


def _read_sentencepiece(path, side):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Marian folder file not found: {path}")
    expected = f"the {side} tokenizer model of a Marian folder, as save_pretrained writes it"
    return read_sentencepiece_model(path, expected)


def _piece_name(value):
    """A tokenizer_config.json token entry: a str, or an AddedToken dict with `content`."""
    return value["content"] if isinstance(value, dict) else value


def vocabulary_list(mapping, path):
    """vocab.json's {piece: id} as the list of pieces by id; ids must be 0..n-1."""
    if not isinstance(mapping, dict) or not mapping:
        raise ValueError(f"{path}: expected a non-empty JSON object of piece -> id")
    pieces = [None] * len(mapping)
    for piece, index in mapping.items():
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(pieces):
            raise ValueError(
                f"{path}: ids must be 0 to {len(pieces) - 1}, each once. Received {piece!r}: "
                f"{index!r}"
            )
        if pieces[index] is not None:
            raise ValueError(f"{path}: id {index} is given to {pieces[index]!r} and {piece!r}")
        pieces[index] = piece
    return pieces


def _special_id(name, config, key, mapping, piece, path):
    """`config[key]` where config.json gives it, checked against the vocabulary's piece."""
    by_piece = mapping.get(piece)
    value = config.get(key)
    if value is None:
        if by_piece is None:
            raise ValueError(f"{path}: no {piece!r} piece for the {name}")
        return by_piece
    if by_piece is not None and by_piece != value:
        raise ValueError(
            f"config.json's {key}={value} but {path} gives {piece!r} the id {by_piece}: "
            "the tokenizer and model files disagree"
        )
    return value


def read_marian_vocabulary(directory):
    """`JointVocabularyTokenizer` arguments from a Marian folder.

    Args:
        directory: str, a folder with `source.spm`, `target.spm`,
            `vocab.json`, and optionally `config.json` and
            `tokenizer_config.json`.

    Returns:
        dict with `source_proto`, `target_proto` (bytes), `vocabulary` (list
        of str) and `pad_id`, `unk_id`, `bos_id`, `eos_id`.
    """
    tokenizer_config = _read_json(os.path.join(directory, TOKENIZER_CONFIG_FILE), required=False)
    if tokenizer_config.get("separate_vocabs"):
        raise ValueError(
            f"{os.path.join(directory, TOKENIZER_CONFIG_FILE)}: separate source and target "
            "vocabularies (separate_vocabs) are not supported; only one joint vocab.json"
        )
    config = _read_json(os.path.join(directory, MODEL_CONFIG_FILE), required=False)
    path = os.path.join(directory, VOCABULARY_FILE)
    mapping = _read_json(path)
    vocabulary = vocabulary_list(mapping, path)
    size = config.get("vocab_size")
    if size is not None and size != len(vocabulary):
        raise ValueError(
            f"config.json's vocab_size={size} but {path} holds {len(vocabulary)} pieces"
        )
    pieces = {
        name: _piece_name(tokenizer_config.get(name) or default)
        for name, default in DEFAULT_PIECES.items()
    }
    if pieces["unk_token"] not in mapping:
        raise ValueError(f"{path}: no {pieces['unk_token']!r} piece for unknown pieces")
    pad_id = _special_id("padding", config, "pad_token_id", mapping, pieces["pad_token"], path)
    eos_id = _special_id("end", config, "eos_token_id", mapping, pieces["eos_token"], path)
    bos_id = config.get("decoder_start_token_id")
    return {
        "source_proto": _read_sentencepiece(os.path.join(directory, SOURCE_MODEL_FILE), "source"),
        "target_proto": _read_sentencepiece(os.path.join(directory, TARGET_MODEL_FILE), "target"),
        "vocabulary": vocabulary,
        "pad_id": pad_id,
        "unk_id": mapping[pieces["unk_token"]],
        "bos_id": pad_id if bos_id is None else bos_id,
        "eos_id": eos_id,
    }
