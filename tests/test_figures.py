import os
import struct
import subprocess
import sys

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, small_config, to_numpy

from keras_transformer import Seq2SeqTransformer, TransformerSchedule
from keras_transformer.commands import plot as command
from keras_transformer.decoding.translator import to_token_lists
from keras_transformer.export import save_translation_model
from keras_transformer.figures import (
    plot_attention,
    plot_learning_rate_schedule,
    plot_training_curves,
    read_training_log,
)
from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import train_vocabulary

pytestmark = BACKEND_INDEPENDENT

# The package imports matplotlib only to draw, so it imports without it.
pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FIGURES = (
    "training_curves.png",
    "learning_rate.png",
    "attention_encoder_self.png",
    "attention_decoder_self.png",
    "attention_decoder_cross.png",
)
# A resumed run (restored at step 20) logs steps 30 and 40 again; the first run's 40 is stale.
TRAIN_LOG = """\
step,loss,learning_rate,tokens_per_second,elapsed_seconds
10,5.0,0.001,100.0,1.0
20,4.0,0.002,110.0,2.0
30,3.0,0.003,,3.0
40,2.5,0.004,120.0,4.0
30,3.5,0.0031,90.0,1.5
40,2.0,0.0041,95.0,2.5
"""


def png_size(path):
    """(width, height) of a PNG file, after checking its signature."""
    with open(path, "rb") as file:
        header = file.read(24)
    assert header[:8] == PNG_MAGIC and header[12:16] == b"IHDR"
    assert os.path.getsize(path) > 100
    return struct.unpack(">II", header[16:24])


def pieces(tokenizer, ids):
    return [str(tokenizer.id_to_token(i)) for i in ids]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run directory like a recipe's: model.keras, train_log.csv, data/test.en."""
    english, german = generate_synthetic_pairs(200, seed=3)
    tokenizer = train_vocabulary(english + german, vocabulary_size=120)
    keras.utils.set_random_seed(5)
    config = small_config(120, num_layers=2)
    model = Seq2SeqTransformer(config)
    path = tmp_path_factory.mktemp("run")
    save_translation_model(model, tokenizer, path / "model.keras")
    (path / "train_log.csv").write_text(TRAIN_LOG)
    (path / "data").mkdir()
    (path / "data" / "test.en").write_text("\n".join(english[:2]) + "\n")
    return path, model, tokenizer, english[0], german[0]


def test_read_training_log_keeps_the_last_row_of_each_step(tmp_path):
    path = tmp_path / "train_log.csv"
    path.write_text(TRAIN_LOG)
    log = read_training_log(path)
    np.testing.assert_array_equal(log["step"], [10, 20, 30, 40])
    np.testing.assert_array_equal(log["loss"], [5.0, 4.0, 3.5, 2.0])
    np.testing.assert_array_equal(log["learning_rate"], [0.001, 0.002, 0.0031, 0.0041])
    np.testing.assert_array_equal(log["tokens_per_second"], [100.0, 110.0, 90.0, 95.0])

    # Rows after a restart's first one that the restart has not reached yet are stale.
    path.write_text(TRAIN_LOG.rsplit("40,2.0", 1)[0])
    log = read_training_log(path)
    np.testing.assert_array_equal(log["step"], [10, 20, 30])
    assert log["loss"][-1] == 3.5

    path.write_text("step,loss\n1,2.0\n")
    with pytest.raises(ValueError, match="learning_rate"):
        read_training_log(path)
    path.write_text("step,loss,learning_rate\n1,x,0.1\n")
    with pytest.raises(ValueError, match="line 2"):
        read_training_log(path)
    path.write_text("step,loss,learning_rate\n")
    with pytest.raises(ValueError, match="no training steps"):
        read_training_log(path)


def test_plot_training_curves_plots_the_deduplicated_log(run_dir, tmp_path):
    run, *_ = run_dir
    output = tmp_path / "new" / "curves.png"
    curves = plot_training_curves(run / "train_log.csv", output, dpi=40)
    assert sorted(curves) == ["learning_rate", "loss", "step"]
    np.testing.assert_array_equal(curves["step"], [10, 20, 30, 40])
    np.testing.assert_array_equal(curves["loss"], [5.0, 4.0, 3.5, 2.0])
    np.testing.assert_array_equal(curves["learning_rate"], [0.001, 0.002, 0.0031, 0.0041])
    assert png_size(output) == (320, 128)  # 8 x 3.2 inches at 40 dpi
    assert os.listdir(output.parent) == ["curves.png"]  # no temporary file left


