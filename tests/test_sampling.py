"""Sampling (`search="sampling"`) against closed forms: the model's softmax, top-k, top-p, greedy.

The first tokens of many samples are counted and compared with the model's own softmax by a
chi-square test; the filters are checked on distributions whose kept sets are known; top-k 1
is greedy search; a seed gives the same samples whatever the batch, and the command line
refuses bad values before any backend loads.
"""

import json
import math
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, only_under, small_config, to_numpy
from keras import ops
from scipy import stats

from keras_transformer import Seq2SeqTransformer
from keras_transformer.decoding import (
    DecodingConfig,
    Translator,
    build_greedy_search,
    build_sampling_search,
    get_search,
    sampling_log_probs,
)
from keras_transformer.decoding.search_steps import NEG_INF

PAD, UNK, BOS, EOS = 0, 1, 2, 3
VOCABULARY = 12
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(7)
    return Seq2SeqTransformer(small_config(VOCABULARY, num_layers=2))


@pytest.fixture(scope="module")
def sources():
    rng = np.random.default_rng(0)
    ids = rng.integers(4, VOCABULARY, size=(4, 6)).astype("int32")
    ids[1, 2:] = PAD
    ids[3, 4:] = PAD
    return ids


def kept_probs(probs, **filters):
    """The probabilities `sampling_log_probs` samples from, for a (rows, vocab) table."""
    log_probs = ops.convert_to_tensor(np.log(np.asarray(probs, "float32")))
    return to_numpy(ops.exp(sampling_log_probs(log_probs, **filters)))


def first_token_probs(model, source):
    """The model's distribution of the first output token, from its logits (no search code)."""
    inputs = {
        "encoder_token_ids": np.asarray([source], "int32"),
        "decoder_token_ids": np.asarray([[BOS]], "int32"),
    }
    logits = to_numpy(model(inputs)).astype("float64")[0, 0]
    logits[[PAD, BOS]] = -np.inf  # never generated
    probs = np.exp(logits - logits.max())
    return probs / probs.sum()


@BACKEND_INDEPENDENT
def test_top_p_keeps_the_smallest_set_that_reaches_p():
    probs = [[0.5, 0.3, 0.15, 0.05]]
    for top_p, kept in ((0.4, 1), (0.5, 1), (0.6, 2), (0.8, 2), (0.81, 3), (0.96, 4), (1.0, 4)):
        expected = np.array(probs[0][:kept] + [0.0] * (4 - kept))
        np.testing.assert_allclose(
            kept_probs(probs, top_p=top_p)[0], expected / expected.sum(), atol=1e-6
        )
    # Rows are filtered each on its own, whatever the order of their tokens.
    rows = kept_probs([[0.1, 0.6, 0.3], [0.2, 0.3, 0.5]], top_p=0.7)
    np.testing.assert_allclose(rows, [[0, 2 / 3, 1 / 3], [0, 0.375, 0.625]], atol=1e-6)
    # A token as probable as the last one kept is kept too.
    tied = kept_probs([[0.25, 0.25, 0.5]], top_p=0.7)
    np.testing.assert_allclose(tied, [[0.25, 0.25, 0.5]], atol=1e-6)


@BACKEND_INDEPENDENT
def test_temperature_and_top_k_reshape_the_distribution_as_defined():
    probs = np.array([[0.4, 0.3, 0.2, 0.1]])
    for temperature in (0.5, 2.0):
        sharpened = probs ** (1 / temperature)
        np.testing.assert_allclose(
            kept_probs(probs, temperature=temperature), sharpened / sharpened.sum(), atol=1e-6
        )
    np.testing.assert_allclose(kept_probs(probs, top_k=2), [[4 / 7, 3 / 7, 0, 0]], atol=1e-6)
    np.testing.assert_allclose(kept_probs(probs, top_k=9), probs, atol=1e-6)  # k > vocabulary
    # Banned tokens stay banned, however flat the temperature makes the rest.
    banned = np.log(np.array([[0.0, 0.5, 0.5]], "float32").clip(1e-30))
    banned[0, 0] = NEG_INF
    flat = sampling_log_probs(ops.convert_to_tensor(banned), temperature=1e12)
    assert to_numpy(ops.exp(flat))[0, 0] == 0.0


@pytest.mark.parametrize(
    "filters", [{}, {"temperature": 2.0, "top_k": 5}, {"top_p": 0.7}], ids=["plain", "t2k5", "p07"]
)
def test_first_tokens_of_many_samples_follow_the_softmax(model, filters):
    source = [5, 9, 7, EOS]
    count = 6000
    search = build_sampling_search(
        model, bos_id=BOS, eos_id=EOS, num_results=count, max_extra_length=0, **filters
    )
    tokens, _ = search(np.asarray([source], "int32"))
    first = to_numpy(tokens)[0, :, 0]
    first = np.where(first == PAD, EOS, first)  # an immediate EOS is written as padding
    observed = np.bincount(first, minlength=VOCABULARY)
    probs = first_token_probs(model, source)
    expected = kept_probs(probs[None].clip(1e-30), **filters)[0].astype("float64")
    support = expected > 0
    assert observed[~support].sum() == 0  # no token the filters remove
    assert support.sum() >= 2
    expected = expected[support] / expected[support].sum() * count
    _, p_value = stats.chisquare(observed[support], expected)
    assert p_value > 1e-3, (observed[support], expected)


