"""The token-budget bucketing `tf.data` pipeline of paper 5.1."""

import dataclasses
import logging

import numpy as np
import tensorflow as tf

from keras_transformer.data.length_buckets import LengthBuckets
from keras_transformer.data.pipeline_config import PipelineConfig
from keras_transformer.data.pipeline_summary import PipelineSummary
from keras_transformer.data.tokenized_corpus import TokenizedCorpus

logger = logging.getLogger("keras_transformer.data")


@dataclasses.dataclass(frozen=True)
class TranslationDataset:
    """A bucketed dataset with the figures needed to train on it.

    `dataset` yields `({"encoder_token_ids": (batch, length),
    "decoder_token_ids": (batch, length)}, labels (batch, length))`, int32,
    padded with `pad_id`: encoder = source (+ EOS), decoder = BOS + target,
    labels = target + EOS. All three share the bucket's length and each
    bucket one batch size, so there are at most `len(buckets)` shapes.
    With `num_processes = P > 1` each batch holds this process's `1 / P` of
    the global batch's rows; `summary` describes the global batches.
    With `accumulation_steps = k > 1` a third element, float32 token weights
    (batch, length), equals `k / n` where `n` counts the real target tokens
    of the k consecutive batches accumulated into one update.
    """

    # The tf.data pipeline, ready for `model.fit` or `experimental_distribute_dataset`.
    dataset: tf.data.Dataset
    # Exact per-epoch counts: steps, drops, padding efficiency.
    summary: PipelineSummary
    # The length buckets batches are padded to.
    buckets: LengthBuckets
    # The settings used.
    config: PipelineConfig

    @property
    def steps_per_epoch(self):
        return self.summary.steps_per_epoch


def _check_tokenizer_ids(tokenizer, config):
    for name in ("pad_id", "bos_id", "eos_id"):
        expected = getattr(tokenizer, name, None)
        if expected is not None and expected != getattr(config, name):
            raise ValueError(
                f"The tokenizer's {name}={expected} differs from PipelineConfig "
                f"{name}={getattr(config, name)}."
            )


