"""Token ids of a parallel corpus, stored as flat arrays with row offsets."""

import dataclasses

import numpy as np
import tensorflow as tf

# Sentences per tokenizer call when tokenizing a corpus inside tf.data.
TOKENIZE_BATCH_SIZE = 4096


def _flatten(rows, name):
    lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    splits = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=splits[1:])
    values = np.fromiter(
        (token for row in rows for token in row), dtype=np.int64, count=int(splits[-1])
    )
    if values.size and (values.min() < 0 or values.max() > np.iinfo(np.int32).max):
        raise ValueError(f"`{name}` must hold int32 token ids >= 0.")
    return values.astype(np.int32), splits


def _tokenize(sentences, tokenizer):
    # The tokenizer runs as tensorflow-text ops inside tf.data: the same path
    # as in an exported graph, and batched in C++ rather than per sentence.
    dataset = (
        tf.data.Dataset.from_tensor_slices(tf.constant(list(sentences), dtype=tf.string))
        .batch(TOKENIZE_BATCH_SIZE)
        .map(tokenizer, num_parallel_calls=tf.data.AUTOTUNE)
    )
    values, lengths = [], []
    for ragged in dataset:
        values.append(ragged.flat_values.numpy())
        lengths.append(ragged.row_lengths().numpy())
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    splits = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=splits[1:])
    values = np.concatenate(values).astype(np.int32) if values else np.zeros(0, np.int32)
    return values, splits


@dataclasses.dataclass(frozen=True)
class TokenizedCorpus:
    """Source and target ids of every pair, without special tokens.

    Pair `i` has source ids `source_values[source_splits[i]:source_splits[i+1]]`
    and likewise for the target (the row-splits layout of `tf.RaggedTensor`).

    Example:

    >>> tokenized = TokenizedCorpus.from_corpus(corpus, tokenizer)
    >>> tokenized.source_lengths[:3]
    array([14, 9, 21])
    """

    # int32 (total_source_tokens,): all source ids, pair after pair.
    source_values: np.ndarray
    # int64 (num_pairs + 1,): where each pair's source starts; last = total.
    source_splits: np.ndarray
    # int32 (total_target_tokens,): all target ids.
    target_values: np.ndarray
    # int64 (num_pairs + 1,): where each pair's target starts.
    target_splits: np.ndarray

    def __post_init__(self):
        for side in ("source", "target"):
            values = getattr(self, f"{side}_values")
            splits = getattr(self, f"{side}_splits")
            if splits.ndim != 1 or splits.size < 1 or splits[0] != 0 or splits[-1] != values.size:
                raise ValueError(
                    f"`{side}_splits` must start at 0 and end at len({side}_values)="
                    f"{values.size}. Received: splits of shape {splits.shape}"
                )
            if np.any(np.diff(splits) < 0):
                raise ValueError(f"`{side}_splits` must be non-decreasing.")
        if self.source_splits.size != self.target_splits.size:
            raise ValueError(
                "Source and target must have the same number of pairs. Received: "
                f"{self.source_splits.size - 1} sources, {self.target_splits.size - 1} targets"
            )

    @classmethod
    def from_corpus(cls, corpus, tokenizer):
        """Tokenizes both sides of `corpus` with `tokenizer` inside `tf.data`.

        Args:
            corpus: a `ParallelCorpus` (or anything with `.sources` and `.targets`).
            tokenizer: a `SubwordTokenizer` or `JointVocabularyTokenizer` (any
                layer mapping a batch of strings to a `tf.RaggedTensor` of ids;
                targets go through its `tokenize_target` where it has one).
        """
        source_values, source_splits = _tokenize(corpus.sources, tokenizer)
        target_tokenizer = getattr(tokenizer, "tokenize_target", tokenizer)
        target_values, target_splits = _tokenize(corpus.targets, target_tokenizer)
        return cls(source_values, source_splits, target_values, target_splits)

    @classmethod
    def from_ids(cls, source_ids, target_ids):
        """Builds a corpus from two lists of id lists (already tokenized)."""
        source_values, source_splits = _flatten(list(source_ids), "source_ids")
        target_values, target_splits = _flatten(list(target_ids), "target_ids")
        return cls(source_values, source_splits, target_values, target_splits)

    def __len__(self):
        return self.source_splits.size - 1

    @property
    def source_lengths(self):
        return np.diff(self.source_splits)

    @property
    def target_lengths(self):
        return np.diff(self.target_splits)

    def source(self, index):
        return self.source_values[self.source_splits[index] : self.source_splits[index + 1]]

    def target(self, index):
        return self.target_values[self.target_splits[index] : self.target_splits[index + 1]]
