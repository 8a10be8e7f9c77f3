"""`JointVocabularyTokenizer`: Marian's two SentencePiece models over one vocabulary.

Checked against transformers' `MarianTokenizer` on the same files: ids of both sides (special
pieces and language codes in the text included) and decoded text; and in `tf.data`, the input
pipeline, its config and a Marian folder's files. tests/test_joint_vocabulary_exports.py
translates with it through the `.keras` file, `Translator`, the SavedModel and CTranslate2.
"""

import json
import os
import random

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import BACKEND_INDEPENDENT
from marian_folder import EDGE_CASES, write_marian_tokenizer_files

from keras_transformer.data.tokenized_corpus import TokenizedCorpus
from keras_transformer.decoding.translator import to_token_lists
from keras_transformer.text import JointVocabularyTokenizer, ParallelCorpus, TranslationTokenizer


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    directory = tmp_path_factory.mktemp("marian")
    english, german, vocabulary = write_marian_tokenizer_files(directory)
    tokenizer = JointVocabularyTokenizer.from_marian_directory(directory)
    return directory, tokenizer, english, german, vocabulary


@pytest.fixture(scope="module")
def marian_tokenizer(marian):
    transformers = pytest.importorskip("transformers")
    return transformers.MarianTokenizer.from_pretrained(str(marian[0]))


@BACKEND_INDEPENDENT  # the tokenizer runs TensorFlow ops on any backend
def test_reads_the_marian_layout(marian):
    _, tokenizer, _, _, vocabulary = marian
    assert isinstance(tokenizer, TranslationTokenizer)
    assert tokenizer.vocabulary_size() == len(vocabulary)
    assert (tokenizer.eos_id, tokenizer.unk_id) == (0, 1)
    assert tokenizer.pad_id == tokenizer.bos_id == len(vocabulary) - 1
    assert tokenizer.id_to_token(tokenizer.pad_id) == "<pad>"
    assert tokenizer.token_to_id("no such piece") == tokenizer.unk_id


@BACKEND_INDEPENDENT  # the tokenizer runs TensorFlow ops on any backend
def test_ids_equal_marian_tokenizer_on_both_sides(marian, marian_tokenizer):
    _, tokenizer, english, german, _ = marian
    sources = english[:200] + EDGE_CASES
    theirs = [ids[:-1] for ids in marian_tokenizer(sources).input_ids]  # without </s>
    assert to_token_lists(tokenizer(sources)) == theirs
    targets = german[:200] + EDGE_CASES
    theirs = [ids[:-1] for ids in marian_tokenizer(text_target=targets).input_ids]
    assert to_token_lists(tokenizer.tokenize_target(targets)) == theirs
    # The sides differ: the same text has other ids with the other model.
    assert to_token_lists(tokenizer.tokenize_target(english[:20])) != to_token_lists(
        tokenizer(english[:20])
    )
    # One str gives one row.
    assert list(np.asarray(tokenizer(english[0]))) == to_token_lists(tokenizer([english[0]]))[0]


@BACKEND_INDEPENDENT  # the tokenizer runs TensorFlow ops on any backend
def test_decoded_text_equals_marian_tokenizer(marian, marian_tokenizer):
    _, tokenizer, _, german, vocabulary = marian
    rng = random.Random(0)
    # Real targets, and any ids at all: special ids, the other side's pieces, the code.
    rows = to_token_lists(tokenizer.tokenize_target(german[:100]))
    rows += [[rng.randrange(len(vocabulary)) for _ in range(rng.randrange(12))] for _ in range(300)]
    ours = tokenizer.detokenize(rows)
    assert ours[: len(german[:100])] == german[:100]  # this corpus round-trips
    for use_source_tokenizer in (False, True):  # transformers 5 decodes with the source model
        theirs = [
            marian_tokenizer.decode(
                row, skip_special_tokens=True, use_source_tokenizer=use_source_tokenizer
            )
            for row in rows
        ]
        assert ours == theirs
    assert tokenizer.detokenize(rows[0]) == ours[0]  # one row gives one str