def make_translation_dataset(corpus, tokenizer=None, config=None, start_step=0, **config_overrides):
    """Batches a parallel corpus by length within a token budget (paper 5.1).

    Pairs are bucketed by their longer side (special tokens included) into
    geometrically growing buckets. Each bucket has one batch size with
    `batch_size / num_replicas * boundary <= token_budget`, and every batch
    is padded to its bucket boundary, and to the bucket's batch size with
    all-padding rows (labels all `pad_id`, which the loss ignores): so the
    dataset has at most one shape per bucket. Every kept pair appears
    exactly once per epoch; the order (and so the batches) depends only on
    `seed` and the epoch number. Pairs with an empty side (no tokens: an
    empty or blank line) and pairs longer than `max_length` are dropped and
    counted in the summary (and logged as a warning).

    Args:
        corpus: a `ParallelCorpus` (tokenized with `tokenizer`) or a
            `TokenizedCorpus`.
        tokenizer: a `SubwordTokenizer`; needed for a `ParallelCorpus`.
        config: a `PipelineConfig`; None uses the defaults.
        start_step: int. Batches already trained on (after a resume: the
            optimizer's batch counter). The dataset starts with batch
            `start_step` of the uninterrupted sequence, so training continues
            from the exact data position; earlier epochs are skipped without
            being tokenized or padded.
        **config_overrides: `PipelineConfig` fields replacing those of `config`.

    Returns:
        A `TranslationDataset` (`.dataset`, `.summary`, `.steps_per_epoch`).

    Example:

    >>> train = make_translation_dataset(corpus, tokenizer, token_budget=4096)
    >>> print(train.summary)
    >>> model.fit(train.dataset, steps_per_epoch=train.steps_per_epoch, epochs=10)

    With a `tf.distribute` strategy, split the budget per replica:

    >>> train = make_translation_dataset(
    ...     corpus, tokenizer, num_replicas=strategy.num_replicas_in_sync)
    >>> distributed = strategy.experimental_distribute_dataset(train.dataset)

    JAX on several hosts (after `keras.distribution.initialize()`): every
    process yields its share of each global batch.

    >>> keras.distribution.set_distribution(
    ...     keras.distribution.DataParallel(auto_shard_dataset=False))
    >>> train = make_translation_dataset(
    ...     corpus, tokenizer, num_replicas=jax.device_count(),
    ...     num_processes=jax.process_count(), process_index=jax.process_index())

    Token-weighted gradient accumulation over 4 batches:

    >>> train = make_translation_dataset(corpus, tokenizer, accumulation_steps=4)
    >>> model.compile(optimizer=paper_optimizer(512, accumulation_steps=4),
    ...               loss=LabelSmoothedCrossEntropy(reduction="sum"))
    """
    config = config or PipelineConfig()
    if isinstance(config, dict):
        config = PipelineConfig.from_dict(config)
    if config_overrides:
        config = config.replace(**config_overrides)
    if not isinstance(corpus, TokenizedCorpus):
        if tokenizer is None:
            raise ValueError(
                "A `tokenizer` is needed to tokenize a text corpus; pass one, or pass a "
                f"TokenizedCorpus. Received: corpus of type {type(corpus).__name__}"
            )
        _check_tokenizer_ids(tokenizer, config)
        corpus = TokenizedCorpus.from_corpus(corpus, tokenizer)
    elif tokenizer is not None:
        _check_tokenizer_ids(tokenizer, config)

    buckets = LengthBuckets.geometric(
        config.max_length, config.min_bucket_length, config.bucket_growth, config.length_multiple
    )
    source_lengths = corpus.source_lengths + int(config.add_source_eos)  # (pairs,)
    target_lengths = corpus.target_lengths + 1  # BOS + target, and target + EOS
    pair_lengths = np.maximum(source_lengths, target_lengths)
    # A side without tokens counts as empty, whatever its length with the special tokens.
    empty = (corpus.source_lengths == 0) | (corpus.target_lengths == 0)
    too_long = ~empty & (pair_lengths > config.max_length)
    kept = np.flatnonzero(~empty & ~too_long)  # (kept_pairs,)
    if kept.size == 0:
        raise ValueError(
            f"No pair fits max_length={config.max_length}: of all {len(corpus)} pairs, "
            f"{int(empty.sum())} have an empty side and {int(too_long.sum())} are longer."
        )
    bucket_of = np.full(len(corpus), -1, dtype=np.int64)  # -1: dropped
    bucket_of[kept] = buckets.bucket_of(pair_lengths[kept])
    counts = np.bincount(bucket_of[kept], minlength=len(buckets))
    batch_sizes = buckets.balanced_batch_sizes(counts, config.token_budget, config.num_replicas)
    batches = -(-counts // batch_sizes)
    boundaries = np.asarray(buckets.boundaries, dtype=np.int64)
    summary = PipelineSummary(
        num_pairs=len(corpus),
        dropped_empty=int(empty.sum()),
        dropped_too_long=int(too_long.sum()),
        token_budget=config.token_budget,
        num_replicas=config.num_replicas,
        boundaries=buckets.boundaries,
        batch_sizes=tuple(int(size) for size in batch_sizes),
        pairs_per_bucket=tuple(int(count) for count in counts),
        batches_per_bucket=tuple(int(count) for count in batches),
        padding_rows=int((batches * batch_sizes - counts).sum()),
        source_tokens=int(source_lengths[kept].sum()),
        target_tokens=int(target_lengths[kept].sum()),
        padded_tokens=int((batches * batch_sizes * boundaries).sum()),
    )
    if summary.dropped:
        logger.warning("Translation dataset: %s", summary)
    else:
        logger.info("Translation dataset: %s", summary)

    if isinstance(start_step, bool) or not isinstance(start_step, int) or start_step < 0:
        raise ValueError(f"`start_step` must be an int >= 0. Received: start_step={start_step!r}")
    if not config.repeat and start_step >= summary.steps_per_epoch:
        raise ValueError(
            f"`start_step`={start_step} is past the single epoch of "
            f"{summary.steps_per_epoch} batches (repeat=False)."
        )
    label_lengths = np.asarray(target_lengths, dtype=np.int64)  # (pairs,) target + EOS
    dataset = _bucketed_dataset(
        corpus,
        kept,
        bucket_of,
        batch_sizes,
        boundaries,
        label_lengths,
        config,
        start_step,
        summary.steps_per_epoch,
    )
    return TranslationDataset(dataset, summary, buckets, config)


def _first_epoch(start_step, steps_per_epoch, accumulation_steps):
    """The latest epoch at or before `start_step` whose first batch opens an update.

    Accumulation groups are counted from batch 0 of epoch 0; starting the stream at an
    epoch whose first batch index is a multiple of `accumulation_steps` keeps them
    aligned with the optimizer's updates.
    """
    epoch = start_step // steps_per_epoch
    while (epoch * steps_per_epoch) % accumulation_steps:
        epoch -= 1
    return epoch


def _bucketed_dataset(
    corpus,
    kept,
    bucket_of,
    batch_sizes,
    boundaries,
    label_lengths,
    config,
    start_step,
    steps_per_epoch,
):
    sources = tf.RaggedTensor.from_row_splits(
        tf.constant(corpus.source_values), tf.constant(corpus.source_splits)
    )
    targets = tf.RaggedTensor.from_row_splits(
        tf.constant(corpus.target_values), tf.constant(corpus.target_splits)
    )
    kept = tf.constant(kept, dtype=tf.int64)
    bucket_of = tf.constant(bucket_of, dtype=tf.int64)
    batch_sizes = tf.constant(batch_sizes, dtype=tf.int64)
    boundaries = tf.constant(boundaries, dtype=tf.int64)

    def epoch(epoch_index):
        positions = tf.range(tf.size(kept, out_type=tf.int64), dtype=tf.int64)
        if config.shuffle:
            # Stateless: the order is a function of (seed, epoch) alone, so
            # restarts and reruns see the same batches.
            seed = tf.stack([tf.constant(config.seed, tf.int64), epoch_index])
            positions = tf.random.experimental.stateless_shuffle(positions, seed=seed)
        # Grouping runs on scalar pair indices; ids are gathered per batch.
        # Windows still open at the end of the epoch come out as partial
        # batches, so no pair waits for (or leaks into) the next epoch.
        return tf.data.Dataset.from_tensor_slices(tf.gather(kept, positions)).group_by_window(
            key_func=lambda index: tf.gather(bucket_of, index),
            reduce_func=lambda key, window: window.batch(tf.gather(batch_sizes, key)),
            window_size_func=lambda key: tf.gather(batch_sizes, key),
        )

    label_lengths = tf.constant(label_lengths, dtype=tf.int64)

    def with_group_weight(window):  # window: dataset of k index batches
        tokens = window.reduce(
            tf.constant(0, tf.int64),
            lambda total, indices: total + tf.reduce_sum(tf.gather(label_lengths, indices)),
        )
        weight = config.accumulation_steps / tf.cast(tf.maximum(tokens, 1), tf.float32)
        return window.map(lambda indices: (indices, weight))

    def to_model_inputs(indices, weight=None):  # indices: (rows,) int64, rows <= bucket size
        bucket = tf.gather(bucket_of, indices[0])
        batch_size = tf.gather(batch_sizes, bucket) // config.num_processes  # this process's
        shape = tf.stack([batch_size, tf.gather(boundaries, bucket)])
        if config.num_processes > 1:
            # Rows [i b, (i + 1) b) of the global batch; a share past the last real row is
            # all padding rows. The accumulation weight was computed on the whole group.
            indices = indices[config.process_index * batch_size :][:batch_size]
        rows = tf.shape(indices, out_type=tf.int64)[0]

        def column(token_id):  # (rows, 1) ragged
            return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([rows, 1]), token_id))

        source = tf.gather(sources, indices)  # (rows, None)
        target = tf.gather(targets, indices)
        if config.add_source_eos:
            source = tf.concat([source, column(config.eos_id)], axis=1)
        decoder_input = tf.concat([column(config.bos_id), target], axis=1)
        labels = tf.concat([target, column(config.eos_id)], axis=1)

        def pad(ragged):  # -> (batch_size, boundary): pads rows and columns
            return ragged.to_tensor(default_value=config.pad_id, shape=shape)

        inputs = {"encoder_token_ids": pad(source), "decoder_token_ids": pad(decoder_input)}
        labels = pad(labels)
        if weight is None:
            return inputs, labels
        return inputs, labels, tf.fill(tf.shape(labels), weight)

    first = 0
    if config.repeat:
        first = _first_epoch(start_step, steps_per_epoch, config.accumulation_steps)
    epochs = tf.data.Dataset.counter(start=first) if config.repeat else tf.data.Dataset.range(1)
    # Index batches are cheap: grouping for accumulation and skipping to the resume
    # position happen before any token is gathered or padded.
    batches = epochs.flat_map(epoch)
    if config.accumulation_steps > 1:
        batches = batches.window(config.accumulation_steps).flat_map(with_group_weight)
    batches = batches.skip(start_step - first * steps_per_epoch)
    dataset = batches.map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if config.prefetch:
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = True
    # Every worker builds the same in-memory pipeline; shard by batches, not files.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)
