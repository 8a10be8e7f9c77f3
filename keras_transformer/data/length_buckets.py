"""Geometric length buckets and token-budget batch sizes."""

import dataclasses
import itertools
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class LengthBuckets:
    """Bucket boundaries: bucket `k` holds lengths in `(boundaries[k-1], boundaries[k]]`.

    Every batch of bucket `k` is padded to exactly `boundaries[k]` tokens, so
    a pipeline has at most `len(boundaries)` sequence lengths.

    Example:

    >>> buckets = LengthBuckets.geometric(max_length=64, min_length=8, growth=1.2)
    >>> buckets.boundaries
    (8, 10, 12, 15, 18, 22, 27, 33, 40, 48, 58, 64)
    >>> buckets.bucket_of([3, 8, 9, 64])
    array([0, 0, 1, 11])
    """

    # Padded length of each bucket, strictly increasing.
    boundaries: tuple[int, ...]

    def __post_init__(self):
        boundaries = tuple(int(b) for b in self.boundaries)
        if (
            not boundaries
            or boundaries[0] <= 0
            or any(b >= c for b, c in itertools.pairwise(boundaries))
        ):
            raise ValueError(
                "`boundaries` must be positive and strictly increasing. "
                f"Received: boundaries={self.boundaries!r}"
            )
        object.__setattr__(self, "boundaries", boundaries)

    @classmethod
    def geometric(cls, max_length, min_length=8, growth=1.05, multiple=1):
        """Boundaries `min_length, ~min_length*growth, ...` up to `max_length`.

        Each boundary is at least one `multiple` above the previous one and
        rounded up to a multiple of `multiple`; the last is `max_length`.
        """
        if not growth > 1.0:
            raise ValueError(f"`growth` must be > 1. Received: growth={growth!r}")

        def round_up(value):
            return -(-value // multiple) * multiple

        boundaries = []
        length = round_up(min_length)
        while length < max_length:
            boundaries.append(length)
            # The epsilon keeps 20 * 1.05 = 21.000000000000004 from rounding up to 22.
            length = max(length + multiple, round_up(math.ceil(length * growth - 1e-9)))
        boundaries.append(max_length)
        return cls(tuple(boundaries))

    @property
    def max_length(self):
        return self.boundaries[-1]

    def __len__(self):
        return len(self.boundaries)

    def bucket_of(self, lengths):
        """Index of the bucket of each length; raises for lengths above `max_length`."""
        lengths = np.asarray(lengths)
        if lengths.size and lengths.max() > self.max_length:
            raise ValueError(
                f"Lengths must be at most max_length={self.max_length}. "
                f"Received: a length of {int(lengths.max())}"
            )
        return np.searchsorted(np.asarray(self.boundaries), lengths, side="left")

    def capacities(self, token_budget, num_replicas=1):
        """Largest global batch size per bucket: `(token_budget // boundary) * num_replicas`."""
        per_replica = token_budget // np.asarray(self.boundaries)
        if per_replica.min() < 1:
            raise ValueError(
                f"token_budget={token_budget} cannot hold one sequence of length {self.max_length}."
            )
        return per_replica * num_replicas

    def balanced_batch_sizes(self, counts, token_budget, num_replicas=1):
        """Per-bucket batch sizes that fit the budget and leave few padding rows.

        A bucket of `n` pairs and capacity `c` needs `m = ceil(n / c)` batches
        anyway; spreading its pairs evenly over them (`ceil(n / m)` rows,
        rounded up to a multiple of `num_replicas`) keeps the budget and
        leaves at most `m * num_replicas - 1` all-padding rows per epoch
        instead of up to `c - 1`. Empty buckets keep their capacity.

        Args:
            counts: pairs per bucket, shape (num_buckets,).
            token_budget: int. Padded tokens per side per replica.
            num_replicas: int. Batch sizes are multiples of it.

        Returns:
            int64 array (num_buckets,) of global batch sizes.
        """
        counts = np.asarray(counts, dtype=np.int64)
        capacities = self.capacities(token_budget, num_replicas).astype(np.int64)
        batches = -(-counts // capacities)  # ceil
        even = -(-counts // np.maximum(batches, 1))
        sizes = -(-even // num_replicas) * num_replicas
        return np.where(counts > 0, sizes, capacities)
