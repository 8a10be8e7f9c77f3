"""Runs whose loss diverges: judged at every save and at the end, whatever the log interval;
one line naming the step and the last good checkpoint, nothing diverged kept; the documented
recovery (a lower learning-rate scale, more warmup) resumes from the last good checkpoint."""

import csv
import json
import math
import os
import re

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT
from test_command_errors import run_in_process

from keras_transformer.checkpoints import PeriodicCheckpoint
from keras_transformer.experiment.run_end import stopped_by_loss
from keras_transformer.training import TrainingMonitor
from keras_transformer.training.divergence_watch import TrainingDivergedError

# The quickstart recipe on a tiny generated corpus and a one-layer model. With a warmup of 60
# steps, `--learning-rate-scale 60` trains normally for 40 steps, then the loss climbs from
# about 6 to 60 by step 60. With a warmup of 100, `--learning-rate-scale 10000` diverges from
# the first steps.
TINY_QUICKSTART = [
    "train", "--recipe", "quickstart", "--synthetic-sizes", "400", "10", "12",
    "--vocabulary-size", "300", "--token-budget", "256", "--model-override", "num_layers=1",
    "--model-override", "d_model=32", "--model-override", "num_heads=2",
    "--model-override", "intermediate_dim=64", "--no-export", "--no-validate",
    "--max-extra-length", "5", "--verbose", "0", "--max-steps", "60",
]  # fmt: skip
CHECKPOINT_NAME = re.compile(r"ckpt-\d{8}\.weights\.h5$")


def checkpoints(run):
    return sorted(name for name in os.listdir(run / "checkpoints") if CHECKPOINT_NAME.match(name))


def error_lines(stderr):
    return [line for line in stderr.splitlines() if "error:" in line]


