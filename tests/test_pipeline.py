import collections
import itertools
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import sentencepiece as spm
from conftest import BACKEND_INDEPENDENT, small_config
from process_group import once_per_suite

from keras_transformer.data import (
    LengthBuckets,
    PipelineConfig,
    TokenizedCorpus,
    make_translation_dataset,
)
from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import ParallelCorpus, train_vocabulary

PAD, BOS, EOS = 0, 2, 3


@pytest.fixture(scope="module")
def corpus():
    english, german = generate_synthetic_pairs(1200, seed=5)
    return ParallelCorpus(english, german)


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return train_vocabulary(corpus, vocabulary_size=300)


@pytest.fixture(scope="module")
def reference_ids(corpus, tokenizer):
    """Ids from the sentencepiece library itself, independent of the pipeline."""
    processor = spm.SentencePieceProcessor(model_proto=tokenizer.proto)
    return processor.encode(list(corpus.sources)), processor.encode(list(corpus.targets))


@pytest.fixture(scope="module")
def tokenized(corpus, tokenizer):
    return TokenizedCorpus.from_corpus(corpus, tokenizer)


def take_epochs(train, epochs=1):
    """Batches of `epochs` epochs as numpy: (encoder, decoder, labels) triples."""
    batches = []
    for inputs, labels in train.dataset.take(epochs * train.steps_per_epoch):
        batches.append(
            tuple(
                keras.ops.convert_to_numpy(x)
                for x in (inputs["encoder_token_ids"], inputs["decoder_token_ids"], labels)
            )
        )
    return [batches[i * train.steps_per_epoch : (i + 1) * train.steps_per_epoch]
            for i in range(epochs)]  # fmt: skip


def decode_rows(batches):
    """(source ids, target ids) of every non-padding row, checking the framing."""
    pairs = []
    for encoder, decoder, labels in batches:
        for source_row, decoder_row, label_row in zip(encoder, decoder, labels, strict=True):
            if not label_row.any():  # an all-padding row
                assert not source_row.any() and not decoder_row.any()
                continue
            source = source_row[source_row != PAD]
            target = label_row[label_row != PAD]
            assert source[-1] == EOS and target[-1] == EOS
            assert list(decoder_row[decoder_row != PAD]) == [BOS, *target[:-1]]
            # Padding only at the end.
            assert not source_row[len(source) :].any() and not label_row[len(target) :].any()
            pairs.append((tuple(source[:-1]), tuple(target[:-1])))
    return pairs


@BACKEND_INDEPENDENT
def test_tokenized_corpus_matches_sentencepiece(tokenized, reference_ids):
    sources, targets = reference_ids
    assert len(tokenized) == len(sources)
    assert all(list(tokenized.source(i)) == sources[i] for i in range(len(sources)))
    assert all(list(tokenized.target(i)) == targets[i] for i in range(len(targets)))
    rebuilt = TokenizedCorpus.from_ids(sources, targets)
    np.testing.assert_array_equal(rebuilt.target_values, tokenized.target_values)
    np.testing.assert_array_equal(rebuilt.source_splits, tokenized.source_splits)


@BACKEND_INDEPENDENT
def test_every_pair_exactly_once_per_epoch_within_budget(corpus, tokenizer, reference_ids):
    budget = 600
    train = make_translation_dataset(corpus, tokenizer, token_budget=budget, max_length=96,
                                     min_bucket_length=8, bucket_growth=1.15)  # fmt: skip
    expected = collections.Counter(
        (tuple(s), tuple(t)) for s, t in zip(*reference_ids, strict=True)
    )
    assert train.summary.dropped_too_long == 0
    for epoch in take_epochs(train, epochs=2):
        assert len(epoch) == train.steps_per_epoch
        for encoder, decoder, labels in epoch:
            assert encoder.shape == decoder.shape == labels.shape
            assert encoder.shape[0] * encoder.shape[1] <= budget
        assert collections.Counter(decode_rows(epoch)) == expected
        real_source = sum(int((e != PAD).sum()) for e, _, _ in epoch)
        real_target = sum(int((y != PAD).sum()) for _, _, y in epoch)
        padded = sum(e.size for e, _, _ in epoch)
        summary = train.summary
        assert (real_source, real_target, padded) == (
            summary.source_tokens,
            summary.target_tokens,
            summary.padded_tokens,
        )
        padding_rows = sum(int((~y.any(axis=1)).sum()) for _, _, y in epoch)
        assert padding_rows == summary.padding_rows