def test_top_k_never_emits_a_token_outside_the_k_best(model, sources):
    k = 3
    search = build_sampling_search(
        model, bos_id=BOS, eos_id=EOS, num_results=64, top_k=k, temperature=3.0
    )
    tokens = to_numpy(search(sources)[0])  # (batch, 64, length)
    for row, source in enumerate(sources):
        outputs = tokens[row]
        decoder = np.concatenate([np.full((len(outputs), 1), BOS), outputs[:, :-1]], axis=1)
        inputs = {
            "encoder_token_ids": np.repeat(source[None], len(outputs), axis=0),
            "decoder_token_ids": decoder.astype("int32"),
        }
        logits = to_numpy(model(inputs)).astype("float64")
        logits[:, :, [PAD, BOS]] = -np.inf
        limit = int((source != PAD).sum()) + 50
        for sample, output in enumerate(outputs):
            for step, token in enumerate(output):
                if token == PAD:  # EOS (written as padding) or after it
                    token = EOS
                if step >= limit:  # only EOS is allowed there
                    break
                best = np.argsort(-logits[sample, step])[:k]
                assert token in best, (row, sample, step, token, best)
                if token == EOS:
                    break


def test_top_k_1_is_greedy_search(model, sources):
    greedy_tokens, greedy_scores = build_greedy_search(model, bos_id=BOS, eos_id=EOS)(sources)
    tokens, scores = build_sampling_search(model, bos_id=BOS, eos_id=EOS, top_k=1, num_results=2)(
        sources
    )
    for sample in range(2):
        np.testing.assert_array_equal(to_numpy(tokens)[:, sample], to_numpy(greedy_tokens))
        np.testing.assert_allclose(to_numpy(scores)[:, sample], to_numpy(greedy_scores), atol=1e-5)


def test_a_seed_gives_the_same_samples_in_any_batch(model, sources):
    settings = {"num_results": 3, "temperature": 1.5, "sampling_seed": 11}
    search = build_sampling_search(model, bos_id=BOS, eos_id=EOS, **settings)
    tokens, scores = (to_numpy(x) for x in search(sources))
    again = [to_numpy(x) for x in search(sources)]
    np.testing.assert_array_equal(tokens, again[0])
    # A source alone, with more padding, or among others: the same samples.
    for row in (1, 3):
        alone = np.full((1, 9), PAD, "int32")
        alone[0, : sources.shape[1]] = sources[row]
        alone_tokens, alone_scores = (to_numpy(x) for x in search(alone))
        width = tokens.shape[-1]
        np.testing.assert_array_equal(alone_tokens[0, :, :width], tokens[row])
        assert (alone_tokens[0, :, width:] == PAD).all()
        np.testing.assert_allclose(alone_scores[0], scores[row], atol=1e-5)
    # Another seed, other samples; the samples of a source differ from each other.
    other = to_numpy(build_sampling_search(model, bos_id=BOS, eos_id=EOS, **{
        **settings, "sampling_seed": 12})(sources)[0])  # fmt: skip
    assert not np.array_equal(other, tokens)
    assert len({tuple(sample) for sample in tokens.reshape(-1, tokens.shape[-1])}) > 6
    # Most probable first.
    assert (np.diff(scores, axis=1) <= 0).all()


def test_cached_and_uncached_sampling_agree(model, sources):
    results = [
        [
            to_numpy(x)
            for x in build_sampling_search(
                model, bos_id=BOS, eos_id=EOS, num_results=2, top_p=0.9, use_cache=use_cache
            )(sources)
        ]
        for use_cache in (True, False)
    ]
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], atol=1e-4)


def test_the_registry_builds_each_strategy_from_the_config_alone(model, sources):
    for name in ("beam", "greedy", "sampling"):
        decoding = DecodingConfig(search=name, num_results=1, max_extra_length=4)
        tokens, scores = get_search(name)(model, decoding, bos_id=BOS, eos_id=EOS)(sources)
        assert tokens.shape[:2] == (4, 1) and scores.shape == (4, 1), name
    with pytest.raises(ValueError, match="`search` must be one of"):
        get_search("nucleus")


class Tokens:
    """A tokenizer of space-separated ids, for a `Translator` over the tiny model."""

    bos_id, eos_id, pad_id = BOS, EOS, PAD

    def __call__(self, sentences):
        return [[int(word) for word in sentence.split()] for sentence in sentences]

    def detokenize(self, token_lists):
        return [" ".join(str(t) for t in tokens) for tokens in token_lists]


