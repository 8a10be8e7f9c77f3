import gzip
import json
import os

import keras
import pytest
import sentencepiece as spm
import tensorflow as tf
from conftest import BACKEND_INDEPENDENT
from sentencepiece import sentencepiece_model_pb2

from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    ParallelCorpus,
    SubwordTokenizer,
    train_vocabulary,
    train_vocabulary_from_files,
)

pytestmark = BACKEND_INDEPENDENT


@pytest.fixture(scope="module")
def corpus():
    english, german = generate_synthetic_pairs(1500, seed=11)
    return ParallelCorpus(english, german)


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return train_vocabulary(corpus, vocabulary_size=400)


@pytest.fixture(scope="module")
def held_out():
    english, german = generate_synthetic_pairs(40, seed=99)
    return english + german


def reference_processor(tokenizer):
    return spm.SentencePieceProcessor(model_proto=tokenizer.proto)


def trainer_spec(tokenizer):
    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(tokenizer.proto)
    return model.trainer_spec


def test_round_trip_and_ids_match_sentencepiece(tokenizer, held_out):
    reference = reference_processor(tokenizer)
    expected = reference.encode(held_out)
    assert tokenizer.tokenize(held_out) == expected
    assert tokenizer.detokenize(expected) == held_out
    assert all(PAD_ID not in ids and UNK_ID not in ids for ids in expected)
    assert tokenizer.vocabulary_size() == 400


def test_runs_inside_tf_data(tokenizer, held_out):
    dataset = tf.data.Dataset.from_tensor_slices(held_out).batch(16).map(tokenizer)
    ids = [row for batch in dataset for row in batch.to_list()]
    assert ids == reference_processor(tokenizer).encode(held_out)
    texts = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(ids)).batch(16)
    texts = texts.map(tokenizer.detokenize)
    decoded = [text.decode("utf-8") for batch in texts for text in batch.numpy()]
    assert decoded == held_out


def test_survives_set_random_seed(held_out):
    # tf.random.set_seed clears TensorFlow's eager kernel cache, which used to
    # delete tensorflow-text's kernel-owned SentencePiece resource.
    tokenizer = train_vocabulary(held_out, 100)
    keras.utils.set_random_seed(7)
    dataset = tf.data.Dataset.from_tensor_slices(held_out).batch(8).map(tokenizer)
    ids = [row for batch in dataset for row in batch.to_list()]
    assert ids == reference_processor(tokenizer).encode(held_out)


def test_special_ids_and_pieces(tokenizer):
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    pieces = [tokenizer.id_to_token(i) for i in range(4)]
    assert pieces == ["<pad>", "<unk>", "<s>", "</s>"]
    # keras-hub's attribute names point at the same ids.
    assert (tokenizer.pad_token_id, tokenizer.start_token_id, tokenizer.end_token_id) == (0, 2, 3)
    framed = SubwordTokenizer(proto=tokenizer.proto, add_bos=True, add_eos=True)
    ids = framed.tokenize("Der Hund.")
    assert int(ids[0]) == BOS_ID and int(ids[-1]) == EOS_ID
    dense = SubwordTokenizer(proto=tokenizer.proto, sequence_length=40)(["Der Hund."])
    assert keras.ops.convert_to_numpy(dense)[0, -1] == PAD_ID


def test_config_round_trip_and_keras_serialization(tokenizer, held_out):
    config = tokenizer.get_config()
    json.dumps(config)  # plain JSON: the model travels as base64 text
    rebuilt = SubwordTokenizer.from_config(config)
    assert rebuilt.proto == tokenizer.proto
    assert rebuilt.tokenize(held_out) == tokenizer.tokenize(held_out)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(tokenizer))
    assert isinstance(restored, SubwordTokenizer)
    assert restored.get_config() == config


def test_exported_graph_tokenizes_like_python(tokenizer, held_out, tmp_path):
    module = tf.Module()
    module.sentencepiece = tokenizer.tf_trackable  # tracks the resource on every backend
    module.encode = tf.function(
        lambda texts: tokenizer(texts).to_tensor(default_value=PAD_ID),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "tokenizer"))
    loaded = tf.saved_model.load(str(tmp_path / "tokenizer"))
    ids = loaded.encode(tf.constant(held_out[:5])).numpy()
    expected = reference_processor(tokenizer).encode(held_out[:5])
    for row, reference in zip(ids, expected, strict=True):
        assert list(row[: len(reference)]) == reference
        assert not row[len(reference) :].any()


def test_same_seed_same_vocabulary_and_sampling_uses_seed(corpus):
    first = train_vocabulary(corpus, 300, seed=1, max_sentences=500).get_vocabulary()
    again = train_vocabulary(corpus, 300, seed=1, max_sentences=500).get_vocabulary()
    other = train_vocabulary(corpus, 300, seed=2, max_sentences=500).get_vocabulary()
    assert first == again
    assert first != other


def test_bpe_does_not_depend_on_threads(corpus):
    one = train_vocabulary(corpus, 300, num_threads=1).get_vocabulary()
    four = train_vocabulary(corpus, 300, num_threads=4).get_vocabulary()
    assert one == four


