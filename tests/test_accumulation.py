"""Token-weighted gradient accumulation and resuming the pipeline at an exact batch."""

import keras
import numpy as np
import pytest
from conftest import small_config, to_numpy

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer
from keras_transformer.data import TokenizedCorpus, make_translation_dataset
from keras_transformer.training import paper_optimizer

VOCAB = 40


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 30, size=(2, 240))
    sources = [list(rng.integers(4, VOCAB, n)) for n in lengths[0]]
    targets = [list(rng.integers(4, VOCAB, n)) for n in lengths[1]]
    return TokenizedCorpus.from_ids(sources, targets)


def pipeline(corpus, **overrides):
    settings = dict(token_budget=128, max_length=32, min_bucket_length=8, bucket_growth=1.5)
    return make_translation_dataset(corpus, **{**settings, **overrides})


def as_numpy(dataset, count):
    """(encoder ids, decoder ids, labels[, weights]) of the first `count` batches."""
    batches = []
    for inputs, *rest in dataset.take(count):
        tensors = (inputs["encoder_token_ids"], inputs["decoder_token_ids"], *rest)
        batches.append(tuple(to_numpy(x) for x in tensors))
    return batches


def test_weights_are_k_over_the_group_token_count(corpus):
    k = 3
    plain = pipeline(corpus)
    grouped = pipeline(corpus, accumulation_steps=k)
    count = 2 * plain.steps_per_epoch + 1  # crosses an epoch boundary mid-group
    reference = as_numpy(plain.dataset, count)
    batches = as_numpy(grouped.dataset, count)
    for index, batch in enumerate(batches):
        *tensors, weights = batch
        for got, expected in zip(tensors, reference[index], strict=True):
            np.testing.assert_array_equal(got, expected)  # same batches, same order
        group = reference[(index // k) * k : (index // k + 1) * k]
        tokens = sum(int((labels != 0).sum()) for *_, labels in group)
        assert weights.shape == tensors[-1].shape
        np.testing.assert_allclose(weights, k / tokens, rtol=1e-6)


@pytest.mark.parametrize("accumulation_steps", [1, 2, 3])
def test_start_step_continues_the_uninterrupted_stream(corpus, accumulation_steps):
    full = pipeline(corpus, accumulation_steps=accumulation_steps)
    steps = full.steps_per_epoch
    reference = as_numpy(full.dataset, 3 * steps + 2)
    for start in (1, steps - 1, steps, 2 * steps + 1):
        resumed = pipeline(corpus, accumulation_steps=accumulation_steps, start_step=start)
        got = as_numpy(resumed.dataset, 3)
        # An empty or short resumed stream must not pass: three batches, each the reference's.
        assert len(got) == 3, (start, len(got))
        for batch, expected in zip(got, reference[start : start + 3], strict=True):
            for a, b in zip(batch, expected, strict=True):
                np.testing.assert_array_equal(a, b)


def test_start_step_past_a_single_epoch_is_an_error(corpus):
    steps = pipeline(corpus).steps_per_epoch
    with pytest.raises(ValueError, match="start_step"):
        pipeline(corpus, repeat=False, start_step=steps)
    with pytest.raises(ValueError, match="start_step"):
        pipeline(corpus, start_step=-1)


def small_model(seed=11):
    keras.utils.set_random_seed(seed)
    model = Seq2SeqTransformer(small_config(VOCAB))
    model.build()
    return model


def union_batch(batches):
    """One batch holding every row of `batches`, padded to the longest length."""
    length = max(batch[0].shape[1] for batch in batches)

    def stacked(position):
        rows = [np.pad(b[position], ((0, 0), (0, length - b[position].shape[1]))) for b in batches]
        return np.concatenate(rows)

    inputs = {"encoder_token_ids": stacked(0), "decoder_token_ids": stacked(1)}
    return inputs, stacked(2)


def weights_after(model):
    return np.concatenate([np.ravel(to_numpy(w)) for w in model.trainable_weights])


def test_accumulating_k_batches_equals_one_step_on_their_union(corpus):
    k = 3
    grouped = pipeline(corpus, accumulation_steps=k, shuffle=False)
    batches = as_numpy(grouped.dataset, k)
    lengths = {batch[0].shape[1] for batch in batches}
    tokens = [int((batch[2] != 0).sum()) for batch in batches]
    assert len(set(tokens)) > 1, "the batches must hold different token counts"

    accumulated = small_model()
    initial = weights_after(accumulated)
    accumulated.compile(
        optimizer=keras.optimizers.SGD(1.0, gradient_accumulation_steps=k),
        loss=LabelSmoothedCrossEntropy(reduction="sum"),
    )
    accumulated.fit(grouped.dataset, steps_per_epoch=k, epochs=1, verbose=0, shuffle=False)

    union = small_model()
    union.compile(optimizer=keras.optimizers.SGD(1.0), loss=LabelSmoothedCrossEntropy())
    inputs, labels = union_batch(batches)
    union.train_on_batch(inputs, labels)

    # Keras' own accumulation of per-batch means weights each batch equally.
    naive = small_model()
    naive.compile(
        optimizer=keras.optimizers.SGD(1.0, gradient_accumulation_steps=k),
        loss=LabelSmoothedCrossEntropy(),
    )
    naive.fit(
        pipeline(corpus, shuffle=False).dataset, steps_per_epoch=k, epochs=1, verbose=0,
        shuffle=False,
    )  # fmt: skip

    expected = weights_after(union)
    assert np.abs(expected - initial).max() > 1e-2  # the step moved the weights
    np.testing.assert_allclose(weights_after(accumulated), expected, atol=1e-5)
    assert np.abs(weights_after(naive) - expected).max() > 1e-4, lengths


def test_schedule_counts_updates_not_batches():
    optimizer = paper_optimizer(d_model=64, warmup_steps=10, accumulation_steps=4)
    assert optimizer.gradient_accumulation_steps == 4
    schedule = optimizer._learning_rate
    rates = to_numpy(schedule(np.arange(8)))
    np.testing.assert_allclose(rates[:4], rates[0])  # batches 0-3: update 1
    np.testing.assert_allclose(rates[4:], 64**-0.5 * 2 * 10**-1.5, rtol=1e-6)  # update 2
    with pytest.raises(ValueError, match="accumulation_steps"):
        paper_optimizer(d_model=64, gradient_accumulation_steps=4)
