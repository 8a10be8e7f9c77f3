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
from keras_transformer.training.progress_line import format_progress
from keras_transformer.utils.count_progress import CountProgress
from keras_transformer.utils.live_line import format_duration, write_progress

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


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_count_progress_on_a_terminal_and_in_a_log():
    outputs = []
    for stream in (Terminal(), io.StringIO()):
        clock = Clock()
        progress = CountProgress(1000, "sentences", interval=30.0, stream=stream, clock=clock)
        for _ in range(4):  # 250 sentences every 10 s
            clock.now += 10.0
            progress.add(250)
        progress.close()
        progress.close()  # once only
        outputs.append(stream.getvalue())
    terminal, log = outputs
    # A log gets a line when 30 s have passed and the last one; no carriage returns or colours.
    assert log == (
        "750/1,000 sentences (75.0%) | 25.0 sentences/s | 0:30 elapsed | ETA 0:10\n"
        "1,000/1,000 sentences (100.0%) | 25.0 sentences/s | 0:40 elapsed | ETA 0:00\n"
    )
    # A terminal gets every update, rewritten in place, and the last one ended.
    assert terminal.count("\r") == 5 and terminal.endswith("ETA 0:00\x1b[K\n")
    assert "250/1,000 sentences (25.0%) | 25.0 sentences/s | 0:10 elapsed | ETA 0:30" in terminal
    # Without a total (a stream of lines): no percentage and no ETA.
    stream, clock = io.StringIO(), Clock()
    progress = CountProgress(None, "lines", stream=stream, clock=clock)
    clock.now += 4.0
    progress.add(10)
    progress.close()
    assert stream.getvalue() == "10 lines | 2.5 lines/s | 0:04 elapsed\n"
    with pytest.raises(ValueError, match=r"`total` must be an int >= 0 or None\. Received: -1"):
        CountProgress(-1)


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
    rows = read_log(path)
    assert [row["step"] for row in rows] == ["1", "2", "3", "4"]
    # As if the process that trained the first steps had taken 1000 s to step 2.
    rows[1]["elapsed_seconds"] = "1000.0"
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=TrainingMonitor.COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    # Resumed from the checkpoint of step 2 (steps 3 and 4 are trained again), twice.
    for _ in range(2):
        monitor = TrainingMonitor(tmp_path, every_steps=1, start_step=2, max_steps=5)
        fit(compiled_model(one_layer_config), one_layer_config, 3, [monitor])
        rows = read_log(path)
        assert [row["step"] for row in rows] == ["1", "2", "3", "4", "5"]
        # The run's training time goes on from the restored step's row.
        elapsed = [float(row["elapsed_seconds"]) for row in rows[2:]]
        assert 1000.0 < elapsed[0] <= elapsed[1] <= elapsed[2] < 1300.0, elapsed
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
