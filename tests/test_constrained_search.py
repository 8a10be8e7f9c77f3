"""Lexically constrained beam search: every phrase appears, and nothing else changes.

Checked against independent references: plain beam search (no constraints: the same
outputs and scores), a subsequence check of the outputs (every phrase appears when the
length allows), and an exhaustive search over every output of a tiny vocabulary scored
by the full decoder in NumPy (with a beam wider than all hypotheses, the constrained
search's n-best are the best outputs that contain the phrase).
"""

import itertools

import keras
import numpy as np
import pytest
from conftest import small_config, to_numpy

from keras_transformer import Seq2SeqTransformer
from keras_transformer.decoding import DecodingConfig, Translator, build_beam_search, get_search
from keras_transformer.decoding.target_inputs import padded_phrases, padded_prefixes

PAD, UNK, BOS, EOS = 0, 1, 2, 3
VOCABULARY = 12


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(7)
    return Seq2SeqTransformer(small_config(VOCABULARY, num_layers=2))


@pytest.fixture(scope="module")
def sources():
    rng = np.random.default_rng(0)
    ids = rng.integers(4, VOCABULARY, size=(4, 6)).astype("int32")
    ids[1, 3:] = PAD
    ids[3, 4:] = PAD
    return ids


def constrained(model, **settings):
    decoding = DecodingConfig(search="constrained", **settings)
    return get_search("constrained")(model, decoding, bos_id=BOS, eos_id=EOS)


def contains(tokens, phrase):
    tokens = [int(t) for t in tokens]
    return any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens)))


def test_without_constraints_it_is_plain_beam_search(model, sources):
    settings = {"beam_size": 3, "num_results": 3, "max_extra_length": 6}
    plain = build_beam_search(model, bos_id=BOS, eos_id=EOS, drop_settled=False, **settings)
    expected = [to_numpy(x) for x in plain(sources)]
    search = constrained(model, **settings)
    no_phrases = padded_phrases([[] for _ in sources], len(sources))
    no_prefix = padded_prefixes([], len(sources))
    for got in (search(sources), search(sources, no_prefix, no_phrases)):
        np.testing.assert_array_equal(to_numpy(got[0]), expected[0])
        np.testing.assert_allclose(to_numpy(got[1]), expected[1], atol=1e-5)


def test_every_phrase_appears_when_the_length_allows(model, sources):
    phrases = [[[9, 5], [11]], [[6, 6, 6]], [], [[4], [10, 8], [7, 9]]]
    search = constrained(model, beam_size=4, num_results=1, max_extra_length=8)
    no_prefix = padded_prefixes([], len(sources))
    tokens, scores = search(sources, no_prefix, padded_phrases(phrases, len(sources)))
    unconstrained = to_numpy(constrained(model, beam_size=4, max_extra_length=8)(sources)[0])
    missing_before = 0
    for row, wanted in enumerate(phrases):
        output = to_numpy(tokens)[row, 0]
        for phrase in wanted:
            assert contains(output, phrase), (row, phrase, output)
            missing_before += not contains(unconstrained[row, 0], phrase)
        assert np.isfinite(to_numpy(scores)[row, 0])
    assert missing_before >= 4  # the constraints changed the outputs


def test_at_the_length_limit_the_output_that_misses_least_comes_first(model):
    # Two output tokens allowed (a source of two ids, no extra): the 3-token phrase cannot
    # fit; EOS is forced at the limit, and an output with the 1-token phrase ranks first.
    source = np.asarray([[5, EOS]], "int32")
    search = constrained(model, beam_size=4, num_results=2, max_extra_length=0)
    phrases = padded_phrases([[[7, 8, 9], [6]]], 1)
    tokens, scores = (to_numpy(x)[0] for x in search(source, padded_prefixes([], 1), phrases))
    outputs = [[int(t) for t in row if t != PAD] for row in tokens]
    assert 6 in outputs[0] and len(outputs[0]) <= 2, outputs
    assert not contains(outputs[0], [7, 8, 9])
    assert -100 < scores[0] < 0  # the output's own log-probability, without the ranking's


TINY_VOCABULARY = 7  # usable output tokens: UNK, 4, 5, 6 (PAD and BOS never; EOS ends)
USABLE = (UNK, 4, 5, 6)


