"""The options published models need (issue 56): activation, final logits bias, sinusoid layout,
frequencies and offset, a padding id other than 0, and beam search's "average" length penalty.

Each against a closed form or the defaults' outputs; the exports of a model with all of them
(SavedModel, CTranslate2) against the Keras model.
"""

import dataclasses
import math

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, small_config, to_numpy

from keras_transformer import Seq2SeqTransformer, TransformerConfig
from keras_transformer.decoding import Translator
from keras_transformer.decoding.beam_search import build_beam_search
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import train_vocabulary

NEW_FIELDS = {
    "position_layout": "interleaved",
    "position_frequencies": "paper",
    "position_offset": 0,
    "activation": "relu",
    "final_logits_bias": False,
}
# Everything a Marian or fairseq import sets at once, with the padding id last.
OPTIONS = dict(
    position_layout="halves",
    position_frequencies="fairseq",
    position_offset=2,
    activation="swish",
    final_logits_bias=True,
    attention_bias=True,
)
VOCABULARY_SIZE = 40


def test_defaults_are_the_paper_and_old_configs_load():
    config = TransformerConfig(vocabulary_size=10)
    assert {name: getattr(config, name) for name in NEW_FIELDS} == NEW_FIELDS
    old = {k: v for k, v in config.to_dict().items() if k not in NEW_FIELDS}
    assert TransformerConfig.from_dict(old) == config
    model = Seq2SeqTransformer(small_config(VOCABULARY_SIZE))
    model.build()
    assert model.logits_bias is None
    assert not any("final_logits_bias" in weight.path for weight in model.weights)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"position_layout": "split"}, "position_layout"),
        ({"position_frequencies": "t2t"}, "position_frequencies"),
        ({"activation": "tanh"}, "activation"),
        ({"position_offset": -1}, "position_offset"),
        ({"position_offset": 2, "position_embedding": "learned"}, "position_offset"),
        ({"position_frequencies": "fairseq", "d_model": 2, "num_heads": 1}, "d_model >= 4"),
        ({"final_logits_bias": "yes"}, "final_logits_bias"),
    ],
)
def test_invalid_options_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(vocabulary_size=10, **overrides)


def numpy_activation(name, x):
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "swish":
        return x / (1.0 + np.exp(-x))
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))  # exact GELU, as transformers' "gelu"


@pytest.mark.parametrize("activation", ["relu", "swish", "gelu"])
def test_feed_forward_activation_matches_closed_form(activation):
    layer = FeedForward(32, activation=activation)
    x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
    outputs = to_numpy(layer(x))
    w1, b1, w2, b2 = (to_numpy(w).astype("float64") for w in layer.weights)
    expected = numpy_activation(activation, x @ w1 + b1) @ w2 + b2
    np.testing.assert_allclose(outputs, expected, atol=2e-5, rtol=0)


def options_model(seed=0, **overrides):
    """A one-layer model with every option and padding id VOCABULARY_SIZE - 1, its weights
    drawn by NumPy (the same model on every backend), biases and LayerNorms included."""
    config = small_config(VOCABULARY_SIZE, pad_id=VOCABULARY_SIZE - 1, **{**OPTIONS, **overrides})
    model = Seq2SeqTransformer(config)
    model.build()
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        name = weight.path.split("/")[-1]
        scale = 0.5 if name.endswith("bias") or name == "beta" else 0.3
        values = rng.normal(scale=scale, size=weight.shape) + (name == "gamma")
        weight.assign(values.astype("float32"))
    return model


