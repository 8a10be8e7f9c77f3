"""Selection among kept checkpoints and their average by a held-out score."""

import math

import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, to_numpy
from test_checkpoint_averaging import make_model

from keras_transformer.checkpoints import (
    CheckpointSelection,
    checkpoint_candidates,
    select_checkpoint,
)

pytestmark = BACKEND_INDEPENDENT


def flat(model):
    return np.concatenate([to_numpy(v).astype("float64").ravel() for v in model.weights])


@pytest.fixture
def three_checkpoints(tmp_path):
    """Three checkpoints of different weights, and those weights flattened."""
    paths, weights = [], []
    for step, seed in ((100, 1), (200, 2), (300, 3)):
        model = make_model(seed)
        paths.append(str(tmp_path / f"ckpt-{step:06d}.weights.h5"))
        model.save_weights(paths[-1])
        weights.append(flat(model))
    return paths, weights


def test_candidates_are_the_average_then_each_checkpoint(three_checkpoints):
    paths, _ = three_checkpoints
    candidates = checkpoint_candidates(paths, average_last=2)
    assert list(candidates) == ["average of last 2", "ckpt-000100", "ckpt-000200", "ckpt-000300"]
    assert candidates["average of last 2"] == paths[1:]
    assert candidates["ckpt-000200"] == [paths[1]]
    # A run that keeps more than it averages: the average of all of them comes second.
    everything = checkpoint_candidates(paths, average_last=2, average_all=True)
    assert list(everything)[:2] == ["average of last 2", "average of last 3"]
    assert everything["average of last 3"] == paths and len(everything) == 5
    assert len(checkpoint_candidates(paths, average_last=3, average_all=True)) == 4
    # One checkpoint, or no averaging: only the checkpoints themselves.
    assert list(checkpoint_candidates(paths[:1], average_last=5)) == ["ckpt-000100"]
    assert list(checkpoint_candidates(paths, average_last=None)) == [
        "ckpt-000100",
        "ckpt-000200",
        "ckpt-000300",
    ]


@pytest.mark.parametrize("best", ["ckpt-000200", "average of last 3"])
def test_the_lowest_score_wins_and_stays_in_the_model(three_checkpoints, best):
    paths, weights = three_checkpoints
    # Squared distance to a target: checkpoint 2's weights, or the mean of all three.
    target = weights[1] if best == "ckpt-000200" else np.mean(weights, axis=0)
    model = make_model(seed=7)
    choice = select_checkpoint(
        model,
        checkpoint_candidates(paths, average_last=3),
        lambda m: float(np.sum((flat(m) - target) ** 2)),
    )
    assert isinstance(choice, CheckpointSelection)
    assert choice.selected == best
    expected = {
        "average of last 3": np.sum((np.mean(weights, axis=0) - target) ** 2),
        **{
            f"ckpt-{step:06d}": np.sum((w - target) ** 2)
            for step, w in zip((100, 200, 300), weights, strict=True)
        },
    }
    assert list(choice.scores) == list(expected)
    for name, value in expected.items():
        assert choice.scores[name] == pytest.approx(value, rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(flat(model), target, rtol=0, atol=1e-6)
    assert best in choice.format()


def test_ties_keep_the_first_candidate(three_checkpoints):
    paths, weights = three_checkpoints
    model = make_model(seed=7)
    choice = select_checkpoint(model, checkpoint_candidates(paths, 3), lambda m: 1.0)
    assert choice.selected == "average of last 3"
    np.testing.assert_allclose(flat(model), np.mean(weights, axis=0), rtol=0, atol=1e-6)


def test_bad_candidates_and_scores_are_named(three_checkpoints):
    paths, _ = three_checkpoints
    with pytest.raises(ValueError, match="empty"):
        select_checkpoint(make_model(seed=7), {}, lambda m: 1.0)
    with pytest.raises(ValueError, match=r"ckpt-000100.*NaN"):
        select_checkpoint(make_model(seed=7), {"ckpt-000100": paths[:1]}, lambda m: math.nan)
