"""Validation while training: metrics, the best checkpoint, patience, resume."""

import csv
import os

import keras
import numpy as np
import pytest
import sacrebleu
from conftest import numpy_perplexity, small_config, to_numpy

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer
from keras_transformer.checkpoints import (
    PeriodicCheckpoint,
    read_checkpoint_metadata,
    restore_training_state,
)
from keras_transformer.data import make_translation_dataset
from keras_transformer.decoding import Translator
from keras_transformer.decoding.translator import to_token_lists
from keras_transformer.evaluation import ValidationCallback
from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import ParallelCorpus, train_vocabulary

VOCABULARY = 120


@pytest.fixture(scope="module")
def data():
    english, german = generate_synthetic_pairs(200, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=VOCABULARY)
    return tokenizer, english, german


def compiled_model(learning_rate=1e-2, seed=7):
    keras.utils.set_random_seed(seed)
    model = Seq2SeqTransformer(small_config(VOCABULARY))
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=LabelSmoothedCrossEntropy())
    model.build()
    return model


def train_arrays(tokenizer, english, german, examples):
    """Padded (inputs, labels) of the first `examples` pairs, length 12 each side."""
    ids = np.zeros((2, examples, 12), "int32")
    for side, texts in enumerate((english, german)):
        for row, tokens in enumerate(to_token_lists(tokenizer(texts[:examples]))):
            tokens = tokens[:11] + [tokenizer.eos_id]
            ids[side, row, : len(tokens)] = tokens
    decoder = np.concatenate([np.full((examples, 1), tokenizer.bos_id, "int32"), ids[1, :, :-1]], 1)
    return {"encoder_token_ids": ids[0], "decoder_token_ids": decoder}, ids[1]


def valid_batches(tokenizer, english, german):
    corpus = ParallelCorpus(english[150:170], german[150:170])
    # Seven batches of three shapes (the default buckets give 15 of 15): JAX compiles the
    # dev-set program once per shape, which took most of this file's time.
    return make_translation_dataset(
        corpus, tokenizer, token_budget=256, shuffle=False, repeat=False, bucket_growth=2.0
    ).dataset.cache()


def fit(model, arrays, steps, callbacks):
    inputs, labels = arrays
    count = {key: value[: 2 * steps] for key, value in inputs.items()}
    model.fit(count, labels[: 2 * steps], batch_size=2, epochs=1, verbose=0, callbacks=callbacks)


def read_rows(path):
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def test_metrics_equal_an_independent_computation_and_search_is_traced_once(
    data, tmp_path, capsys, monkeypatch
):
    tokenizer, english, german = data
    sources = english[100:116]
    # References: the untouched model's own greedy outputs for half the sentences and
    # the synthetic German for the others, so BLEU is strictly between 0 and 100 (the
    # first initialization, per backend, whose outputs are not all too short for 4-grams).
    model = compiled_model(learning_rate=0.0)  # lr 0: one model throughout
    translator = Translator(model, tokenizer, search="greedy", max_extra_length=5)
    for seed in range(7, 12):
        # Another initialization in the same model: the compiled search reads the new weights
        # (a new model would compile another search, which takes seconds on JAX).
        model.set_weights(compiled_model(seed=seed).get_weights())
        outputs = translator.translate(sources)
        references = [out if i % 2 else german[100 + i] for i, out in enumerate(outputs)]
        expected_bleu = sacrebleu.corpus_bleu(outputs, [references]).score
        if 0 < expected_bleu < 100:
            break
    assert 0 < expected_bleu < 100
    batches = valid_batches(tokenizer, english, german)
    expected_perplexity = numpy_perplexity(model, batches.as_numpy_iterator())

    traces = []
    encode = model.encode
    monkeypatch.setattr(model, "encode", lambda *a, **k: traces.append(1) or encode(*a, **k))
    translator = Translator(model, tokenizer, search="greedy", max_extra_length=5)  # a new one
    callback = ValidationCallback(
        translator, sources, references, batches, every_steps=2, log_dir=tmp_path
    )
    traced = []  # (traces before, traces after) each validation
    validate = callback.validate

    def counted(step):
        before = len(traces)
        metrics = validate(step)
        traced.append((before, len(traces)))
        return metrics

    callback.validate = counted
    fit(model, train_arrays(tokenizer, english, german, 20), 6, [callback])
    rows = read_rows(tmp_path / ValidationCallback.CSV_NAME)
    assert [int(row["step"]) for row in rows] == [2, 4, 6]
    for row in rows:
        assert float(row["bleu"]) == pytest.approx(expected_bleu, abs=1e-9)
        assert float(row["perplexity"]) == pytest.approx(expected_perplexity, rel=1e-5)
        assert float(row["loss"]) == pytest.approx(np.log(expected_perplexity), rel=1e-5)
    # The compiled search was traced in the first validation (step 2) and never again. On
    # torch the search runs eagerly: the encoder runs at every validation, nothing is traced.
    if keras.backend.backend() != "torch":
        assert traced[0][0] < traced[0][1]
        assert all(before == after for before, after in traced[1:]), traced
    assert os.listdir(tmp_path / "validation")  # TensorBoard events
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("valid")]
    assert len(lines) == 3
    assert lines[0].startswith(f"valid step 2 | loss {np.log(expected_perplexity):.3f} | ")
    assert f"BLEU {expected_bleu:.2f} (16 sentences)" in lines[0]
    assert f"best bleu {expected_bleu:.2f} at step 2 (new)" in lines[0]
    assert f"best bleu {expected_bleu:.2f} at step 2, 2 since" in lines[2]


