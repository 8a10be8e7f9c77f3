import keras
import numpy as np
import pytest
from conftest import to_numpy

from keras_transformer.training import TransformerSchedule, paper_optimizer


def paper_rate(step_num, d_model=512, warmup=4000):
    return d_model**-0.5 * min(step_num**-0.5, step_num * warmup**-1.5)


@pytest.mark.parametrize("step_num", [1, 4000, 100000])
def test_schedule_matches_formula(step_num):
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    # The optimizer passes its 0-based iteration counter: update k uses step_num = k + 1.
    rate = float(to_numpy(schedule(step_num - 1)))
    assert rate == pytest.approx(paper_rate(step_num), rel=1e-6)


def test_schedule_peaks_at_warmup():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    steps = np.arange(0, 20000, 7, dtype="int64")
    rates = to_numpy(schedule(steps))
    assert steps[np.argmax(rates)] + 1 == pytest.approx(4000, abs=7)
    peak = float(to_numpy(schedule(3999)))
    assert peak == pytest.approx(512**-0.5 * 4000**-0.5, rel=1e-6)
    assert peak >= rates.max()
    assert np.all(np.diff(rates[steps < 3999]) > 0)
    assert np.all(np.diff(rates[steps >= 3999]) < 0)


@pytest.mark.parametrize("accumulation_steps", [1, 3])
def test_schedule_serializes(accumulation_steps):
    schedule = TransformerSchedule(
        d_model=256, warmup_steps=100, scale=2.0, accumulation_steps=accumulation_steps
    )
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule)
    )
    assert isinstance(restored, TransformerSchedule)
    # Batch b belongs to update b // accumulation_steps, whose step_num is one more.
    for batch in (0, 50, 299, 1000):
        step_num = batch // accumulation_steps + 1
        expected = 2.0 * paper_rate(step_num, d_model=256, warmup=100)
        for s in (schedule, restored):
            assert float(to_numpy(s(batch))) == pytest.approx(expected, rel=1e-6)


def test_paper_optimizer_settings_and_rate():
    optimizer = paper_optimizer(d_model=512)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    variable = keras.Variable(np.ones(3, "float32"))
    optimizer.build([variable])
    assert float(to_numpy(optimizer.learning_rate)) == pytest.approx(paper_rate(1), rel=1e-6)
    restored = keras.optimizers.Adam.from_config(optimizer.get_config())
    assert restored.get_config()["learning_rate"]["class_name"] == "TransformerSchedule"
    assert float(to_numpy(restored.learning_rate)) == pytest.approx(paper_rate(1), rel=1e-6)


@pytest.mark.parametrize(
    "kwargs, name", [({"d_model": 0}, "d_model"), ({"d_model": 8, "warmup_steps": -1}, "warmup")]
)
def test_schedule_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        TransformerSchedule(**kwargs)
