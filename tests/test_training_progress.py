"""Progress lines on stderr, one train_log.csv row per step across resumes, non-finite loss."""

import csv
import io
import re

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, random_token_ids

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer
from keras_transformer.training import TrainingMonitor
from keras_transformer.training.csv_log import truncate_log
from keras_transformer.training.progress_line import (
    format_duration,
    format_progress,
    write_progress,
)

pytestmark = BACKEND_INDEPENDENT

LINE = re.compile(
    r"^step (\d+)/(\d+) \((\d+\.\d)%\) \| loss (\d+\.\d{3}) \| lr (\d\.\d\de-\d\d) \| "
    r"([\d,]+) tok/s \| (\d+:\d\d) elapsed \| ETA (\d+:\d\d)$"
)


def test_progress_line_format():
    line = format_progress(1200, 8000, 3.45678, 1.9e-3, 10512.3, 125.0, 3708.3)
    assert line == (
        "step 1200/8000 (15.0%) | loss 3.457 | lr 1.90e-03 | 10,512 tok/s | 2:05 elapsed | "
        "ETA 1:01:48"
    )
    assert LINE.match(format_progress(3, 4, 1.0, 1e-4, 9.6, 59.6, 20.0))
    # Without a step budget: no fraction and no ETA; unknown values are named so.
    assert format_progress(7, None, 2.0, 1e-3, None, 1.0, None) == (
        "step 7 | loss 2.000 | lr 1.00e-03 | 0:01 elapsed"
    )
    assert [format_duration(s) for s in (0, 59.4, 61, 3600, None, float("nan"))] == [
        "0:00", "0:59", "1:01", "1:00:00", "?", "?",
    ]  # fmt: skip


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_one_line_rewritten_in_place():
    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        write_progress("step 1/2", stream)
        write_progress("step 2/2", stream, final=True)
    assert terminal.getvalue() == "\rstep 1/2\x1b[K\rstep 2/2\x1b[K\n"
    assert pipe.getvalue() == "step 1/2\nstep 2/2\n"


def compiled_model(one_layer_config, learning_rate=1e-3, loss=None):
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(one_layer_config)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate), loss=loss or LabelSmoothedCrossEntropy()
    )
    return model


def inputs(config, examples):
    rng = np.random.default_rng(0)
    return {
        "encoder_token_ids": random_token_ids(rng, examples, 5, config.vocabulary_size),
        "decoder_token_ids": random_token_ids(rng, examples, 4, config.vocabulary_size),
    }


def fit(model, config, steps, callbacks):
    x = inputs(config, 2 * steps)
    model.fit(x, x["decoder_token_ids"], batch_size=2, epochs=1, verbose=0, callbacks=callbacks)


def read_log(path):
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def test_progress_lines_on_stderr_match_the_log(one_layer_config, tmp_path, capsys):
    model = compiled_model(one_layer_config)
    monitor = TrainingMonitor(
        tmp_path, every_steps=2, tokens_per_batch=6.0, max_steps=6, progress=True
    )
    fit(model, one_layer_config, 6, [monitor])
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout stays the program's
    matches = [LINE.match(line) for line in captured.err.splitlines() if line.startswith("step")]
    assert all(matches) and len(matches) == 3, captured.err
    rows = read_log(tmp_path / TrainingMonitor.CSV_NAME)
    for match, row in zip(matches, rows, strict=True):
        assert match[1] == row["step"] and match[2] == "6"
        assert float(match[3]) == pytest.approx(100 * int(row["step"]) / 6, abs=0.05)
        assert float(match[4]) == pytest.approx(float(row["loss"]), abs=5e-4)
        assert float(match[5]) == pytest.approx(float(row["learning_rate"]), rel=5e-3)
    assert matches[-1][8] == "0:00"  # nothing left at the last step


def test_train_log_has_one_row_per_step_after_resumes(one_layer_config, tmp_path):
    path = tmp_path / TrainingMonitor.CSV_NAME
    model = compiled_model(one_layer_config)
    fit(model, one_layer_config, 4, [TrainingMonitor(tmp_path, every_steps=1, start_step=0)])
    assert [row["step"] for row in read_log(path)] == ["1", "2", "3", "4"]
    # Resumed from the checkpoint of step 2 (steps 3 and 4 are trained again), twice.
    for _ in range(2):
        monitor = TrainingMonitor(tmp_path, every_steps=1, start_step=2, max_steps=5)
        fit(compiled_model(one_layer_config), one_layer_config, 3, [monitor])
        assert [row["step"] for row in read_log(path)] == ["1", "2", "3", "4", "5"]
    # Resumed from step 5, the end: nothing is dropped.
    assert truncate_log(path, 5) == 0
    assert truncate_log(path, 1) == 4 and len(read_log(path)) == 1


def test_a_non_finite_loss_stops_with_the_step(one_layer_config, tmp_path):
    # Labels of the first 2 steps are >= 5; from step 3 on a label is 1 and the loss -inf.
    def diverges_on_label_one(labels, logits):
        smallest = keras.ops.cast(keras.ops.min(labels), "float32")
        return keras.ops.mean(keras.ops.cast(logits, "float32") ** 2) + keras.ops.log(
            smallest - 1.0
        )

    model = compiled_model(one_layer_config, loss=diverges_on_label_one)
    x = inputs(one_layer_config, 12)
    labels = np.full((12, 4), 5, "int32")
    labels[4:, 0] = 1
    monitor = TrainingMonitor(tmp_path, every_steps=2, progress=True)
    with pytest.raises(FloatingPointError, match=r"Non-finite training loss \(-inf\) by step 4"):
        model.fit(x, labels, batch_size=2, shuffle=False, verbose=0, callbacks=[monitor])
    assert [row["step"] for row in read_log(tmp_path / TrainingMonitor.CSV_NAME)] == ["2", "4"]
