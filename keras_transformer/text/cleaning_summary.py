"""What cleaning a parallel corpus kept and dropped, with counts."""

import dataclasses

# Line numbers kept per drop reason, so a report can point at examples.
EXAMPLES_PER_REASON = 5


@dataclasses.dataclass(frozen=True)
class CleaningSummary:
    """Counts of one `clean_parallel_corpus` run. Every input pair is counted once.

    `total == kept + dropped_empty + dropped_too_long + dropped_ratio`; a pair
    failing several rules counts under the first, in that order.
    """

    # Pairs read.
    total: int
    # Pairs returned.
    kept: int
    # Pairs with an empty side (after stripping whitespace).
    dropped_empty: int
    # Pairs with a side longer than `max_length` units.
    dropped_too_long: int
    # Pairs whose longer side exceeds `max_length_ratio` times the shorter one.
    dropped_ratio: int
    # Kept pairs whose sides had leading/trailing whitespace removed.
    stripped: int
    # The limits applied, as given (None: rule off).
    max_length: int | None
    max_length_ratio: float | None
    # 1-based line numbers of the first dropped pairs, per reason.
    examples: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)

    @property
    def dropped(self):
        return self.dropped_empty + self.dropped_too_long + self.dropped_ratio

    def to_dict(self):
        return dataclasses.asdict(self)

    def __str__(self):
        def share(count):
            return f"{count} ({100.0 * count / self.total:.2f}%)" if self.total else str(count)

        def rule(name, limit, count):
            return f"  {name}: off" if limit is None else f"  {name} ({limit}): {share(count)}"

        lines = [
            f"Cleaned {self.total} pairs: kept {share(self.kept)}, dropped {share(self.dropped)}",
            f"  empty side: {share(self.dropped_empty)}",
            rule("longer than max_length", self.max_length, self.dropped_too_long),
            rule("length ratio above max_length_ratio", self.max_length_ratio, self.dropped_ratio),
            f"  kept with whitespace stripped: {self.stripped}",
        ]
        for reason, numbers in self.examples.items():
            if numbers:
                lines.append(f"  first lines dropped as {reason}: {list(numbers)}")
        return "\n".join(lines)