@BACKEND_INDEPENDENT
def test_shapes_are_bounded_by_buckets(corpus, tokenizer):
    train = make_translation_dataset(corpus, tokenizer, token_budget=800, max_length=96,
                                     bucket_growth=1.1)  # fmt: skip
    (epoch,) = take_epochs(train)
    shapes = {labels.shape for _, _, labels in epoch}
    assert len(shapes) <= len(train.buckets)
    assert len(shapes) == train.summary.num_shapes
    summary = train.summary
    allowed = {
        (size, length)
        for size, length, count in zip(
            summary.batch_sizes, summary.boundaries, summary.batches_per_bucket, strict=True
        )
        if count
    }
    assert shapes == allowed
    for size, length in shapes:
        assert size * length <= 800
    # Balanced batch sizes: every bucket uses no more batches than its capacity forces.
    capacities = train.buckets.capacities(800)
    counts = np.asarray(summary.pairs_per_bucket)
    assert list(summary.batches_per_bucket) == list(-(-counts // capacities))


@BACKEND_INDEPENDENT
def test_order_depends_only_on_seed(tokenized, reference_ids):
    def epochs(seed):
        train = make_translation_dataset(tokenized, token_budget=500, max_length=96, seed=seed)
        return [[labels.tobytes() for _, _, labels in epoch]
                for epoch in take_epochs(train, epochs=2)]  # fmt: skip

    first, again, other = epochs(3), epochs(3), epochs(4)
    assert first == again
    assert first[0] != first[1]  # reshuffled every epoch
    assert first[0] != other[0]

    def unshuffled(seed):
        train = make_translation_dataset(tokenized, token_budget=500, max_length=96,
                                         shuffle=False, repeat=False, seed=seed)  # fmt: skip
        (epoch,) = take_epochs(train)
        assert len(list(train.dataset)) == train.steps_per_epoch  # one epoch, then the end
        return train, epoch

    train, plain = unshuffled(3)
    _, plain_other = unshuffled(4)
    # Without shuffling the seed has no say: the same batches, row for row.
    assert len(plain) == len(plain_other)
    for batch, other_batch in zip(plain, plain_other, strict=True):
        for part, other_part in zip(batch, other_batch, strict=True):
            np.testing.assert_array_equal(part, other_part)
    # ...and each bucket's pairs come in corpus order (pair length: the longer side + 1).
    sources, targets = reference_ids
    pairs = [(tuple(s), tuple(t)) for s, t in zip(sources, targets, strict=True)]
    for low, high in itertools.pairwise((0, *train.buckets.boundaries)):
        expected = [(s, t) for s, t in pairs if low < max(len(s), len(t)) + 1 <= high]
        batches = [batch for batch in plain if batch[2].shape[1] == high]
        assert decode_rows(batches) == expected, high


@BACKEND_INDEPENDENT
def test_long_pairs_are_dropped_and_counted(tokenized, reference_ids, caplog):
    max_length = 24
    train = make_translation_dataset(tokenized, token_budget=256, max_length=max_length)
    sources, targets = reference_ids
    fits = [
        max(len(s) + 1, len(t) + 1) <= max_length for s, t in zip(sources, targets, strict=True)
    ]
    assert train.summary.dropped_too_long == fits.count(False) > 0
    assert train.summary.kept == fits.count(True)
    (epoch,) = take_epochs(train)
    expected = collections.Counter(
        (tuple(s), tuple(t)) for s, t, ok in zip(sources, targets, fits, strict=True) if ok
    )
    assert collections.Counter(decode_rows(epoch)) == expected
    with pytest.raises(ValueError, match="No pair fits max_length=8"):
        make_translation_dataset(tokenized, token_budget=256, max_length=8, min_bucket_length=8)


@BACKEND_INDEPENDENT
def test_pairs_with_an_empty_side_are_dropped_and_counted(corpus, tokenizer, reference_ids):
    sources, targets = list(corpus.sources[:40]), list(corpus.targets[:40])
    sources[3], targets[8], sources[9], targets[9] = "", "  \t", "", ""
    targets[20] = " ".join(["house"] * 300)  # too long: counted as such
    train = make_translation_dataset(ParallelCorpus(sources, targets), tokenizer, token_budget=1024)
    summary = train.summary
    assert (summary.dropped_empty, summary.dropped_too_long, summary.kept) == (3, 1, 36)
    assert str(summary).startswith(
        "36 of 40 pairs per epoch (4 dropped: 3 with an empty side, 1 longer than 256 tokens)"
    )
    (epoch,) = take_epochs(train)
    ids = [(tuple(s), tuple(t)) for s, t in zip(*reference_ids, strict=True)][:40]
    expected = [pair for index, pair in enumerate(ids) if index not in (3, 8, 9, 20)]
    assert collections.Counter(decode_rows(epoch)) == collections.Counter(expected)
    empty = TokenizedCorpus.from_ids([[], [5]], [[6], []])
    with pytest.raises(ValueError, match="2 have an empty side and 0 are longer"):
        make_translation_dataset(empty, token_budget=256)


@BACKEND_INDEPENDENT
def test_replicas_get_equal_slices_within_budget(tokenized, reference_ids):
    train = make_translation_dataset(tokenized, token_budget=400, max_length=96, num_replicas=4)
    assert all(size % 4 == 0 for size in train.summary.batch_sizes)
    assert train.summary.dropped_too_long == 0
    (epoch,) = take_epochs(train)
    for _, _, labels in epoch:
        assert labels.shape[0] % 4 == 0
        assert labels.shape[0] // 4 * labels.shape[1] <= 400
    assert train.summary.max_tokens_per_replica <= 400
    # Rounding batch sizes up to a multiple of the replicas adds padding rows only:
    # no pair is dropped or repeated to fill them.
    expected = collections.Counter(
        (tuple(s), tuple(t)) for s, t in zip(*reference_ids, strict=True)
    )
    assert collections.Counter(decode_rows(epoch)) == expected


@BACKEND_INDEPENDENT
def test_process_shares_make_up_the_global_batches(tokenized):
    # JAX multi-process: P processes each yield rows [i b, (i + 1) b) of every global batch.
    settings = {"token_budget": 300, "max_length": 64, "num_replicas": 4, "seed": 3}
    (whole,) = take_epochs(make_translation_dataset(tokenized, **settings))
    shares = [
        take_epochs(make_translation_dataset(
            tokenized, **settings, num_processes=2, process_index=index))[0]
        for index in range(2)
    ]  # fmt: skip
    assert len(shares[0]) == len(shares[1]) == len(whole)
    for step, batch in enumerate(whole):
        for part, first, second in zip(batch, shares[0][step], shares[1][step], strict=True):
            half = part.shape[0] // 2
            assert first.shape == second.shape == (half, part.shape[1])
            np.testing.assert_array_equal(first, part[:half])
            np.testing.assert_array_equal(second, part[half:])
    # Some global batch is partly padding rows, so some share ends in (or is all) padding.
    assert any((labels == PAD).all(axis=1).any() for _, _, labels in shares[1])

    # Accumulation weights count the tokens of the whole group, not of one share.
    settings["accumulation_steps"] = 2
    whole = list(make_translation_dataset(tokenized, **settings).dataset.take(4))
    share = list(
        make_translation_dataset(tokenized, **settings, num_processes=2, process_index=1)
        .dataset.take(4)
    )  # fmt: skip
    for (_, labels, weights), (_, share_labels, share_weights) in zip(whole, share, strict=True):
        half = labels.shape[0] // 2
        np.testing.assert_array_equal(share_labels, labels[half:])
        np.testing.assert_array_equal(share_weights, weights[half:])


@BACKEND_INDEPENDENT
def test_length_buckets():
    buckets = LengthBuckets.geometric(max_length=200, min_length=8, growth=1.1)
    bounds = np.asarray(buckets.boundaries)
    assert bounds[0] == 8 and bounds[-1] == 200 and np.all(np.diff(bounds) >= 1)
    # Geometric growth once steps exceed one token.
    ratios = bounds[1:-1] / bounds[:-2]
    assert np.all(ratios <= 1.1 + 1 / bounds[:-2] + 1e-9)
    lengths = np.arange(1, 201)
    brute = [next(k for k, b in enumerate(bounds) if n <= b) for n in lengths]
    np.testing.assert_array_equal(buckets.bucket_of(lengths), brute)
    with pytest.raises(ValueError, match="at most max_length=200"):
        buckets.bucket_of([201])
    aligned = LengthBuckets.geometric(max_length=64, min_length=5, growth=1.3, multiple=8)
    assert aligned.boundaries == (8, 16, 24, 32, 48, 64)
    sizes = buckets.balanced_batch_sizes(np.arange(len(buckets)) * 37, 1000, num_replicas=2)
    capacities = buckets.capacities(1000, 2)
    assert np.all(sizes <= capacities) and np.all(sizes % 2 == 0)


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"token_budget": 100, "max_length": 256}, "token_budget=100"),
        ({"bucket_growth": 1.0}, "bucket_growth"),
        ({"num_replicas": 0}, "num_replicas"),
        ({"num_replicas": 3, "num_processes": 2}, "num_replicas=3, num_processes=2"),
        ({"num_replicas": 2, "num_processes": 2, "process_index": 2}, "process_index=2"),
        ({"process_index": -1}, "process_index=-1"),
        ({"max_length": 100, "length_multiple": 8}, "length_multiple=8"),
        ({"eos_id": 0}, "`eos_id` differing from `pad_id`"),
        ({"bos_id": -1}, "ids >= 0"),
    ],
)
def test_config_errors(overrides, match):
    with pytest.raises(ValueError, match=match):
        PipelineConfig(**overrides)
    with pytest.raises(ValueError, match="PipelineConfig has no field 'budget'"):
        PipelineConfig.from_dict({"budget": 3})
    # Marian's models start decoding from the padding id, fairseq's from the end id.
    assert PipelineConfig(pad_id=7, bos_id=7, eos_id=0).bos_id == 7
    assert PipelineConfig(pad_id=1, bos_id=2, eos_id=2).bos_id == 2