def test_lowercase_vocabulary_case_folds_in_python_and_in_the_graph(corpus, tmp_path):
    from keras_transformer.experiment.run_phases import vocabulary
    from keras_transformer.experiment.settings.data_config import DataConfig
    from keras_transformer.experiment.settings.experiment_config import ExperimentConfig

    config = ExperimentConfig(data=DataConfig(vocabulary_size=300, vocabulary_lowercase=True))
    folded = vocabulary(config, corpus, str(tmp_path))
    assert (tmp_path / "vocabulary.model").exists()
    cased = [sentence for sentence in corpus.targets[:50] if sentence != sentence.lower()]
    assert cased
    lower = [sentence.lower() for sentence in cased]
    ids = folded.tokenize(cased)
    assert ids == folded.tokenize(lower)
    assert folded.detokenize(ids) == lower
    # The tf.data and SavedModel path (tf-text) applies the same normalization.
    dataset = tf.data.Dataset.from_tensor_slices(cased).batch(16).map(folded)
    graph_ids = [row for batch in dataset for row in batch.to_list()]
    assert graph_ids == ids
    # No piece of the folded vocabulary has an upper-case letter; the default keeps case.
    assert not any(piece != piece.lower() for piece in folded.get_vocabulary())
    cased_config = config.replace(data={"vocabulary_lowercase": False})
    kept = vocabulary(cased_config, corpus, str(tmp_path / "cased"))
    assert kept.tokenize(cased) != ids


def test_unigram_byte_fallback_and_coverage(corpus):
    sentences = [*corpus.sources, *corpus.targets, "Ein Юрий war hier."]
    unigram = train_vocabulary(sentences, 400, model_type="unigram", byte_fallback=True)
    spec = trainer_spec(unigram)
    assert spec.model_type == sentencepiece_model_pb2.TrainerSpec.UNIGRAM
    assert spec.byte_fallback and spec.pad_id == 0 and spec.eos_id == 3
    unseen = "Der Hund sieht 日本."
    ids = unigram.tokenize(unseen)
    assert UNK_ID not in ids and unigram.detokenize(ids) == unseen
    # Without byte fallback, characters below the coverage threshold become <unk>.
    narrow = train_vocabulary(sentences, 400, character_coverage=0.999)
    assert UNK_ID in list(narrow.tokenize("Юрий"))
    assert trainer_spec(narrow).character_coverage == pytest.approx(0.999)


def test_files_gzip_and_atomic_output(corpus, tmp_path):
    plain = tmp_path / "train.en"
    plain.write_text("\n".join(corpus.sources) + "\n", encoding="utf-8")
    packed = tmp_path / "train.de.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as file:
        file.write("\n".join(corpus.targets) + "\n")
    output = tmp_path / "vocab" / "ende.model"
    from_files = train_vocabulary_from_files([plain, packed], 300, output_path=output)
    from_corpus = train_vocabulary(corpus, 300)
    assert from_files.get_vocabulary() == from_corpus.get_vocabulary()
    assert SubwordTokenizer(proto=str(output)).proto == from_files.proto
    assert os.listdir(output.parent) == ["ende.model"]

    before = output.read_bytes()
    with pytest.raises(ValueError, match=r"vocabulary_size=99999.*too high"):
        train_vocabulary(corpus, 99999, output_path=output)
    assert output.read_bytes() == before
    assert os.listdir(output.parent) == ["ende.model"]


def test_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.de"
    bad.write_bytes("gut\nauch gut\nkaputt \xff\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"bad\.de.*line 3"):
        train_vocabulary_from_files([bad], 50, output_path=tmp_path / "v.model")
    with pytest.raises(FileNotFoundError, match=r"missing\.en"):
        train_vocabulary_from_files([tmp_path / "missing.en"], 50)
    (tmp_path / "empty.en").write_text("")
    with pytest.raises(ValueError, match="empty"):
        train_vocabulary_from_files([tmp_path / "empty.en"], 50)
    assert not (tmp_path / "v.model").exists()


@pytest.mark.parametrize(
    ("sentences", "kwargs", "error", "match"),
    [
        ([], {}, ValueError, "empty"),
        (["", "  "], {}, ValueError, "All 2 sentences are empty"),
        (["a b", 3], {}, TypeError, "item 1 of type int"),
        ("a sentence", {}, TypeError, "train_vocabulary_from_files"),
        (["a"], {"model_type": "word"}, ValueError, "model_type"),
        (["a"], {"character_coverage": 0.0}, ValueError, "character_coverage"),
        (["a"], {"vocabulary_size": 4}, ValueError, "vocabulary_size"),
        (["a"], {"max_sentences": 0}, ValueError, "max_sentences"),
    ],
)
def test_bad_arguments(sentences, kwargs, error, match):
    kwargs = {"vocabulary_size": 20, **kwargs}
    with pytest.raises(error, match=match):
        train_vocabulary(sentences, **kwargs)


def test_rejects_models_with_other_special_ids(corpus, tmp_path):
    import io

    buffer = io.BytesIO()
    # SentencePiece's defaults: unk=0, bos=1, eos=2, no pad.
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus.sources), model_writer=buffer, vocab_size=200, minloglevel=2
    )
    with pytest.raises(ValueError, match=r"pad_id=0.*Received a model with pad_id=-1, unk_id=0"):
        SubwordTokenizer(proto=buffer.getvalue())
    with pytest.raises(FileNotFoundError, match=r"nope\.model"):
        SubwordTokenizer(proto=str(tmp_path / "nope.model"))
