import keras
import numpy as np
import pytest
from conftest import small_config, to_numpy

from keras_transformer import Seq2SeqTransformer
from keras_transformer.decoding import Translator, build_beam_search
from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import train_vocabulary


def detokenize(tokenizer, ids):
    text = tokenizer.detokenize([ids])
    text = (text.numpy() if hasattr(text, "numpy") else np.asarray(text))[0]
    return text.decode("utf-8") if isinstance(text, bytes) else str(text)


@pytest.fixture(scope="module")
def tokenizer_and_model():
    english, german = generate_synthetic_pairs(300, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=160)
    keras.utils.set_random_seed(11)
    return tokenizer, Seq2SeqTransformer(small_config(160)), english


def test_translate_restores_order_and_matches_one_by_one_decoding(tokenizer_and_model):
    tokenizer, model, english = tokenizer_and_model
    # Sources of distinct lengths (4 to 43 ids with EOS), shuffled, with blanks between.
    sentences = [
        english[5],
        "",
        english[0][:12],
        english[2][:10],
        "   ",
        english[1][:5],
        english[3][:8],
    ]
    # batch_tokens=32: three batches, (batch, bucket) = (3 -> 4, 8), (1, 16), (1, 64), so
    # results come back in a new order both across batches and within one.
    translator = Translator(model, tokenizer, max_extra_length=3, batch_tokens=32)
    search, shapes = translator._search, []
    translator._search = lambda ids: shapes.append(ids.shape) or search(ids)
    translations, scores = translator.translate(sentences, return_scores=True)
    assert sorted(shapes) == [(1, 16), (1, 64), (4, 8)]  # batches may decode side by side
    assert translations[1] == "" and translations[4] == ""
    # Every sentence translates differently, so any mix-up of the order is seen below.
    assert len(set(translations) - {""}) == 5

    search = build_beam_search(
        model, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id, max_extra_length=3
    )
    for sentence, translation, score in zip(sentences, translations, scores, strict=True):
        if not sentence.strip():
            continue
        ids = [*to_numpy(tokenizer([sentence])[0]).tolist(), tokenizer.eos_id]
        tokens, expected_scores = search(np.array([ids], "int32"))
        expected = [int(t) for t in to_numpy(tokens)[0, 0] if t != 0]
        assert translation == detokenize(tokenizer, expected)
        assert score == pytest.approx(float(to_numpy(expected_scores)[0, 0]), abs=1e-4)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="counts tf.function traces")
def test_tensorflow_traces_one_search_for_every_batch_shape(tokenizer_and_model, monkeypatch):
    from keras_transformer import backend

    tokenizer, model, english = tokenizer_and_model
    # batch_tokens=32 as above: batches of shapes (4, 8), (1, 16) and (1, 64).
    sentences = [english[5], english[0][:12], english[2][:10], english[1][:5], english[3][:8]]
    encode, traces = model.encode, []  # a compiled search runs `encode` in Python when traced
    monkeypatch.setattr(model, "encode", lambda *a, **k: traces.append(1) or encode(*a, **k))
    compiled = Translator(model, tokenizer, max_extra_length=3, batch_tokens=32)
    translations, scores = compiled.translate(sentences, return_scores=True)
    assert len(traces) == 1
    # The second path: the same search run eagerly, op by op.
    monkeypatch.setattr(backend, "compile_search", lambda function, variables: function)
    eager = Translator(model, tokenizer, max_extra_length=3, batch_tokens=32)
    eager_translations, eager_scores = eager.translate(sentences, return_scores=True)
    assert len(traces) == 1 + 3  # one batch of each shape
    assert translations == eager_translations
    np.testing.assert_allclose(scores, eager_scores, atol=1e-5)