@BACKEND_INDEPENDENT  # the tokenizer runs TensorFlow ops on any backend
def test_same_ids_in_tf_data_and_after_reseeding(marian):
    _, tokenizer, english, german, _ = marian
    eager = to_token_lists(tokenizer(english[:50]))
    keras.utils.set_random_seed(7)  # clears TensorFlow's kernel cache: resources must survive
    dataset = tf.data.Dataset.from_tensor_slices(english[:50]).batch(16).map(tokenizer)
    assert [row for batch in dataset for row in batch.to_list()] == eager
    targets = tf.data.Dataset.from_tensor_slices(german[:50]).batch(16)
    texts = targets.map(tokenizer.tokenize_target).map(tokenizer.tf_trackable.detokenize)
    assert [t.decode() for batch in texts for t in batch.numpy()] == german[:50]
    # The input pipeline tokenizes targets with the target model.
    corpus = TokenizedCorpus.from_corpus(ParallelCorpus(english[:50], german[:50]), tokenizer)
    targets = to_token_lists(tokenizer.tokenize_target(german[:50]))
    assert [corpus.target(i).tolist() for i in range(50)] == targets
    assert [corpus.source(i).tolist() for i in range(50)] == eager


@BACKEND_INDEPENDENT  # the tokenizer runs TensorFlow ops on any backend
def test_config_round_trip_and_bad_arguments(marian):
    _, tokenizer, english, _, vocabulary = marian
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(tokenizer)))
    restored = keras.saving.deserialize_keras_object(config)  # safe mode: no file read
    assert isinstance(restored, JointVocabularyTokenizer)
    assert restored.get_config() == tokenizer.get_config()
    assert to_token_lists(restored(english[:20])) == to_token_lists(tokenizer(english[:20]))
    arguments = {
        name: getattr(tokenizer, name)
        for name in ("source_proto", "target_proto", "vocabulary", "pad_id", "unk_id")
    }
    ids = dict(bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
    with pytest.raises(ValueError, match="`eos_id` must be an id of the vocabulary"):
        JointVocabularyTokenizer(**arguments, bos_id=0, eos_id=len(vocabulary))
    with pytest.raises(ValueError, match="more than once"):
        JointVocabularyTokenizer(**{**arguments, "vocabulary": vocabulary + ["<unk>"]}, **ids)
    with pytest.raises(ValueError, match="not a valid SentencePiece model"):
        JointVocabularyTokenizer(**{**arguments, "source_proto": b"x" * 10}, **ids)


def _copy_folder(directory, destination, **changes):
    """The Marian folder's files in `destination`, with JSON files replaced by `changes`."""
    os.makedirs(destination)
    for name in os.listdir(directory):
        with open(os.path.join(directory, name), "rb") as source:
            data = source.read()
        if name in changes:
            data = json.dumps(changes[name]).encode()
        with open(os.path.join(destination, name), "wb") as file:
            file.write(data)
    for name, content in changes.items():
        if content is None:
            os.remove(os.path.join(destination, name))
        elif not os.path.exists(os.path.join(destination, name)):
            with open(os.path.join(destination, name), "w", encoding="utf-8") as file:
                json.dump(content, file)
    return destination


@BACKEND_INDEPENDENT  # the tokenizer runs TensorFlow ops on any backend
def test_marian_folder_errors_name_the_file(marian, tmp_path):
    directory, *_, vocabulary = marian
    mapping = {piece: index for index, piece in enumerate(vocabulary)}
    gap = {**mapping, "<pad>": len(vocabulary) + 3}
    pad = len(vocabulary) - 1
    cases = [
        ({"source.spm": None}, FileNotFoundError, "source.spm"),
        ({"vocab.json": gap}, ValueError, "vocab.json: ids must be 0 to"),
        ({"config.json": {"pad_token_id": 0, "eos_token_id": 0}}, ValueError, "disagree"),
        ({"config.json": {"vocab_size": 9}}, ValueError, "vocab_size=9"),
        ({"tokenizer_config.json": {"separate_vocabs": True}}, ValueError, "separate_vocabs"),
    ]
    for index, (changes, error, message) in enumerate(cases):
        folder = _copy_folder(directory, tmp_path / str(index), **changes)
        with pytest.raises(error, match=message):
            JointVocabularyTokenizer.from_marian_directory(folder)
    # config.json's ids are used where it gives them: here another decoder start.
    config = {"pad_token_id": pad, "eos_token_id": 0, "decoder_start_token_id": 2}
    folder = _copy_folder(directory, tmp_path / "start", **{"config.json": config})
    assert JointVocabularyTokenizer.from_marian_directory(folder).bos_id == 2