def fit_with_a_jump(tmp_path, steps, every_steps, divergence_steps=3):
    """A `fit` of `steps` one-sample batches whose loss jumps a million-fold from step 9."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse")
    x = np.ones((steps, 2), "float32")
    y = np.where(np.arange(steps) < 8, 1.0, 1000.0).astype("float32")[:, None]
    monitor = TrainingMonitor(str(tmp_path), every_steps=every_steps,
                              divergence_steps=divergence_steps)  # fmt: skip
    checkpoint = PeriodicCheckpoint(str(tmp_path / "checkpoints"), every_steps=2,
                                    every_minutes=None, keep=10, average_last=None,
                                    hold_saves=monitor.divergence_suspect)  # fmt: skip
    with pytest.raises(TrainingDivergedError) as raised:
        model.fit(x, y, batch_size=1, epochs=1, shuffle=False, verbose=0,
                  callbacks=[monitor, checkpoint])  # fmt: skip
    checkpoint.restore_signal_handlers()
    return raised.value, sorted(os.listdir(tmp_path / "checkpoints"))


def test_the_watch_judges_before_each_save_between_log_records(tmp_path):
    # Records every 100 steps: none before the end. The save of step 10 judges steps 9-10.
    error, saved = fit_with_a_jump(tmp_path, steps=16, every_steps=100)
    assert "from step 9 to step 12" in str(error) and error.first_step == 9
    assert saved == [f"ckpt-{step:08d}.weights.h5" for step in (2, 4, 6, 8)]


def test_a_fit_that_ends_inside_a_divergence_raises_whatever_the_patience(tmp_path):
    error, saved = fit_with_a_jump(tmp_path, steps=12, every_steps=100, divergence_steps=200)
    assert "from step 9 to the last step, 12" in str(error) and error.first_step == 9
    assert saved == [f"ckpt-{step:08d}.weights.h5" for step in (2, 4, 6, 8)]


@BACKEND_INDEPENDENT
def test_averaging_no_checkpoint_keeps_the_weights_with_a_warning(tmp_path, capsys):
    checkpoint = PeriodicCheckpoint(str(tmp_path), every_steps=2, average_last=2)
    assert checkpoint.average_into(keras.Sequential([keras.Input((2,))])) == []
    assert "WARNING: no checkpoint in" in capsys.readouterr().err


@BACKEND_INDEPENDENT
def test_checkpoints_of_the_diverged_steps_are_set_aside(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for step in (10, 20, 30, 40, 50, 60):
        (folder / f"ckpt-{step:08d}.weights.h5").write_bytes(b"weights")
    checkpoint = PeriodicCheckpoint(str(folder), every_steps=10)
    error = stopped_by_loss(TrainingDivergedError("Training diverged.", first_step=41),
                            checkpoint, None)  # fmt: skip
    message = str(error)
    assert isinstance(error, TrainingDivergedError) and error.first_step == 41
    assert f"last good checkpoint: {folder / 'ckpt-00000040.weights.h5'}" in message
    assert "renamed: ckpt-00000050.weights.h5.diverged, ckpt-00000060.weights.h5.diverged" in (
        message
    )
    assert checkpoint.last_checkpoint() == str(folder / "ckpt-00000040.weights.h5")
    assert sorted(os.listdir(folder))[-2:] == [
        "ckpt-00000050.weights.h5.diverged",
        "ckpt-00000060.weights.h5.diverged",
    ]


@BACKEND_INDEPENDENT
def test_a_run_diverging_between_log_records_ends_with_one_line_and_recovers(tmp_path):
    run = tmp_path / "run"
    first = [*TINY_QUICKSTART, "--output-dir", str(run), "--warmup-steps", "60",
             "--checkpoint-every-steps", "10", "--learning-rate-scale", "60"]  # fmt: skip
    status, stdout, stderr = run_in_process(first)
    errors = error_lines(stderr)
    assert (status, stdout, len(errors)) == (1, "", 1), stderr[-3000:]
    # Judged at the save of step 50 (the log's first record would be at step 100).
    assert "Training diverged" in errors[0] and "from step 41 to the last step, 60" in errors[0]
    last_good = run / "checkpoints" / "ckpt-00000040.weights.h5"
    assert f"last good checkpoint: {last_good};" in errors[0]
    assert "lower --learning-rate-scale (or more --warmup-steps) to resume from it" in errors[0]
    assert checkpoints(run) == [f"ckpt-{step:08d}.weights.h5" for step in (10, 20, 30, 40)]
    assert not (run / "model.keras").exists() and "Final model" not in stderr
    # The documented recovery: the same command with a lower scale and a longer warmup.
    again = [*first[:-1], "6", "--warmup-steps", "120"]
    status, stdout, stderr = run_in_process(again)
    assert (status, error_lines(stderr)) == (0, []), stderr[-3000:]
    assert f"Resuming from {last_good} (batch 40)." in stderr
    assert re.search(r"Final model: the average of the last 5 checkpoints in \S+ \(steps "
                     r"20 to 60; --final-model average", stderr), stderr  # fmt: skip
    assert re.search(r"Finished 60 steps in [\d.]+ minutes \([\d.]+ in this process, which "
                     r"resumed at step 40\)\.", stdout), stdout  # fmt: skip
    settings = json.loads((run / "config.json").read_text())
    assert len(settings["command_lines"]) == 2
    assert settings["setting_changes"] == [
        {
            "command_line": 1,
            "from_step": 40,
            "changed": {"learning_rate_scale": [60.0, 6.0], "warmup_steps": [60, 120]},
        }
    ]
    assert settings["experiment"]["optimization"]["learning_rate_scale"] == 6.0
    with open(run / "train_log.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    # The rate of step 60 is the new schedule's: 6 * 32^-0.5 * 60 * 120^-1.5.
    assert float(rows[-1]["learning_rate"]) == pytest.approx(6 * 32**-0.5 * 60 * 120**-1.5)
    assert float(rows[-1]["loss"]) < math.log(300) + 1  # at its level again (step 41-60: 61)


@BACKEND_INDEPENDENT
def test_a_run_diverged_from_its_first_steps_names_no_checkpoint_and_averages_none(tmp_path):
    run = tmp_path / "run"
    argv = [*TINY_QUICKSTART, "--output-dir", str(run), "--warmup-steps", "100",
            "--checkpoint-every-steps", "20", "--log-every-steps", "10",
            "--learning-rate-scale", "10000"]  # fmt: skip
    status, stdout, stderr = run_in_process(argv)
    errors = error_lines(stderr)
    assert (status, stdout, len(errors)) == (1, "", 1), stderr[-3000:]
    assert "Training diverged" in errors[0] and "from step 1 to the last step, 60" in errors[0]
    assert f"last good checkpoint: none in {run / 'checkpoints'}" in errors[0]
    assert "positive int" not in stderr and checkpoints(run) == []
    warnings = [line for line in stderr.splitlines() if "--warmup-steps 100" in line]
    assert warnings == [
        "WARNING: --max-steps 60 is below --warmup-steps 100: the learning rate rises for the "
        "whole run and stops at 60% of its peak; lower --warmup-steps to reach it."
    ]


@BACKEND_INDEPENDENT
def test_init_from_a_checkpoint_points_to_resuming_its_run(tmp_path):
    checkpoint = tmp_path / "ckpt-00000040.weights.h5"
    keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]).save_weights(checkpoint)
    argv = ["train", "--init-from", str(checkpoint), "--output-dir", str(tmp_path / "run")]
    status, stdout, stderr = run_in_process(argv)
    assert (status, stdout, len(stderr.splitlines())) == (2, "", 1), stderr
    assert f"--init-from {checkpoint}: a checkpoint (weights and training state, no " in stderr
    assert "rerun that run's command with its --output-dir" in stderr
    assert not (tmp_path / "run").exists()