@pytest.mark.skipif(keras.backend.backend() == "torch", reason="torch decodes one batch at a time")
def test_batches_decoded_side_by_side_equal_one_at_a_time(tokenizer_and_model, monkeypatch):
    import contextlib
    import threading
    import time

    from keras_transformer import backend

    tokenizer, model, english = tokenizer_and_model
    # Twelve batches of two, in three shapes: new shapes trace, known ones only run.
    sentences = [english[i][: 6 + 3 * (i % 7)] for i in range(24)]
    assert backend.decoding_workers() == (3 if backend.is_jax() else 2)  # on the CPU
    lock, running, overlaps, tracing, traces = threading.Lock(), set(), [], [0], []
    # Tracing a search enters the model's layers (`fixed_decoder_weights`): never two at once.
    fixed_weights = model.fixed_decoder_weights

    @contextlib.contextmanager
    def watched_weights():
        with lock:
            tracing[0] += 1
            traces.append(tracing[0])
        time.sleep(0.02)  # long enough for another trace to start, if one could
        try:
            with fixed_weights():
                yield
        finally:
            with lock:
                tracing[0] -= 1

    monkeypatch.setattr(model, "fixed_decoder_weights", watched_weights)
    translator = Translator(model, tokenizer, max_extra_length=3, batch_size=2)
    search = translator._search

    def watched(ids):
        me = threading.get_ident()
        with lock:
            overlaps.extend((me, other) for other in running)
            running.add(me)
        time.sleep(0.05)  # long enough for the other worker to start a batch
        try:
            return search(ids)
        finally:
            with lock:
                running.discard(me)

    translator._search = watched
    side_by_side = translator.translate(sentences, return_scores=True)
    monkeypatch.setattr(backend, "decoding_workers", lambda: 1)
    one_at_a_time = Translator(model, tokenizer, max_extra_length=3, batch_size=2).translate(
        sentences, return_scores=True
    )
    assert side_by_side[0] == one_at_a_time[0]
    np.testing.assert_allclose(side_by_side[1], one_at_a_time[1], atol=1e-5)
    assert overlaps, "no two batches decoded at the same time"
    assert traces and max(traces) == 1, traces


def test_truncation_is_counted_and_bad_arguments_rejected(tokenizer_and_model):
    tokenizer, model, english = tokenizer_and_model
    translator = Translator(model, tokenizer, max_extra_length=1, max_source_length=4)
    translator.translate([english[0], "A"])
    assert translator.truncated == 1
    with pytest.raises(TypeError, match="list of str"):
        translator.translate("A dog.")
    with pytest.raises(ValueError, match="max_source_length"):
        Translator(model, tokenizer, max_source_length=0)
    assert translator.translate([]) == []


def test_progress_bar_goes_to_stderr_and_stdout_stays_empty(tokenizer_and_model, capsys):
    tokenizer, model, english = tokenizer_and_model
    translator = Translator(model, tokenizer, max_extra_length=2)
    translations = translator.translate([s[:8] for s in english[:3]], verbose=1)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "3/3" in captured.err
    assert len(translations) == 3


def test_batches_default_to_the_backends_bound_and_an_explicit_one_wins(tokenizer_and_model):
    from keras_transformer import backend

    tokenizer, model, english = tokenizer_and_model
    # JAX on a CPU keeps every row of a batch to its end: smaller batches there.
    expected = 256 if keras.backend.backend() == "jax" and not backend.on_accelerator() else 4096
    assert backend.decoding_batch_tokens() == expected
    sentences = [sentence[:30] for sentence in english[:200]]  # 200 sources, up to 16 ids
    for batch_tokens, bound in ((None, expected), (4096, 4096), (64, 64)):
        translator = Translator(model, tokenizer, batch_tokens=batch_tokens)
        token_lists = translator._tokenize(sentences)
        batches = list(translator._batches(token_lists))
        assert sum(len(rows) for rows, _ in batches) == len(sentences)
        assert all(len(rows) * ids.shape[1] <= bound for rows, ids in batches)
        # Each batch is as large as the bound allows (bar the last of a length bucket).
        assert max(len(rows) * ids.shape[1] for rows, ids in batches) > bound // 2