def reference_scores(model, source, limit, alpha=0.6):
    """Every output of at most `limit` tokens (then EOS): its length-penalized log-prob."""
    cache = {}

    def log_probs(prefix):
        if prefix not in cache:
            inputs = {
                "encoder_token_ids": np.asarray([source], "int32"),
                "decoder_token_ids": np.asarray([[BOS, *prefix]], "int32"),
            }
            logits = to_numpy(model(inputs)).astype("float64")[0, -1]
            cache[prefix] = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
        return cache[prefix]

    scores = {}
    for length in range(limit + 1):
        for output in itertools.product(USABLE, repeat=length):
            total = sum(log_probs(output[:i])[t] for i, t in enumerate(output))
            total += 0.0 if length == limit else log_probs(output)[EOS]  # EOS forced at the limit
            scores[output] = total / ((5.0 + length + 1) / 6.0) ** alpha
    return scores


def test_with_a_beam_wider_than_all_hypotheses_the_n_best_are_the_exhaustive_best():
    keras.utils.set_random_seed(3)
    model = Seq2SeqTransformer(small_config(TINY_VOCABULARY))
    source = [5, 4, EOS]
    limit = 3  # the source's 3 ids + max_extra_length 0
    scores = reference_scores(model, source, limit)
    best_overall = max(scores, key=scores.get)
    phrase = next(
        [a, b] for a in USABLE[1:] for b in USABLE[1:] if not contains(best_overall, [a, b])
    )
    ranked = sorted((o for o in scores if contains(o, phrase)), key=scores.get, reverse=True)
    search = constrained(model, beam_size=64, num_results=3, max_extra_length=0)
    source_ids = np.asarray([source], "int32")
    tokens, found = search(source_ids, padded_prefixes([], 1), padded_phrases([[phrase]], 1))
    tokens, found = to_numpy(tokens)[0], to_numpy(found)[0]
    for rank in range(3):
        output = tuple(int(t) for t in tokens[rank] if t != PAD)
        assert output == ranked[rank], (rank, output, ranked[:3])
        np.testing.assert_allclose(found[rank], scores[ranked[rank]], atol=1e-4)


class Tokens:
    """A tokenizer of space-separated ids."""

    bos_id, eos_id, pad_id = BOS, EOS, PAD

    def __call__(self, sentences):
        return [[int(word) for word in sentence.split()] for sentence in sentences]

    def detokenize(self, token_lists):
        return [" ".join(str(t) for t in tokens) for tokens in token_lists]


def test_the_translator_meets_the_phrases_and_counts_them(model):
    sentences = ["5 9 7", "4 4 6 8 10", "", "11"]
    constraints = [["9 5", "11"], [], ["7"], ["6 6"]]
    translator = Translator(model, Tokens(), max_extra_length=6)
    translations = translator.translate(sentences, verbose=0, constraints=constraints)
    for translation, phrases in zip(translations, constraints, strict=True):
        if translation:
            assert all(f" {p} " in f" {translation} " for p in phrases), translation
    assert (translator.phrases_found, translator.phrases_given) == (3, 4)  # "" has no "7"
    plain = translator.translate(sentences, verbose=0)
    assert translator.translate(sentences, verbose=0, constraints=[[]] * 4) == plain


@pytest.mark.parametrize(
    "constraints, message",
    [
        ([["5"]], "`constraints` has 1 entries for 2 sentences"),
        ([["5"], ["  "]], "`constraints` entry 2 has an empty phrase"),
        ([["5"], "5"], "entry 2 must be a list of str"),
        ([["5"], [str(t) for t in range(17)]], "entry 2 has 17 phrases; at most 16"),
        ([["5"], [" ".join(["4"] * 17)]], "has 17 tokens; 1 to 16 are allowed"),
    ],
)
def test_bad_constraints_are_refused(model, constraints, message):
    translator = Translator(model, Tokens(), max_extra_length=2)
    with pytest.raises((ValueError, TypeError), match=message):
        translator.translate(["5 9", "4"], verbose=0, constraints=constraints)


def test_constraints_need_beam_search(model):
    translator = Translator(model, Tokens(), search="greedy")
    with pytest.raises(ValueError, match="Constraints need beam search"):
        translator.translate(["5 9"], verbose=0, constraints=[["5"]])


def test_a_model_ensembled_with_itself_meets_the_phrases_as_it_does_alone(model, sources):
    from keras_transformer.decoding import Ensemble

    phrases = padded_phrases([[[9, 5]], [], [[11], [4, 4]], [[6]]], len(sources))
    no_prefix = padded_prefixes([], len(sources))
    settings = {"beam_size": 3, "num_results": 2, "max_extra_length": 6}
    alone = [to_numpy(x) for x in constrained(model, **settings)(sources, no_prefix, phrases)]
    together = constrained(Ensemble([model, model]), **settings)(sources, no_prefix, phrases)
    np.testing.assert_array_equal(to_numpy(together[0]), alone[0])
    np.testing.assert_allclose(to_numpy(together[1]), alone[1], atol=1e-4)
