"""What one epoch of a bucketed translation dataset contains, in counts."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class PipelineSummary:
    """Exact per-epoch figures of a `TranslationDataset` (computed, not sampled).

    Every epoch holds the same pairs in the same buckets, only in another
    order, so all counts here hold for every epoch. Token counts include the
    special tokens the model sees: source EOS (if added) and the target's
    BOS (decoder input) / EOS (labels), which are equally many.
    """

    # Pairs given to the pipeline.
    num_pairs: int
    # Pairs with an empty side (no tokens), left out of every epoch.
    dropped_empty: int
    # Other pairs longer than `max_length` on either side, left out of every epoch.
    dropped_too_long: int
    # Token budget per side per replica, and the replica count it was split for.
    token_budget: int
    num_replicas: int
    # Padded length of each bucket.
    boundaries: tuple[int, ...]
    # Global batch size of each bucket (a multiple of `num_replicas`).
    batch_sizes: tuple[int, ...]
    # Pairs and batches of each bucket per epoch.
    pairs_per_bucket: tuple[int, ...]
    batches_per_bucket: tuple[int, ...]
    # All-padding rows added so every batch of a bucket has the same shape.
    padding_rows: int
    # Real source tokens and real target tokens per epoch.
    source_tokens: int
    target_tokens: int
    # Padded tokens per side per epoch (source and target share the bucket length).
    padded_tokens: int

    @property
    def dropped(self):
        """Pairs left out of every epoch: with an empty side, or too long."""
        return self.dropped_empty + self.dropped_too_long

    @property
    def kept(self):
        """Pairs in every epoch."""
        return self.num_pairs - self.dropped

    @property
    def steps_per_epoch(self):
        """Batches per epoch: pass it to `model.fit(steps_per_epoch=...)`."""
        return sum(self.batches_per_bucket)

    @property
    def num_shapes(self):
        """Distinct batch shapes: one per non-empty bucket (one XLA compile each)."""
        return sum(1 for batches in self.batches_per_bucket if batches)

    @property
    def source_efficiency(self):
        """Real / padded source tokens."""
        return self.source_tokens / self.padded_tokens if self.padded_tokens else 0.0

    @property
    def target_efficiency(self):
        """Real / padded target tokens."""
        return self.target_tokens / self.padded_tokens if self.padded_tokens else 0.0

    @property
    def max_tokens_per_replica(self):
        """Largest padded tokens per side on one replica in any batch (<= token_budget)."""
        return max(
            (size // self.num_replicas * length
             for size, length, batches in zip(
                 self.batch_sizes, self.boundaries, self.batches_per_bucket, strict=True)
             if batches),
            default=0,
        )  # fmt: skip

    def to_dict(self):
        return dataclasses.asdict(self)

    def __str__(self):
        lines = [
            f"{self.kept} of {self.num_pairs} pairs per epoch "
            f"({self.dropped} dropped: {self.dropped_empty} with an empty side, "
            f"{self.dropped_too_long} longer than {self.boundaries[-1]} tokens), "
            f"{self.steps_per_epoch} batches, {self.num_shapes} shapes, "
            f"{self.padding_rows} padding rows",
            f"padding efficiency (real / padded tokens): source {self.source_efficiency:.3f}, "
            f"target {self.target_efficiency:.3f}; at most {self.max_tokens_per_replica} "
            f"padded tokens per side per replica (budget {self.token_budget})",
        ]
        return "\n".join(lines)