def test_final_logits_bias_is_added_to_the_logits():
    model = options_model()
    plain = Seq2SeqTransformer(dataclasses.replace(model.config, final_logits_bias=False))
    plain.build()
    weights = {w.path: w for w in model.weights}
    for weight in plain.weights:
        weight.assign(weights[weight.path])
    pad = VOCABULARY_SIZE - 1
    inputs = {
        "encoder_token_ids": np.array([[3, 4, 5, 0, pad]], "int32"),
        "decoder_token_ids": np.array([[pad, 6, 7]], "int32"),
    }
    bias = to_numpy(model.logits_bias)
    assert np.abs(bias).max() > 0.1
    np.testing.assert_allclose(
        to_numpy(model(inputs)), to_numpy(plain(inputs)) + bias, atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("activation", ["swish", "gelu"])
def test_cached_decoding_reproduces_teacher_forcing_with_the_options(activation):
    """One-step decoding with the cache, from position 0, gives the teacher-forced logits:
    the sinusoid's offset and layout, the bias and the padding id agree on both paths."""
    model = options_model(activation=activation)
    pad = VOCABULARY_SIZE - 1
    source = np.array([[3, 4, 5, 0, pad, pad], [7, 8, 9, 10, 11, 0]], "int32")
    target = np.array([[pad, 6, 7, 8], [pad, 9, 0, 3]], "int32")
    full = to_numpy(model({"encoder_token_ids": source, "decoder_token_ids": target}))
    cache = model.initialize_cache(model.encode(source), source, target.shape[1])
    for step in range(target.shape[1]):
        logits, cache = model.decode(target[:, step : step + 1], cache, step)
        np.testing.assert_allclose(to_numpy(logits)[:, 0], full[:, step], atol=1e-5, rtol=0)
    # The padding id (last) masks source positions: other padding ids there change nothing.
    changed = source.copy()
    changed[0, 4:] = 0
    other = to_numpy(model({"encoder_token_ids": changed, "decoder_token_ids": target}))
    assert np.abs(other[0] - full[0]).max() > 1e-3


def sequence_log_prob(model, source, tokens, bos_id, eos_id, forced_eos):
    """log P(tokens + EOS); an EOS forced at the length limit counts log 1 (as transformers'
    forced_eos_token_id sets it)."""
    decoder = np.array([[bos_id, *tokens]], "int32")
    logits = to_numpy(model({"encoder_token_ids": source[None], "decoder_token_ids": decoder}))
    log_probs = to_numpy(keras.ops.log_softmax(logits[0], axis=-1)).astype("float64")
    scored = tokens if forced_eos else [*tokens, eos_id]
    return sum(log_probs[i, t] for i, t in enumerate(scored))


@pytest.mark.parametrize(("rule", "alpha"), [("average", 1.0), ("average", 0.7), ("gnmt", 0.6)])
def test_beam_scores_follow_the_length_penalty_rule(rule, alpha):
    """score = log P(output + EOS) / penalty(length + 1): length ** alpha or GNMT's.

    Some hypotheses end in EOS, others reach the limit (source ids + 4) where EOS is forced."""
    model = options_model(seed=1)
    pad, eos, bos = VOCABULARY_SIZE - 1, 0, VOCABULARY_SIZE - 1
    bias = to_numpy(model.logits_bias).copy()
    bias[eos] += 5.0  # some hypotheses end before the limit
    model.logits_bias.assign(bias)
    sources = np.array([[3, 4, 5, 0, pad], [7, 8, 9, 10, 0], [11, 12, 0, pad, pad]], "int32")
    search = build_beam_search(
        model,
        bos_id=bos,
        eos_id=eos,
        beam_size=3,
        alpha=alpha,
        length_penalty_rule=rule,
        max_extra_length=4,
        num_results=3,
    )
    tokens, scores = (to_numpy(x) for x in search(sources))
    ended = []
    for source, rows, row_scores in zip(sources, tokens, scores, strict=True):
        limit = int((source != pad).sum()) + 4
        for row, score in zip(rows, row_scores, strict=True):
            output = [int(t) for t in row if t != pad]
            forced = len(output) == limit
            length = len(output) + 1
            penalty = length**alpha if rule == "average" else ((5 + length) / 6) ** alpha
            log_prob = sequence_log_prob(model, source, output, bos, eos, forced)
            assert score == pytest.approx(log_prob / penalty, abs=1e-4)
            ended.append(not forced)
    assert len(ended) == 9 and any(ended)


def test_unknown_length_penalty_rule_is_refused():
    with pytest.raises(ValueError, match="length_penalty_rule"):
        build_beam_search(options_model(), bos_id=1, eos_id=0, length_penalty_rule="fairseq")


@pytest.fixture(scope="module")
def exportable(tmp_path_factory):
    """A model with every option (padding id 0: the SubwordTokenizer's) and its tokenizer."""
    english, german = generate_synthetic_pairs(300, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=160)
    keras.utils.set_random_seed(4)
    config = small_config(160, num_layers=2, **OPTIONS)
    model = Seq2SeqTransformer(config)
    model.build()
    rng = np.random.default_rng(4)
    for weight in model.weights:
        if weight.path.endswith("bias"):
            weight.assign(rng.normal(scale=0.5, size=weight.shape).astype("float32"))
    return model, tokenizer, english[:12]


@BACKEND_INDEPENDENT
def test_saved_model_translates_as_the_keras_model(exportable, tmp_path):
    import tensorflow as tf

    from keras_transformer.export import export_saved_model

    model, tokenizer, sentences = exportable
    decoding = dict(
        beam_size=4,
        alpha=1.0,
        length_penalty_rule="average",
        max_extra_length=6,
        max_source_length=128,
    )
    expected, expected_scores = Translator(model, tokenizer, **decoding).translate(
        sentences, return_scores=True
    )
    path = export_saved_model(model, tokenizer, tmp_path / "1", **decoding)
    outputs = tf.saved_model.load(path).signatures["serving_default"](
        sentences=tf.constant(sentences)
    )
    assert [t.decode("utf-8") for t in outputs["translations"].numpy()] == expected
    np.testing.assert_allclose(outputs["scores"].numpy(), expected_scores, atol=1e-4)
    assert len(set(expected)) > 3  # the outputs differ from sentence to sentence


@BACKEND_INDEPENDENT
def test_ctranslate2_translates_as_the_keras_model(exportable, tmp_path):
    """Greedy decoding on both: CTranslate2 reads our sinusoid table, swish and logits bias."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    import sentencepiece as spm

    from keras_transformer.export import export_ctranslate2

    model, tokenizer, sentences = exportable
    path = export_ctranslate2(model, tokenizer, tmp_path / "ct2")
    processor = spm.SentencePieceProcessor(model_proto=tokenizer.proto)
    source = [processor.encode(s, out_type=str) for s in sentences]
    banned = [[tokenizer.id_to_token(i)] for i in (tokenizer.pad_id, tokenizer.bos_id)]
    translator = ctranslate2.Translator(str(path), device="cpu")
    results = [  # one by one: the length limit is per sentence
        translator.translate_batch(
            [pieces],
            beam_size=1,
            min_decoding_length=0,
            max_decoding_length=len(pieces) + 1 + 6,
            suppress_sequences=banned,
        )[0]
        for pieces in source
    ]
    theirs = [processor.decode_pieces(r.hypotheses[0]) for r in results]
    ours = Translator(model, tokenizer, search="greedy", max_extra_length=6).translate(sentences)
    assert theirs == ours
    assert len(set(ours)) > 3