@BACKEND_INDEPENDENT
def test_text_corpus_needs_tokenizer(corpus):
    with pytest.raises(ValueError, match="tokenizer"):
        make_translation_dataset(corpus)


def test_model_fit_on_the_pipeline(tokenized, tokenizer):
    from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer

    train = make_translation_dataset(
        tokenized, token_budget=256, max_length=32, min_bucket_length=16, bucket_growth=2.0
    )
    assert train.summary.num_shapes <= 2  # one compile per shape on either backend
    model = Seq2SeqTransformer(small_config(tokenizer.vocabulary_size(), dropout=0.1))
    model.compile(optimizer="adam", loss=LabelSmoothedCrossEntropy())
    history = model.fit(train.dataset, steps_per_epoch=4, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])


DISTRIBUTED_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )
    from keras_transformer.data import TokenizedCorpus, make_translation_dataset

    rng = np.random.default_rng(0)
    sources = [list(rng.integers(4, 50, rng.integers(1, 30))) for _ in range(300)]
    targets = [list(rng.integers(4, 50, rng.integers(1, 30))) for _ in range(300)]
    corpus = TokenizedCorpus.from_ids(sources, targets)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    train = make_translation_dataset(corpus, token_budget=128, max_length=32, num_replicas=2,
                                     repeat=False)
    seen = 0
    for inputs, labels in strategy.experimental_distribute_dataset(train.dataset):
        parts = strategy.experimental_local_results(labels)
        assert len(parts) == 2, parts
        assert parts[0].shape == parts[1].shape, (parts[0].shape, parts[1].shape)
        assert parts[0].shape[0] * parts[0].shape[1] <= 128
        encoders = strategy.experimental_local_results(inputs["encoder_token_ids"])
        assert encoders[0].shape == parts[0].shape
        seen += sum(int(tf.reduce_any(part != 0, axis=1).numpy().sum()) for part in parts)
    assert seen == len(sources), seen
    print("DISTRIBUTED_OK", train.steps_per_epoch)
    """
)


@once_per_suite("tensorflow")
def test_experimental_distribute_dataset_splits_batches_evenly():
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", DISTRIBUTED_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "DISTRIBUTED_OK" in result.stdout, result.stdout + result.stderr