def test_plot_learning_rate_schedule_is_the_papers_equation(tmp_path):
    output = tmp_path / "rate.png"
    curves = plot_learning_rate_schedule(
        output, d_model=64, warmup_steps=100, steps=400, variants=[(64, 200), (64, 100)], dpi=30
    )
    assert list(curves["learning_rates"]) == [(64, 100), (64, 200)]  # duplicates drawn once
    step_num = curves["step_num"]
    np.testing.assert_array_equal(step_num, np.arange(1, 401))
    for (d_model, warmup), rates in curves["learning_rates"].items():
        expected = d_model**-0.5 * np.minimum(step_num**-0.5, step_num * warmup**-1.5)
        np.testing.assert_allclose(rates, expected, rtol=1e-5)
        assert rates.argmax() + 1 == warmup
        schedule = TransformerSchedule(d_model, warmup_steps=warmup)
        np.testing.assert_allclose(rates[9], to_numpy(schedule(9)), rtol=1e-6)
    assert png_size(output) == (192, 108)  # 6.4 x 3.6 inches at 30 dpi
    with pytest.raises(ValueError, match="steps"):
        plot_learning_rate_schedule(output, steps=0)


@pytest.mark.parametrize(
    ("kind", "query_side", "key_side"),
    [
        ("encoder_self_attention", "source", "source"),
        ("decoder_self_attention", "target", "target"),
        ("decoder_cross_attention", "target", "source"),
    ],
)
def test_plot_attention_draws_the_models_weights(run_dir, tmp_path, kind, query_side, key_side):
    _, model, tokenizer, source, target = run_dir
    source_ids = to_token_lists(tokenizer([source]))[0] + [tokenizer.eos_id]
    target_ids = [tokenizer.bos_id] + to_token_lists(tokenizer([target]))[0]
    inputs = {
        "encoder_token_ids": np.array([source_ids], "int32"),
        "decoder_token_ids": np.array([target_ids], "int32"),
    }
    expected = to_numpy(model.attention_weights(inputs)[kind][-1])[0]

    output = tmp_path / f"{kind}.png"
    plotted = plot_attention(model, tokenizer, source, target, output, kind=kind, dpi=30)
    for key, ids in (("encoder_token_ids", source_ids), ("decoder_token_ids", target_ids)):
        np.testing.assert_array_equal(plotted["inputs"][key], [ids])
    labels = {"source": pieces(tokenizer, source_ids), "target": pieces(tokenizer, target_ids)}
    assert plotted["query_tokens"] == labels[query_side]
    assert plotted["key_tokens"] == labels[key_side]
    assert labels["source"][-1] == "</s>" and labels["target"][0] == "<s>"
    assert plotted["heads"] == [0, 1]
    assert plotted["weights"].dtype == np.float32
    np.testing.assert_allclose(plotted["weights"], expected, rtol=1e-6, atol=1e-7)
    assert plotted["weights"].shape == (2, len(plotted["query_tokens"]), len(plotted["key_tokens"]))
    width, height = png_size(output)
    assert width > 0 and height > 0

    one = plot_attention(model, tokenizer, source, target, output, layer=0, kind=kind, heads=[1])
    first_layer = to_numpy(model.attention_weights(inputs)[kind][0])[0]
    assert one["heads"] == [1]
    np.testing.assert_allclose(one["weights"], first_layer[1:2], rtol=1e-6, atol=1e-7)


def test_plot_attention_rejects_bad_arguments(run_dir, tmp_path):
    _, model, tokenizer, source, target = run_dir
    output = tmp_path / "attention.png"
    with pytest.raises(ValueError, match="kind"):
        plot_attention(model, tokenizer, source, target, output, kind="attention")
    with pytest.raises(ValueError, match="2 layers"):
        plot_attention(model, tokenizer, source, target, output, layer=2)
    with pytest.raises(ValueError, match="2 heads"):
        plot_attention(model, tokenizer, source, target, output, heads=[0, 2])
    assert not output.exists()


def test_missing_matplotlib_names_the_plots_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"`plots` extra"):
        plot_learning_rate_schedule(tmp_path / "rate.png", steps=10)


def test_command_writes_every_figure(run_dir, tmp_path):
    run, *_ = run_dir
    output_dir = tmp_path / "figures"
    result = subprocess.run(
        [sys.executable, "-m", "keras_transformer.figures", "--run-dir", str(run)]
        + ["--output-dir", str(output_dir), "--dpi", "30"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [str(output_dir / name) for name in FIGURES]
    assert sorted(os.listdir(output_dir)) == sorted(FIGURES)
    for name in FIGURES:
        width, height = png_size(output_dir / name)
        assert width > 0 and height > 0
    assert png_size(output_dir / "training_curves.png") == (240, 96)


def test_command_reports_bad_input_in_one_line(run_dir, tmp_path, capsys):
    run, *_ = run_dir
    incomplete = tmp_path / "incomplete"
    incomplete.mkdir()
    (incomplete / "train_log.csv").write_text(TRAIN_LOG)
    cases = [
        (["--run-dir", str(tmp_path / "missing")], "run directory not found"),
        (["--run-dir", str(incomplete)], "no model.keras"),
        (["--run-dir", str(run), "--test-split", "nope"], "nope.en does not exist"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            command.main(argv + ["--output-dir", str(tmp_path / "out")])
        assert exit_info.value.code == 2
        error = capsys.readouterr().err
        assert message in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()

    # Through `keras-transformer plot`, in a process of its own: no traceback.
    result = subprocess.run(
        [sys.executable, "-m", "keras_transformer", "plot", "--run-dir", str(incomplete)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(f"error: the run directory has no model.keras: {incomplete / 'model.keras'}")
    )