def test_trained_weights_are_seen_and_beam_search_is_scored(data, tmp_path):
    tokenizer, english, german = data
    model = compiled_model(learning_rate=1e-2)
    sources, references = english[100:108], german[100:108]
    translator = Translator(model, tokenizer, beam_size=2, max_extra_length=5)
    before = translator.translate(sources)
    callback = ValidationCallback(translator, sources, references, None, every_steps=3)
    fit(model, train_arrays(tokenizer, english, german, 20), 3, [callback])
    # A fresh translator (a new compiled program) on the trained weights.
    fresh = Translator(model, tokenizer, beam_size=2, max_extra_length=5).translate(sources)
    assert before != fresh  # the three updates changed the outputs
    (step, metrics), = callback.history  # fmt: skip
    assert step == 3 and metrics["perplexity"] is None
    assert metrics["bleu"] == sacrebleu.corpus_bleu(fresh, [references]).score


def fake_metrics(callback, values):
    """Makes `callback` report `values` as BLEU, one per validation."""
    values = iter(values)
    callback.compute_metrics = lambda **_: {"loss": None, "perplexity": None, "bleu": next(values)}


class KeepWeights(keras.callbacks.Callback):
    """The model's weights after each step."""

    def __init__(self):
        super().__init__()
        self.weights = []

    def on_train_batch_end(self, batch, logs=None):
        self.weights.append([to_numpy(w).copy() for w in self.model.weights])


def checkpoint_weights(model, path):
    copy = compiled_model()
    restore_training_state(copy, path)
    return [to_numpy(w) for w in copy.weights]


def test_final_checkpoint_off_the_period_is_validated_and_logged(data, tmp_path):
    # The recipes' order: validation before the checkpoint, which validates after each save.
    # Training ends at step 3, between checkpoints every 2 steps: the checkpoint saves step 3
    # in its on_train_end, after the validation callback's has closed its TensorBoard writer.
    import tensorflow as tf

    tokenizer, english, german = data
    directory = tmp_path / "checkpoints"
    checkpoint = PeriodicCheckpoint(
        directory, every_steps=2, every_minutes=None, keep=2, average_last=None
    )
    validation = ValidationCallback(
        None, ["a"], ["a"], None, log_dir=tmp_path, best_dir=directory, best_metric="bleu"
    )
    checkpoint.after_save = validation.validate
    fake_metrics(validation, [10.0, 20.0])
    fit(compiled_model(), train_arrays(tokenizer, english, german, 20), 3, [validation, checkpoint])
    assert "ckpt-00000003.weights.h5" in os.listdir(directory)
    rows = read_rows(tmp_path / ValidationCallback.CSV_NAME)
    assert [(r["step"], r["bleu"]) for r in rows] == [("2", "10.0"), ("3", "20.0")]
    logged = {}
    for path in (tmp_path / "validation").iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                logged[(event.step, value.tag)] = float(tf.make_ndarray(value.tensor))
    assert logged == {(2, "bleu"): 10.0, (3, "bleu"): 20.0}


