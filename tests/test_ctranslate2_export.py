"""The CTranslate2 export scores and translates like the Keras model it came from.

Two computation paths on the same weights: CTranslate2's C++ Transformer against our model.
The precise check is teacher forcing (per-token log-probabilities of the same targets, for
post-LN and pre-LN, shared, separate and tied embeddings, learned and sinusoidal positions,
attention with biases); the end-to-end one is beam search on a model trained for a few hundred
steps, with settings under which both searches provably rank hypotheses alike.
"""

import os

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, to_numpy

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, TransformerConfig
from keras_transformer.commands.export import main as export_main
from keras_transformer.decoding import Translator
from keras_transformer.decoding.translator import to_token_lists
from keras_transformer.export import export_ctranslate2, save_translation_model
from keras_transformer.export.ctranslate2_export import TOKENIZER_FILE, import_ctranslate2
from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import train_vocabulary

pytestmark = BACKEND_INDEPENDENT

ctranslate2 = pytest.importorskip(
    "ctranslate2", reason="ctranslate2 is not installed (pip install 'keras-transformer-mt[dev]')"
)

VOCABULARY_SIZE = 160
SIZES = dict(num_layers=2, d_model=32, num_heads=4, intermediate_dim=64, dropout=0.0)
# Teacher-forced log-probabilities: both compute in float32, in different orders.
LOG_PROB_TOLERANCE = 1e-3
MAX_PIECES = 28


def short_pairs(tokenizer, english, german, count):
    """The first `count` pairs whose sides have at most MAX_PIECES pieces: fast to train on."""
    lengths = zip(
        to_token_lists(tokenizer(english)), to_token_lists(tokenizer(german)), strict=True
    )
    keep = [i for i, (s, t) in enumerate(lengths) if max(len(s), len(t)) <= MAX_PIECES][:count]
    assert len(keep) == count
    return [english[i] for i in keep], [german[i] for i in keep]


@pytest.fixture(scope="module")
def corpus():
    english, german = generate_synthetic_pairs(4000, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=VOCABULARY_SIZE)
    train = short_pairs(tokenizer, english, german, 896)
    test = short_pairs(tokenizer, *generate_synthetic_pairs(1000, seed=1), 200)
    return tokenizer, train, test


def teacher_forcing_arrays(tokenizer, sources, targets):
    """(encoder ids + EOS, BOS + decoder ids, target ids + EOS), padded with 0."""
    rows = list(
        zip(to_token_lists(tokenizer(sources)), to_token_lists(tokenizer(targets)), strict=True)
    )
    length = max(max(len(s), len(t)) for s, t in rows) + 1
    source, decoder, labels = (np.zeros((len(rows), length), "int32") for _ in range(3))
    for row, (s, t) in enumerate(rows):
        source[row, : len(s) + 1] = [*s, tokenizer.eos_id]
        decoder[row, : len(t) + 1] = [tokenizer.bos_id, *t]
        labels[row, : len(t) + 1] = [*t, tokenizer.eos_id]
    return source, decoder, labels


@pytest.fixture(scope="module")
def trained(corpus):
    """The paper's architecture, tiny, trained until its beam outputs are real translations."""
    tokenizer, (english, german), _ = corpus
    keras.utils.set_random_seed(5)
    model = Seq2SeqTransformer(TransformerConfig(vocabulary_size=VOCABULARY_SIZE, **SIZES))
    source, decoder, labels = teacher_forcing_arrays(tokenizer, english, german)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=LabelSmoothedCrossEntropy())
    inputs = {"encoder_token_ids": source, "decoder_token_ids": decoder}
    model.fit(inputs, labels, batch_size=32, epochs=8, verbose=0)  # 224 steps
    return model


@pytest.fixture(scope="module")
def exported(trained, corpus, tmp_path_factory):
    directory = tmp_path_factory.mktemp("ct2")
    return {
        quantization: export_ctranslate2(
            trained, corpus[0], directory / (quantization or "float32"), quantization=quantization
        )
        for quantization in (None, "int8")
    }


def pieces(tokenizer, sentences):
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=tokenizer.proto)
    return [processor.encode(sentence, out_type=str) for sentence in sentences]


def ctranslate2_log_probs(path, tokenizer, sources, targets, compute_type="default"):
    translator = ctranslate2.Translator(path, device="cpu", compute_type=compute_type)
    results = translator.score_batch(pieces(tokenizer, sources), pieces(tokenizer, targets))
    return [np.array(result.log_probs) for result in results]


def keras_log_probs(model, tokenizer, sources, targets):
    source, decoder, labels = teacher_forcing_arrays(tokenizer, sources, targets)
    logits = to_numpy(model({"encoder_token_ids": source, "decoder_token_ids": decoder}))
    log_probs = to_numpy(keras.ops.log_softmax(logits, axis=-1))
    gathered = np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    return [row[: int((label != 0).sum())] for row, label in zip(gathered, labels, strict=True)]


