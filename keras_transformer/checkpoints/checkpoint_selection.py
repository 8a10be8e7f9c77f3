"""`select_checkpoint`: the kept checkpoint (or average) that scores best on held-out data."""

import dataclasses
import math
import os

from keras_transformer.checkpoints.averaging import average_checkpoints


@dataclasses.dataclass(frozen=True)
class CheckpointSelection:
    """What `select_checkpoint` compared and what it chose."""

    # Name of the chosen candidate, e.g. "average of last 10" or "ckpt-000600".
    selected: str
    # Every candidate's score, in the order they were tried.
    scores: dict
    # Whether the scores rank highest first (BLEU) or lowest first (perplexity).
    higher_is_better: bool = False

    def format(self):
        listed = ", ".join(f"{name} {score:.3f}" for name, score in self.scores.items())
        order = "higher" if self.higher_is_better else "lower"
        return f"selected {self.selected} (scores, {order} is better: {listed})"


def checkpoint_candidates(paths, average_last, average_all=False):
    """The candidates a run offers for selection: each checkpoint alone and the average.

    Args:
        paths: the run's checkpoint files, oldest first (`latest_checkpoints`).
        average_last: int or None. Adds the average of the last
            `average_last` files (paper 6.1) as a candidate, tried first.
        average_all: bool. Also add the average of all `paths`, second,
            when there are more than `average_last` (a run that keeps more
            checkpoints than it averages lets valid choose the span).

    Returns:
        dict name -> list of paths to average (one path: that checkpoint).
    """
    candidates = {}
    if average_last and len(paths) > 1:
        last = list(paths[-average_last:])
        candidates[f"average of last {len(last)}"] = last
        if average_all and len(paths) > len(last):
            candidates[f"average of last {len(paths)}"] = list(paths)
    for path in paths:
        name = os.path.basename(path).split(".", 1)[0]
        candidates[name] = [path]
    return candidates


def select_checkpoint(model, candidates, score, higher_is_better=False):
    """Loads each candidate into `model`, scores it, and keeps the best in `model`.

    Selection on a validation set, as small-data recipes do (the paper
    instead averages the last checkpoints of a fixed number of steps, 6.1).
    Each candidate is a list of checkpoint files whose weights are averaged
    (`average_checkpoints`; a single file is loaded exactly). Ties keep the
    earlier candidate, so put the preferred default first.

    Args:
        model: the built model the checkpoints were written from.
        candidates: dict name -> list of checkpoint paths, e.g. from
            `checkpoint_candidates`.
        score: callable `score(model) -> float`, lower is better (for
            example valid perplexity) unless `higher_is_better` (valid
            BLEU). Must not change the weights.
        higher_is_better: bool.

    Returns:
        A `CheckpointSelection`; `model` holds the chosen weights.

    Example:

    >>> candidates = checkpoint_candidates(latest_checkpoints("ckpts", 10), 10)
    >>> choice = select_checkpoint(model, candidates, lambda m: perplexity(m, valid))
    >>> print(choice.format())
    """
    if not candidates:
        raise ValueError("`candidates` is empty: there is no checkpoint to select from.")
    scores = {}
    for name, paths in candidates.items():
        average_checkpoints(model, paths)
        value = float(score(model))
        if math.isnan(value):
            raise ValueError(f"The score of candidate {name!r} ({paths}) is NaN.")
        scores[name] = value
    sign = -1.0 if higher_is_better else 1.0
    selected = min(scores, key=lambda name: sign * scores[name])  # the first of equal scores
    average_checkpoints(model, candidates[selected])
    return CheckpointSelection(selected=selected, scores=scores, higher_is_better=higher_is_better)
