"""Ensembles decode with the log of the mean of their models' probabilities at each step.

Checked against each model run on its own: a model ensembled with itself translates as it
does alone; an ensemble's step log-probabilities are the log-mean-exp of its models'; and its
greedy outputs are those of a step-by-step reference that averages the models' full-decoder
probabilities in NumPy.
"""

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, small_config, to_numpy
from keras import ops

from keras_transformer import Seq2SeqTransformer
from keras_transformer.decoding import (
    Ensemble,
    Translator,
    build_beam_search,
    build_greedy_search,
)

PAD, UNK, BOS, EOS = 0, 1, 2, 3
VOCABULARY = 12


@pytest.fixture(scope="module")
def models():
    keras.utils.set_random_seed(7)
    first = Seq2SeqTransformer(small_config(VOCABULARY, num_layers=2))
    keras.utils.set_random_seed(8)
    second = Seq2SeqTransformer(small_config(VOCABULARY, d_model=24, num_heads=3))
    return first, second


@pytest.fixture(scope="module")
def sources():
    rng = np.random.default_rng(0)
    ids = rng.integers(4, VOCABULARY, size=(4, 6)).astype("int32")
    ids[1, 2:] = PAD
    ids[3, 4:] = PAD
    return ids


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_model_ensembled_with_itself_decodes_as_it_does_alone(models, sources, search):
    model = models[0]
    build = build_beam_search if search == "beam" else build_greedy_search
    settings = {"num_results": 2} if search == "beam" else {}
    alone = [to_numpy(x) for x in build(model, bos_id=BOS, eos_id=EOS, **settings)(sources)]
    ensemble = Ensemble([model, model])
    together = [to_numpy(x) for x in build(ensemble, bos_id=BOS, eos_id=EOS, **settings)(sources)]
    np.testing.assert_array_equal(together[0], alone[0])
    np.testing.assert_allclose(together[1], alone[1], atol=1e-4)


def test_step_log_probs_are_the_log_mean_exp_of_the_models(models, sources):
    ensemble = Ensemble(models)
    cache = ensemble.initialize_cache(ensemble.encode(sources), sources, max_length=8)
    separate = [
        model.initialize_cache(model.encode(sources), sources, max_length=8) for model in models
    ]
    tokens = np.array([[BOS], [BOS], [BOS], [BOS]], "int32")
    for step, following in enumerate(([5], [7])):
        mixed, cache = ensemble.decode(tokens, cache, step)
        log_probs = []
        for number, model in enumerate(models):
            logits, separate[number] = model.decode(tokens, separate[number], step)
            log_probs.append(to_numpy(ops.log_softmax(logits, axis=-1)).astype("float64"))
        expected = np.logaddexp(*log_probs) - np.log(2.0)
        np.testing.assert_allclose(to_numpy(mixed), expected, atol=1e-5)
        tokens = np.array([following] * 4, "int32")


def reference_greedy(models, source, limit):
    """Greedy decoding of the models' mean probabilities, each step from the full decoder.

    The decoder's input is padded to one length for every step: a position sees only those
    before it, so the padding changes no logit read, and JAX, which runs the model op by op
    here, compiles each op once per source instead of once per step.
    """
    output = [BOS]
    for _ in range(limit + 1):
        inputs = {
            "encoder_token_ids": np.asarray([source], "int32"),
            "decoder_token_ids": np.asarray([output + [PAD] * (limit + 2 - len(output))], "int32"),
        }
        probs = 0.0
        for model in models:
            logits = to_numpy(model(inputs)).astype("float64")[0, len(output) - 1]
            probs = probs + np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        probs[[PAD, BOS]] = 0.0
        token = EOS if len(output) > limit else int(np.argmax(probs))
        output.append(token)
        if token == EOS:
            break
    return output[1:-1] if output[-1] == EOS else output[1:]


def test_ensemble_greedy_search_follows_the_mean_probabilities(models, sources):
    translator = Translator(list(models), Tokens(), search="greedy", max_extra_length=3)
    sentences = [" ".join(str(t) for t in row if t != PAD) for row in sources]
    translations = translator.translate(sentences, verbose=0)
    for row, translation in zip(sources, translations, strict=True):
        source = [*[int(t) for t in row if t != PAD], EOS]
        expected = reference_greedy(models, source, len(source) + 3)
        assert translation.split() == [str(t) for t in expected]


def test_models_of_other_vocabularies_are_refused(models):
    other = Seq2SeqTransformer(small_config(VOCABULARY + 1))
    with pytest.raises(ValueError, match="differ in vocabulary_size: model 0 has 12, model 1 13"):
        Ensemble([models[0], other])
    with pytest.raises(ValueError, match="two models or more"):
        Ensemble([models[0]])


class Tokens:
    """A tokenizer of space-separated ids."""

    bos_id, eos_id, pad_id = BOS, EOS, PAD

    def __call__(self, sentences):
        return [[int(word) for word in sentence.split()] for sentence in sentences]

    def detokenize(self, token_lists):
        return [" ".join(str(t) for t in tokens) for tokens in token_lists]


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    """Two .keras files of differently sized models with one tokenizer, and a third with another."""
    from keras_transformer.export import save_translation_model
    from keras_transformer.synthetic import generate_synthetic_pairs
    from keras_transformer.text import train_vocabulary

    english, german = generate_synthetic_pairs(200, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=160)
    other_tokenizer = train_vocabulary(german, vocabulary_size=160)
    folder = tmp_path_factory.mktemp("ensemble")
    keras.utils.set_random_seed(7)
    first = Seq2SeqTransformer(small_config(160))
    keras.utils.set_random_seed(8)
    second = Seq2SeqTransformer(small_config(160, d_model=24, num_heads=3))
    for name, model, own in (("a", first, tokenizer), ("b", second, tokenizer),
                             ("c", second, other_tokenizer)):  # fmt: skip
        save_translation_model(model, own, folder / f"{name}.keras")
    sentences = [english[0], english[1][:15], "", english[2]]
    (folder / "test.en").write_text("".join(f"{s}\n" for s in sentences), encoding="utf-8")
    return folder, (first, second), tokenizer, sentences


def test_translate_takes_several_models_as_an_ensemble(saved_models, capsys):
    from keras_transformer.commands.translate import main

    folder, models, tokenizer, sentences = saved_models
    expected = Translator(list(models), tokenizer, max_extra_length=3).translate(
        sentences, verbose=0
    )
    assert expected != Translator(models[0], tokenizer, max_extra_length=3).translate(
        sentences, verbose=0
    )
    arguments = ["--model", str(folder / "a.keras"), "--model", str(folder / "b.keras")]
    status = main([*arguments, "--input", str(folder / "test.en"), "--max-extra-length", "3"])
    out, err = capsys.readouterr()
    assert (status, out.splitlines()) == (0, expected), err


@BACKEND_INDEPENDENT  # the tokenizers are compared before anything is decoded
def test_translate_refuses_an_ensemble_of_other_tokenizers(saved_models, capsys):
    from keras_transformer.commands.translate import main

    folder = saved_models[0]
    arguments = ["--model", str(folder / "a.keras"), "--model", str(folder / "c.keras")]
    status = main([*arguments, "--input", str(folder / "test.en")])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and "c.keras has another tokenizer than --model" in err, err