def max_difference(ours, theirs):
    assert [len(row) for row in ours] == [len(row) for row in theirs]
    return max(float(np.abs(a - b).max()) for a, b in zip(ours, theirs, strict=True))


def randomize_biases_and_norms(model, seed):
    """Non-trivial biases, LayerNorm scales and offsets, so that a misplaced one shows."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        name = variable.path.split("/")[-1]
        if name in ("bias", "beta", "gamma", "final_logits_bias"):
            noise = rng.normal(scale=0.3, size=variable.shape).astype("float32")
            variable.assign(noise + (1.0 if name == "gamma" else 0.0))


@pytest.mark.parametrize(
    "options",
    [
        # Pre-LN, separate source/target embeddings, untied projection, learned positions.
        dict(
            normalize_first=True,
            share_embeddings=False,
            tie_output_projection=False,
            position_embedding="learned",
            max_position=128,
            attention_bias=True,
        ),
        # Post-LN, shared embeddings, untied projection, no sqrt(d_model) scale, d_k != d/h.
        dict(tie_output_projection=False, scale_embeddings=False, key_dim=4, value_dim=4),
        # Pre-LN, everything shared and tied, sinusoid, biases.
        dict(normalize_first=True, attention_bias=True),
        # What imports set: fairseq's sinusoid from position 2, GELU, a logits bias.
        dict(
            position_layout="halves",
            position_frequencies="fairseq",
            position_offset=2,
            activation="gelu",
            final_logits_bias=True,
            attention_bias=True,
        ),
    ],
    ids=[
        "pre_ln-separate-learned-bias",
        "post_ln-untied-unscaled-head_dim",
        "pre_ln-tied-bias",
        "halves-fairseq-offset-gelu-logits_bias",
    ],
)
def test_log_probs_match_architecture_variants(corpus, tmp_path, options):
    tokenizer, _, (english, german) = corpus
    keras.utils.set_random_seed(3)
    model = Seq2SeqTransformer(
        TransformerConfig(vocabulary_size=VOCABULARY_SIZE, **SIZES, **options)
    )
    model.build()
    randomize_biases_and_norms(model, seed=4)
    path = export_ctranslate2(model, tokenizer, tmp_path / "model")
    sources, targets = english[:16], german[:16]
    ours = keras_log_probs(model, tokenizer, sources, targets)
    theirs = ctranslate2_log_probs(path, tokenizer, sources, targets)
    assert max_difference(ours, theirs) <= LOG_PROB_TOLERANCE


def test_log_probs_match_trained_model(trained, corpus, exported):
    tokenizer, _, (english, german) = corpus
    ours = keras_log_probs(trained, tokenizer, english[:64], german[:64])
    theirs = ctranslate2_log_probs(exported[None], tokenizer, english[:64], german[:64])
    assert max_difference(ours, theirs) <= LOG_PROB_TOLERANCE
    # Trained: the references are far likelier than uniform guesses (log(1/160) = -5.1).
    assert np.mean(np.concatenate(ours)) > -2.5


def ctranslate2_translate(path, tokenizer, sentences, compute_type="default"):
    """Beam 4 ranked by the sum of log-probabilities, as `Translator(alpha=0)` ranks.

    `length_penalty=0` divides by length ** 0 = 1 and enables CTranslate2's early exit: a
    sentence stops when its best candidate ends, which no live beam can beat since
    log-probabilities only fall; ours keeps going until beam_size finished hypotheses beat
    every live beam, which changes nothing for the best one. `min_decoding_length=0` allows
    an empty translation, as ours does.
    """
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=tokenizer.proto)
    translator = ctranslate2.Translator(path, device="cpu", compute_type=compute_type)
    source = pieces(tokenizer, sentences)
    results = translator.translate_batch(
        source,
        beam_size=4,
        length_penalty=0.0,
        min_decoding_length=0,
        max_decoding_length=max(map(len, source)) + 1 + 50,
        return_scores=True,
        max_batch_size=32,
    )
    translations = [processor.decode_pieces(r.hypotheses[0]) for r in results]
    return translations, [r.scores[0] for r in results]


def test_beam_search_matches_translator(trained, corpus, exported):
    tokenizer, _, (english, _) = corpus
    translator = Translator(trained, tokenizer, beam_size=4, alpha=0.0, max_extra_length=50)
    ours, our_scores = translator.translate(english, return_scores=True, verbose=0)
    theirs, their_scores = ctranslate2_translate(exported[None], tokenizer, english)
    same = [a == b for a, b in zip(ours, theirs, strict=True)]
    assert np.mean(same) >= 0.99, [(a, b) for a, b in zip(ours, theirs, strict=True) if a != b]
    # Trained: translations are sentences of their own, not one output for every input.
    assert len(set(ours)) > len(ours) // 2
    agreeing = np.flatnonzero(same)
    np.testing.assert_allclose(
        np.array(their_scores)[agreeing], np.array(our_scores)[agreeing], atol=1e-3
    )


def test_int8_export_runs_close(trained, corpus, exported):
    tokenizer, _, (english, german) = corpus
    float32 = ctranslate2_log_probs(exported[None], tokenizer, english[:64], german[:64])
    int8 = ctranslate2_log_probs(exported["int8"], tokenizer, english[:64], german[:64])
    # Quantized, so not equal; per-token log-probabilities stay close.
    differences = np.abs(np.concatenate(float32) - np.concatenate(int8))
    assert 0 < differences.mean() < 0.05 and differences.max() < 1.0, differences
    # This briefly trained model's distributions are flat, so int8 rounding flips some
    # near-ties in beam search; most translations stay the same.
    translations, _ = ctranslate2_translate(exported["int8"], tokenizer, english[:100])
    reference, _ = ctranslate2_translate(exported[None], tokenizer, english[:100])
    assert np.mean([a == b for a, b in zip(translations, reference, strict=True)]) >= 0.5
    # The int8 directory holds int8 weights: smaller than float32's.
    sizes = [os.path.getsize(os.path.join(exported[q], "model.bin")) for q in (None, "int8")]
    assert sizes[1] < 0.6 * sizes[0]


def test_export_directory_contents_and_config(corpus, exported):
    import json

    path = exported[None]
    with open(os.path.join(path, TOKENIZER_FILE), "rb") as file:
        assert file.read() == corpus[0].proto
    with open(os.path.join(path, "config.json"), encoding="utf-8") as file:
        config = json.load(file)
    assert config["add_source_eos"] is True and config["add_source_bos"] is False
    assert config["decoder_start_token"] == "<s>" and config["eos_token"] == "</s>"
    with open(os.path.join(path, "shared_vocabulary.json"), encoding="utf-8") as file:
        vocabulary = json.load(file)
    assert len(vocabulary) == VOCABULARY_SIZE and vocabulary[:4] == [
        "<pad>",
        "<unk>",
        "<s>",
        "</s>",
    ]
    # No temporary directory left next to the export.
    assert sorted(os.listdir(os.path.dirname(path))) == ["float32", "int8"]


def test_command_line(trained, corpus, tmp_path, capsys):
    model_path = tmp_path / "translator.keras"
    save_translation_model(trained, corpus[0], model_path)
    output = tmp_path / "ct2"
    arguments = ["--format", "ctranslate2", "--model", str(model_path), "--output", str(output)]
    assert export_main([*arguments, "--quantization", "int8"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "int8" in captured.err
    assert os.path.isfile(output / "model.bin") and os.path.isfile(output / TOKENIZER_FILE)
    before = os.path.getmtime(output / "model.bin")

    # An existing export is kept unless --overwrite.
    with pytest.raises(SystemExit) as exit_info:
        export_main(arguments)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "exists; pass --overwrite" in error and len(error.strip().splitlines()) == 1
    assert os.path.getmtime(output / "model.bin") == before
    assert export_main([*arguments, "--overwrite"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["ct2", "translator.keras"]

    for bad in (["--quantization", "int4"], ["--format", "onnx"]):
        with pytest.raises(SystemExit) as exit_info:
            export_main([*arguments, *bad])
        assert exit_info.value.code == 2
        assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        export_main(
            ["--model", str(model_path), "--output", str(tmp_path / "sm")]
            + ["--quantization", "int8"]
        )
    assert exit_info.value.code == 2
    assert "--quantization goes with --format ctranslate2" in capsys.readouterr().err


def test_missing_ctranslate2_says_how_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ctranslate2", None)
    with pytest.raises(ImportError, match=r"pip install 'keras-transformer-mt\[ctranslate2\]'"):
        import_ctranslate2()


def test_bad_arguments_leave_nothing_behind(corpus, tmp_path):
    tokenizer = corpus[0]
    model = Seq2SeqTransformer(TransformerConfig(vocabulary_size=VOCABULARY_SIZE + 1, **SIZES))
    with pytest.raises(ValueError, match="vocabulary has 161 ids but the tokenizer has 160"):
        export_ctranslate2(model, tokenizer, tmp_path / "model")
    with pytest.raises(ValueError, match="`quantization` must be one of"):
        export_ctranslate2(model, tokenizer, tmp_path / "model", quantization="int4")
    assert os.listdir(tmp_path) == []
