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


@pytest.mark.parametrize("accumulation_steps", [1, 2])
def test_warmup_from_an_initial_rate_matches_fairseq_inverse_sqrt(accumulation_steps):
    # fairseq's inverse_sqrt: init + (peak - init) * step / warmup, then peak * sqrt(warmup / step).
    d_model, warmup, scale, initial = 128, 2000, 2.53, 1e-7
    peak = scale * d_model**-0.5 * warmup**-0.5
    schedule = TransformerSchedule(
        d_model, warmup, scale=scale, accumulation_steps=accumulation_steps, initial_rate=initial
    )
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule)
    )
    assert restored.get_config() == schedule.get_config()
    assert schedule.get_config()["initial_rate"] == initial
    for step_num in (1, 7, 1000, 1999, 2000, 2001, 8000):
        expected = (
            initial + (peak - initial) * step_num / warmup
            if step_num <= warmup
            else peak * (warmup / step_num) ** 0.5
        )
        batch = (step_num - 1) * accumulation_steps
        for s in (schedule, restored):
            assert float(to_numpy(s(batch))) == pytest.approx(expected, rel=1e-5)


def test_paper_optimizer_passes_the_initial_rate_and_adam_settings():
    optimizer = paper_optimizer(
        d_model=128, warmup_steps=10, initial_rate=1e-4, epsilon=1e-8, global_clipnorm=25.0
    )
    assert (optimizer.epsilon, optimizer.global_clipnorm) == (1e-8, 25.0)
    variable = keras.Variable(np.ones(3, "float32"))
    optimizer.build([variable])
    peak = 128**-0.5 * 10**-0.5
    expected = 1e-4 + (peak - 1e-4) / 10  # step_num 1
    assert float(to_numpy(optimizer.learning_rate)) == pytest.approx(expected, rel=1e-5)


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
    "kwargs, name",
    [
        ({"d_model": 0}, "d_model"),
        ({"d_model": 8, "warmup_steps": -1}, "warmup"),
        ({"d_model": 8, "warmup_steps": 4, "initial_rate": 1.0}, r"initial_rate=1\.0"),
        ({"d_model": 8, "initial_rate": -1e-7}, "initial_rate"),
    ],
)
def test_schedule_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        TransformerSchedule(**kwargs)