def test_translator_returns_n_samples_per_sentence(model):
    sentences = ["5 9 7", "4 4 6 8 10", "", "11"]
    translator = Translator(
        model, Tokens(), search="sampling", num_results=4, sampling_seed=3, max_extra_length=5
    )
    n_best = translator.translate_n_best(sentences, verbose=0)
    assert [len(samples) for samples in n_best] == [4] * 4
    assert n_best[2] == [("", 0.0)] + [("", -math.inf)] * 3
    scores = [score for (score,) in [[s for _, s in samples[:1]] for samples in n_best]]
    assert all(np.isfinite(scores))
    # The same sentences one at a time: the same samples (a sample depends on its source only).
    alone = [translator.translate_n_best([s], verbose=0)[0] for s in sentences]
    assert [[t for t, _ in samples] for samples in alone] == [
        [t for t, _ in samples] for samples in n_best
    ]
    first = Translator(model, Tokens(), search="sampling", sampling_seed=3, max_extra_length=5)
    # One sample per sentence: the first of the four drawn (before they were ordered).
    assert first.translate(sentences[:1], verbose=0)[0] in [t for t, _ in n_best[0]]


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "settings, message",
    [
        ({"temperature": 0.0}, "`temperature` must be > 0. Received: temperature=0.0"),
        ({"top_p": 0.0}, "`top_p` must be > 0"),
        ({"top_p": 1.5}, "`top_p` must be <= 1"),
        ({"top_k": -1}, "`top_k` must be >= 0"),
        ({"sampling_seed": 2**32}, "`sampling_seed` must be <= 4294967295"),
        ({"search": "greedy", "num_results": 2}, "must be <= 1 with search='greedy'"),
        ({"search": "nucleus"}, "must be one of ('beam', 'greedy', 'sampling', 'constrained')"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(settings, message):
    with pytest.raises(ValueError) as error:
        DecodingConfig(**settings)
    assert message in str(error.value)
    # N samples are not bounded by the beam size.
    assert DecodingConfig(search="sampling", num_results=50).num_results == 50


# Runs `keras-transformer translate` and writes which backends it loaded.
WRAPPER = """
import json, sys
from keras_transformer.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as exit:
    code = exit.code
with open(sys.argv[1], "w") as report:
    json.dump([n for n in ("tensorflow", "jax", "torch", "keras") if n in sys.modules], report)
sys.exit(code)
"""


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--temperature", "0"], "--temperature must be > 0. Received: 0.0"),
        (["--temperature", "-1"], "--temperature must be > 0"),
        (["--top-p", "0"], "--top-p must be > 0. Received: 0.0"),
        (["--top-p", "1.01"], "--top-p must be <= 1. Received: 1.01"),
        (["--top-k", "-2"], "--top-k must be >= 0. Received: -2"),
        (["--seed", "-1"], "--seed must be >= 0. Received: -1"),
        (["--search", "nucleus"], "invalid choice: 'nucleus'"),
    ],
)
def test_bad_sampling_flags_exit_2_in_one_line_before_any_backend(tmp_path, flags, message):
    report = tmp_path / "loaded.json"
    arguments = ["translate", "--model", "absent.keras", "--search", "sampling", *flags]
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(report), *arguments],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        cwd=tmp_path,
        timeout=120,
    )
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert json.loads(report.read_text()) == []
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


@only_under("tensorflow", "exports from another backend run the same TensorFlow export")
def test_a_sampling_saved_model_serves_the_translators_samples(tmp_path):
    import tensorflow as tf

    from keras_transformer.export import SETTINGS_FILE, export_saved_model
    from keras_transformer.synthetic import generate_synthetic_pairs
    from keras_transformer.text import train_vocabulary

    english, german = generate_synthetic_pairs(200, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=160)
    keras.utils.set_random_seed(7)
    model = Seq2SeqTransformer(small_config(160))
    decoding = DecodingConfig(
        search="sampling", top_p=0.9, temperature=1.3, sampling_seed=5, max_extra_length=4
    )
    sentences = [english[0], "", english[1][:12], english[2], english[3][:5]]
    expected = Translator(model, tokenizer, decoding).translate(sentences, verbose=0)
    assert len(set(expected)) == len(expected)
    path = export_saved_model(model, tokenizer, tmp_path / "served" / "1", decoding)
    served = tf.saved_model.load(path).signatures["serving_default"]
    outputs = served(sentences=tf.constant(sentences))["translations"].numpy()
    assert [t.decode("utf-8") for t in outputs] == expected
    with open(os.path.join(path, "assets", SETTINGS_FILE), encoding="utf-8") as file:
        recorded = json.load(file)["decoding"]
    assert {k: recorded[k] for k in ("search", "temperature", "top_k", "top_p")} == {
        "search": "sampling", "temperature": 1.3, "top_k": 0, "top_p": 0.9,
    }  # fmt: skip
    assert recorded["sampling_seed"] == 5 and "beam_size" not in recorded
