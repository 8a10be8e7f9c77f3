"""MosesBpeTokenizer: Moses and subword-nmt BPE as fairseq's WMT models apply them.

The expected units are worked out by hand from tiny codes, and compared with subword-nmt's
own `apply_bpe` command on Moses-tokenized text written out by hand.
"""

import subprocess
import sys

import keras
import pytest
from conftest import BACKEND_INDEPENDENT

pytest.importorskip("subword_nmt")
pytest.importorskip("torch")  # fairseq_reference

import fairseq_reference as ref

from keras_transformer.text.moses_bpe_tokenizer import MosesBpeTokenizer

CODES, EN_WORDS, DE_WORDS = ref.CODES, ref.EN_WORDS, ref.DE_WORDS


def _tokenizer(**overrides):
    symbols = list(ref.SPECIAL_SYMBOLS) + EN_WORDS
    settings = {"source_language": "en", "target_language": "en"}
    settings.update(overrides)
    return MosesBpeTokenizer(CODES, symbols, pad_id=1, unk_id=3, bos_id=2, eos_id=2, **settings)


@BACKEND_INDEPENDENT
def test_bpe_tokenization_matches_hand_segmentation():
    tokenizer = _tokenizer()
    ids = tokenizer(["low newer, hello world!", "lower"])
    ids_of = {unit: index for index, unit in enumerate(tokenizer.get_vocabulary())}
    # Moses splits off "," and "!". The lowest-ranked merge first, a word ending in </w>:
    # low: (l o) -> lo, (lo w</w>) -> low. newer: (e r</w>) -> er, (n e), (ne w) -> new@@ er.
    # hello: (h e), (he l), (l o</w>), (hel lo</w>) -> hello. world: (w o), (wo r), no merge
    # for "l d</w>" -> wor@@ l@@ d. lower: (l o), (e r</w>); "lo w" is not the word-final
    # "lo w</w>" -> lo@@ w@@ er, where "lo@@" and "w@@" are not in the vocabulary: <unk>.
    expected_units = [
        ["low", "new@@", "er", ",", "hello", "wor@@", "l@@", "d", "!"],
        ["lo@@", "w@@", "er"],
    ]
    expected = [[ids_of.get(u, 3) for u in units] for units in expected_units]
    assert ids == expected
    assert tokenizer("low") == [ids_of["low"]]
    # Target ids back to text: separators removed, Moses-detokenized; specials dropped.
    assert tokenizer.detokenize([expected[0] + [2], [1, 3, 2]]) == [
        "low newer, hello world!",
        "<unk>",
    ]


@BACKEND_INDEPENDENT
def test_bpe_matches_subword_nmt_command_and_moses_escaping(tmp_path):
    """The same units as subword-nmt's own `apply_bpe` on Moses-tokenized text."""
    codes = tmp_path / "codes"
    codes.write_text(CODES, encoding="utf-8")
    text = "hello world & newer low-lower"
    # Moses with fairseq's settings escapes & and splits dashes with @-@.
    tokenized = "hello world &amp; newer low @-@ lower"
    result = subprocess.run(
        [sys.executable, "-m", "subword_nmt.apply_bpe", "-c", str(codes)],
        input=tokenized + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    vocabulary = list(ref.SPECIAL_SYMBOLS) + sorted(set(result.stdout.split()))
    tokenizer = MosesBpeTokenizer(
        CODES, vocabulary, source_language="en", pad_id=1, unk_id=3, bos_id=2, eos_id=2
    )
    units = [vocabulary[i] for i in tokenizer([text])[0]]
    assert units == result.stdout.split()


@BACKEND_INDEPENDENT
def test_tokenizer_serializes_and_refuses_export():
    tokenizer = _tokenizer(target_vocabulary=list(ref.SPECIAL_SYMBOLS) + DE_WORDS)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(tokenizer))
    assert isinstance(restored, MosesBpeTokenizer)
    assert restored.get_config() == tokenizer.get_config()
    assert restored(["hello world"]) == tokenizer(["hello world"])
    assert restored.vocabulary_size() == len(DE_WORDS) + 4
    assert restored.id_to_token(4) == "hallo"
    with pytest.raises(ValueError, match="cannot be exported"):
        restored.tf_trackable  # noqa: B018
    with pytest.raises(ValueError, match="fastBPE"):
        MosesBpeTokenizer("a b 12\n", ["<s>"] * 4, pad_id=1, unk_id=3, bos_id=2, eos_id=2)