def test_best_checkpoint_survives_rotation_and_resume(data, tmp_path):
    tokenizer, english, german = data
    arrays = train_arrays(tokenizer, english, german, 20)
    directory = tmp_path / "checkpoints"
    model = compiled_model()
    checkpoint = PeriodicCheckpoint(
        directory, every_steps=1, every_minutes=None, keep=2, average_last=None
    )
    validation = ValidationCallback(
        None, ["a"], ["a"], None, log_dir=tmp_path, best_dir=directory, best_metric="bleu"
    )
    checkpoint.after_save = validation.validate  # at every checkpoint, as the recipes do
    fake_metrics(validation, [10.0, 30.0, 20.0, 25.0])
    weights = KeepWeights()
    fit(model, arrays, 4, [validation, checkpoint, weights])
    # Rotation kept steps 3 and 4; best.weights.h5 (step 2) is not a rotated checkpoint.
    assert sorted(os.listdir(directory)) == [
        "best.weights.h5",
        "ckpt-00000003.weights.h5",
        "ckpt-00000004.weights.h5",
    ]
    best = directory / "best.weights.h5"
    assert read_checkpoint_metadata(best) == {"step": 2, "metric": "bleu", "value": 30.0}
    for got, want in zip(checkpoint_weights(model, best), weights.weights[1], strict=True):
        np.testing.assert_array_equal(got, want)
    rows = read_rows(tmp_path / ValidationCallback.CSV_NAME)
    assert [(r["step"], r["best_step"], r["best"]) for r in rows] == [
        ("1", "1", "10.0"), ("2", "2", "30.0"), ("3", "2", "30.0"), ("4", "2", "30.0"),
    ]  # fmt: skip

    # Resume from step 4: the best and the two validations since it come back.
    resumed = compiled_model()
    start = PeriodicCheckpoint(directory, every_steps=1, every_minutes=None).restore(resumed)
    again = ValidationCallback(
        None, ["a"], ["a"], None, log_dir=tmp_path, best_dir=directory, start_step=start
    )
    again.set_model(resumed)
    again.on_train_begin()
    assert (again.best, again.best_step, again.without_improvement) == (30.0, 2, 2)
    # Resume from step 3 (step 4's file lost): the validation of step 4 is forgotten.
    os.remove(directory / "ckpt-00000004.weights.h5")
    resumed = compiled_model()
    start = PeriodicCheckpoint(directory, every_steps=1, every_minutes=None).restore(resumed)
    assert start == 3
    again = ValidationCallback(
        None, ["a"], ["a"], None, log_dir=tmp_path, best_dir=directory, start_step=start
    )
    again.set_model(resumed)
    again.on_train_begin()
    assert (again.best, again.best_step, again.without_improvement) == (30.0, 2, 1)
    assert [r["step"] for r in read_rows(tmp_path / ValidationCallback.CSV_NAME)] == [
        "1", "2", "3",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "metric, values, stops_after",
    [
        ("bleu", [5.0, 6.0, 6.0, 5.5, 7.0, 8.0], 4),  # a tie is no improvement
        ("perplexity", [9.0, 8.0, 8.5, 7.9, 8.0, 7.95, 7.0], 6),
    ],
)
def test_patience_stops_after_that_many_validations_without_improvement(
    data, tmp_path, metric, values, stops_after
):
    tokenizer, english, german = data
    model = compiled_model()
    validation = ValidationCallback(
        None, ["a"], ["a"], None, every_steps=1, best_metric=metric, patience=2
    )
    values = iter(values)
    validation.compute_metrics = lambda **_: {
        "loss": None, "perplexity": None, "bleu": None, metric: next(values),
    }  # fmt: skip
    checkpoint = PeriodicCheckpoint(
        tmp_path, every_steps=100, every_minutes=None, keep=2, average_last=1
    )
    fit(model, train_arrays(tokenizer, english, german, 20), 10, [validation, checkpoint])
    assert validation.stopped
    assert [step for step, _ in validation.history] == list(range(1, stops_after + 1))
    assert int(to_numpy(model.optimizer.iterations)) == stops_after
    # A clean stop: the final checkpoint was written (and averaged) at that step.
    assert os.listdir(tmp_path) == [f"ckpt-{stops_after:08d}.weights.h5"]


def test_patience_on_a_real_plateau(data, tmp_path):
    # Learning rate 0: the real metrics never change, so patience 2 ends at validation 3.
    tokenizer, english, german = data
    model = compiled_model(learning_rate=0.0)
    translator = Translator(model, tokenizer, search="greedy", max_extra_length=3)
    validation = ValidationCallback(
        translator,
        english[100:104],
        german[100:104],
        valid_batches(tokenizer, english, german),
        every_steps=2,
        best_metric="perplexity",
        patience=2,
    )
    fit(model, train_arrays(tokenizer, english, german, 20), 10, [validation])
    assert [step for step, _ in validation.history] == [2, 4, 6]
    assert int(to_numpy(model.optimizer.iterations)) == 6


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="best_metric"):
        ValidationCallback(None, ["a"], ["a"], None, best_metric="chrf")
    with pytest.raises(ValueError, match="patience"):
        ValidationCallback(None, ["a"], ["a"], None, patience=-1)
    with pytest.raises(ValueError, match="2 sources but 1 references"):
        ValidationCallback(None, ["a", "b"], ["a"], None)


def test_lowercase_bleu_ignores_case_and_only_case(data):
    _, english, german = data

    class CaseFoldedTranslator:  # a model trained on case-folded text writes lowercase
        def translate(self, sources, verbose=0):
            return [german[english.index(source)].lower() for source in sources]

    sources = english[100:116]
    outputs = CaseFoldedTranslator().translate(sources)
    references = german[100:108] + german[120:128]  # half right but for case, half wrong
    bleu = {}
    for lowercase in (False, True):
        callback = ValidationCallback(
            CaseFoldedTranslator(), sources, references, None, lowercase=lowercase
        )
        callback.set_model(compiled_model())
        bleu[lowercase] = callback.compute_metrics()["bleu"]
    assert bleu[True] == pytest.approx(
        sacrebleu.corpus_bleu(outputs, [references], lowercase=True).score, abs=1e-9
    )
    assert bleu[False] == pytest.approx(sacrebleu.corpus_bleu(outputs, [references]).score)
    assert 0 < bleu[False] < bleu[True] - 10 and bleu[True] < 100
