"""A forced target prefix: each output starts with its prefix, with every search.

Checked against the searches without a prefix: the outputs start with the prefix; a
prefix equal to the first tokens of the search's own output leaves that output as it
was; greedy search's output after the prefix is that of a step-by-step NumPy reference
whose first tokens are forced.
"""

import keras
import numpy as np
import pytest
from conftest import small_config, to_numpy

from keras_transformer import Seq2SeqTransformer
from keras_transformer.decoding import DecodingConfig, Translator, get_search
from keras_transformer.decoding.target_inputs import padded_prefixes

PAD, UNK, BOS, EOS = 0, 1, 2, 3
VOCABULARY = 12
SETTINGS = {
    "beam": {"beam_size": 3, "num_results": 2},
    "greedy": {},
    "sampling": {"num_results": 3, "sampling_seed": 5},
    "constrained": {"beam_size": 3},
}


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(11)
    return Seq2SeqTransformer(small_config(VOCABULARY, num_layers=2))


@pytest.fixture(scope="module")
def sources():
    rng = np.random.default_rng(1)
    ids = rng.integers(4, VOCABULARY, size=(3, 5)).astype("int32")
    ids[2, 2:] = PAD
    return ids


# Each search is built once for the module's model, and the tests share it: on TensorFlow a
# search traces once per kind of call (with a prefix or without), and a trace is most of a
# test's time.
BUILT = {}


def build(model, search):
    if search not in BUILT or BUILT[search][0] is not model:
        decoding = DecodingConfig(search=search, max_extra_length=6, **SETTINGS[search])
        BUILT[search] = model, get_search(search)(model, decoding, bos_id=BOS, eos_id=EOS)
    return BUILT[search][1]


@pytest.mark.parametrize("search", ["beam", "greedy", "sampling", "constrained"])
def test_outputs_start_with_the_prefix(model, sources, search):
    prefixes = [[9, 9, 4], [], [UNK, 11]]
    tokens, scores = (to_numpy(x) for x in build(model, search)(sources, padded_prefixes(
        prefixes, len(sources))))  # fmt: skip
    for row, prefix in enumerate(prefixes):
        for output in tokens[row]:
            assert list(output[: len(prefix)]) == prefix, (row, output)
    assert np.all(np.isfinite(scores))


@pytest.mark.parametrize("search", ["beam", "greedy", "sampling", "constrained"])
def test_a_prefix_of_the_own_output_changes_nothing(model, sources, search):
    free = [to_numpy(x) for x in build(model, search)(sources)]
    best = free[0][:, 0]
    prefixes = [[int(t) for t in row[:2] if t != PAD] for row in best]
    if search == "sampling":  # each sample of a source gets its own first tokens
        prefixes = [[int(t) for t in row[:2] if t != PAD] for row in free[0][:, 0]]
    forced = [to_numpy(x) for x in build(model, search)(sources, padded_prefixes(
        prefixes, len(sources)))]  # fmt: skip
    np.testing.assert_array_equal(forced[0][:, 0], best)
    np.testing.assert_allclose(forced[1][:, 0], free[1][:, 0], atol=1e-5)


def reference_greedy(model, source, prefix, limit):
    """Greedy decoding from the full decoder, the first tokens forced to `prefix`.

    The decoder's input is padded to one length for every step: a position sees only those
    before it, so the padding changes no logit read, and JAX, which runs the model op by op
    here, compiles each op once per source instead of once per step.
    """
    output = [BOS]
    while len(output) <= limit + 1:
        step = len(output) - 1
        if step < len(prefix) and step < limit:
            token = prefix[step]
        elif step >= limit:
            token = EOS
        else:
            padded = output + [PAD] * (limit + 2 - len(output))
            inputs = {
                "encoder_token_ids": np.asarray([source], "int32"),
                "decoder_token_ids": np.asarray([padded], "int32"),
            }
            logits = to_numpy(model(inputs))[0, step]
            logits[[PAD, BOS]] = -np.inf
            token = int(np.argmax(logits))
        output.append(token)
        if token == EOS:
            break
    return [t for t in output[1:] if t != EOS]


def test_greedy_after_the_prefix_follows_a_numpy_reference(model, sources):
    prefixes = [[5, 5, 5, 5], [10], []]
    tokens, _ = build(model, "greedy")(sources, padded_prefixes(prefixes, len(sources)))
    for row, prefix in enumerate(prefixes):
        source = [int(t) for t in sources[row] if t != PAD]
        expected = reference_greedy(model, source, prefix, len(source) + 6)
        assert [int(t) for t in to_numpy(tokens)[row, 0] if t != PAD] == expected


class Tokens:
    """A tokenizer of space-separated ids."""

    bos_id, eos_id, pad_id = BOS, EOS, PAD

    def __call__(self, sentences):
        return [[int(word) for word in sentence.split()] for sentence in sentences]

    def detokenize(self, token_lists):
        return [" ".join(str(t) for t in tokens) for tokens in token_lists]


def test_the_translator_forces_each_sentences_prefix(model):
    sentences = ["5 9 7", "4 4 6 8 10", "", "11"]
    translator = Translator(model, Tokens(), max_extra_length=6)
    prefixes = ["9 9", "", "4", "11 10 7"]
    translations = translator.translate(sentences, verbose=0, target_prefix=prefixes)
    assert translations[0].startswith("9 9") and translations[3].startswith("11 10 7")
    assert translations[1] == translator.translate(sentences[1:2], verbose=0)[0]
    assert translations[2] == ""  # a blank sentence is not decoded
    with pytest.raises(ValueError, match="`target_prefix` has 1 entries for 4 sentences"):
        translator.translate(sentences, verbose=0, target_prefix=["4"])
