"""`train --init-from MODEL --lora-rank R` and `translate --adapter` from the command line.

A LoRA run writes the merged model (`model.keras`) and the adapters alone (`adapter.lora`);
`translate --model START --adapter adapter.lora` translates as the merged model does, and a
LoRA run resumed halfway ends with the adapters of an uninterrupted one. The runs train a
random one-layer model for a few steps: what is checked is the files, not what it learns.
They run in the PyTorch suite only (tests/test_lora.py checks the adapters' training on
every backend); the refusals need no backend.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, only_under, small_config

from keras_transformer import Seq2SeqTransformer, cli
from keras_transformer.export import save_translation_model
from keras_transformer.synthetic import write_synthetic_corpus
from keras_transformer.text import read_lines, train_vocabulary

FAST = [
    "--token-budget", "512", "--average-last", "1", "--no-validate", "--no-export",
    "--beam-size", "1", "--verbose", "1", "--metrics", "bleu", "--warmup-steps", "1",
    "--learning-rate-scale", "5", "--checkpoint-every-steps", "2", "--max-extra-length", "4",
]  # fmt: skip
RUNS = only_under("torch", "trains small models through the CLI; test_lora.py covers backends")


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    """A random one-layer model file with a vocabulary of generated requests, and the data."""
    directory = tmp_path_factory.mktemp("lora_runs")
    data = directory / "data"
    write_synthetic_corpus(data, train_size=300, valid_size=4, test_size=4, domain="requests")
    tokenizer = train_vocabulary(read_lines(data / "train.en"), 120)
    model = Seq2SeqTransformer(small_config(vocabulary_size=120))
    model.build()
    save_translation_model(model, tokenizer, directory / "start.keras")
    return directory / "start.keras", data


def train(start, output, *more):
    path, data = start
    command = ["train", "--init-from", path, "--data-dir", data, "--output-dir", output]
    try:
        return cli.main([*map(str, command + FAST + list(more))])
    except SystemExit as exit_:
        return exit_.code


def translate(*arguments):
    return cli.main(["translate", *map(str, arguments)])


def factors(path):
    """`{name: array}` of an adapter file's datasets."""
    found = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset):
            found[name] = np.asarray(item)

    with h5py.File(path, "r") as file:
        file.visititems(visit)
    return found


@pytest.fixture(scope="module")
def lora_run(start, tmp_path_factory):
    """An uninterrupted LoRA run of rank 2, 4 steps (checkpoints at steps 2 and 4)."""
    run = tmp_path_factory.mktemp("lora_run") / "run"
    assert train(start, run, "--lora-rank", 2, "--max-steps", 4) == 0
    return run


@RUNS
def test_a_lora_run_writes_the_merged_model_and_its_adapter(start, lora_run, tmp_path):
    run = lora_run
    adapter = factors(run / "adapter.lora")
    assert len(adapter) == 2 * 2 * 3  # A and B of W^Q and W^V (the default) in 3 attention layers
    assert any(np.abs(value).max() > 0 for name, value in adapter.items() if name.endswith("_b"))
    source = tmp_path / "source.en"
    source.write_text("\n".join(read_lines(start[1] / "test.en")) + "\n", encoding="utf-8")
    outputs = []
    for model in ([start[0], "--adapter", run / "adapter.lora"], [run / "model.keras"], [start[0]]):
        output = tmp_path / f"out{len(outputs)}.de"
        assert translate("--model", *model, "--input", source, "--output", output) == 0
        outputs.append(read_lines(output))
    assert outputs[0] == outputs[1] and any(outputs[0])
    # Resumed halfway: the adapters of the uninterrupted run.
    resumed = tmp_path / "resumed"
    assert train(start, resumed, "--lora-rank", 2, "--max-steps", 2) == 0
    assert train(start, resumed, "--lora-rank", 2, "--max-steps", 4) == 0
    again = factors(resumed / "adapter.lora")
    for name, value in adapter.items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)


@RUNS
def test_an_adapter_on_all_four_attention_projections_applies_as_its_merged_model(start, tmp_path):
    from keras_transformer.export.lora_adapter import read_adapter_settings

    # `--lora-targets attention`: the adapter file records its targets, and translate uses them.
    run = tmp_path / "run"
    assert train(start, run, "--lora-rank", 2, "--lora-targets", "attention", "--max-steps", 2) == 0
    assert read_adapter_settings(str(run / "adapter.lora"))["targets"] == "attention"
    adapter = factors(run / "adapter.lora")
    assert len(adapter) == 2 * 4 * 3  # A and B of 4 projections in 3 attention layers
    assert sum(name.split("/")[-2] == "output" for name in adapter) == 2 * 3
    source = tmp_path / "source.en"
    source.write_text("\n".join(read_lines(start[1] / "test.en")) + "\n", encoding="utf-8")
    outputs = []
    for model in ([start[0], "--adapter", run / "adapter.lora"], [run / "model.keras"]):
        output = tmp_path / f"out{len(outputs)}.de"
        assert translate("--model", *model, "--input", source, "--output", output) == 0
        outputs.append(read_lines(output))
    assert outputs[0] == outputs[1] and any(outputs[0])


@RUNS
def test_export_applies_an_adapter_without_a_merged_file(
    start, lora_run, tmp_path, capsys, monkeypatch
):
    from keras_transformer.export.model_files import load_model_files
    from keras_transformer.export.tensorflow_export import TensorFlowExport

    adapter, merged = lora_run / "adapter.lora", lora_run / "model.keras"
    kept = sorted(p.name for p in start[0].parent.iterdir())
    # The SavedModel's model (its TensorFlow process loads it so): the run's merged weights.
    model, _ = load_model_files(str(start[0]), adapter=str(adapter))
    reference, _ = load_model_files(str(merged))
    assert model.lora_settings is None and len(model.weights) == len(reference.weights)
    for ours, theirs in zip(model.weights, reference.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=ours.path)
    specs = []

    def run(self, capture_stderr=False):
        specs.append(self)
        return subprocess.CompletedProcess([], 0)

    # On torch the SavedModel export is a TensorFlow process's: its spec carries --adapter.
    monkeypatch.setattr(TensorFlowExport, "run", run)
    assert (
        command("export", "--model", start[0], "--adapter", adapter, "--output", tmp_path / "1")
        == 0
    )
    assert [spec.adapter for spec in specs] == [str(adapter)]
    # CTranslate2: base + adapter gives the files of the merged model.keras, byte for byte.
    pytest.importorskip("ctranslate2")
    for name, model in (("adapted", [start[0], "--adapter", adapter]), ("merged", [merged])):
        arguments = ["--format", "ctranslate2", "--output", tmp_path / name]
        assert command("export", "--model", *model, *arguments) == 0
    for name in ("model.bin", "config.json"):
        assert (tmp_path / "adapted" / name).read_bytes() == (
            tmp_path / "merged" / name
        ).read_bytes()
    assert sorted(p.name for p in start[0].parent.iterdir()) == kept  # no merged file written
    capsys.readouterr()
    # An adapter of another base model (the merged one's weights differ): one line, status 2.
    status = command("export", "--model", merged, "--adapter", adapter, "--format",
                     "ctranslate2", "--output", tmp_path / "never")  # fmt: skip
    error = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in error and "made for another base model" in error, error
    assert not (tmp_path / "never").exists()


@RUNS
def test_a_lora_run_killed_with_kill_9_resumes_exactly(start, lora_run, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(start[1], data)
    run, arguments = tmp_path / "run", ["--lora-rank", 2, "--max-steps", 4]
    command_line = ["train", "--init-from", start[0], "--data-dir", data, "--output-dir", run]
    command_line += FAST + arguments
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_STEPS, *map(str, command_line)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (run / "checkpoints" / "ckpt-00000002.weights.h5").exists():
            assert process.poll() is None, process.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the LoRA run made no progress"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        process.kill()
        process.communicate()
    assert not (run / "adapter.lora").exists() and not (run / "model.keras").exists()
    capsys.readouterr()
    # Another rank would not fit the checkpoint's factors: refused before the backend loads.
    assert train((start[0], data), run, "--lora-rank", 3, "--max-steps", 4) == 2
    assert "lora_rank=2" in capsys.readouterr().err
    assert train((start[0], data), run, *arguments) == 0
    err = capsys.readouterr().err
    assert "Resuming from" in err and "ckpt-00000002" in err, err[-2000:]
    assert "trainable parameters of" in err
    expected, resumed = factors(lora_run / "adapter.lora"), factors(run / "adapter.lora")
    assert sorted(resumed) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(resumed[name], value, rtol=1e-6, atol=1e-7, err_msg=name)
    # The data fingerprint: a resume on edited training files is refused.
    with open(data / "train.en", "a", encoding="utf-8") as file:
        file.write("One more line.\n")
    assert train((start[0], data), run, "--lora-rank", 2, "--max-steps", 6) == 2
    assert "the training data changed" in capsys.readouterr().err


@RUNS
def test_a_diverging_lora_run_ends_in_one_line_and_resumes_from_its_last_good_checkpoint(
    start, tmp_path, monkeypatch, capsys
):
    from keras_transformer.training.divergence_watch import DivergenceWatch

    update = DivergenceWatch.update

    def diverging(self, step, loss, steps=1):  # the loss seen far above its level after step 4
        return update(self, step, loss * 100 if step > 4 else loss, steps)

    monkeypatch.setattr(DivergenceWatch, "update", diverging)
    run = tmp_path / "run"
    assert train(start, run, "--lora-rank", 2, "--max-steps", 8) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Training diverged" in errors[0], errors
    assert "ckpt-00000004.weights.h5" in errors[0]
    assert not (run / "adapter.lora").exists() and not (run / "model.keras").exists()
    monkeypatch.setattr(DivergenceWatch, "update", update)
    assert train(start, run, "--lora-rank", 2, "--max-steps", 8, "--learning-rate-scale", 1) == 0
    err = capsys.readouterr().err
    assert "Resuming from" in err and "ckpt-00000004" in err, err[-2000:]
    assert len(factors(run / "adapter.lora")) == 2 * 2 * 3


# Runs the command line given after it, each training step followed by a pause.
SLOW_STEPS = """
import sys, time
from keras_transformer import cli
from keras_transformer.training import TrainingMonitor

step_end = TrainingMonitor.on_train_batch_end

def slowed(self, batch, logs=None):
    step_end(self, batch, logs)
    time.sleep(0.5)

TrainingMonitor.on_train_batch_end = slowed
sys.exit(cli.main(sys.argv[1:]))
"""


def command(*arguments):
    try:
        return cli.main([*map(str, arguments)])
    except SystemExit as exit_:
        return exit_.code


@BACKEND_INDEPENDENT
def test_lora_settings_and_adapters_are_refused_in_one_line(start, tmp_path, capsys):
    def refused(status):
        assert status == 2
        error = capsys.readouterr().err.strip()
        assert "\n" not in error and "Traceback" not in error, error
        return error

    output = tmp_path / "never"
    assert "must be >= 1" in refused(train(start, output, "--lora-rank", 0))
    assert "above the width" in refused(train(start, output, "--lora-rank", 17))
    assert "give `init_from`" in refused(cli_train("--output-dir", output, "--lora-rank", 2))
    assert "give `lora_rank`" in refused(train(start, output, "--lora-alpha", 4))
    error = refused(train(start, output, "--lora-targets", "attention+ffn"))
    assert "give `lora_rank`" in error
    error = refused(train(start, output, "--lora-rank", 2, "--freeze", "encoder"))
    assert "LoRA freezes the whole model already" in error
    assert "--freeze" in refused(train(start, output, "--freeze", "attention"))
    assert not output.exists()
    source = tmp_path / "source.en"
    source.write_text("A line.\n", encoding="utf-8")
    for adapter, expected in ((tmp_path / "none.lora", "no such file"), (source, "not a LoRA")):
        try:
            status = translate("--model", start[0], "--adapter", adapter, "--input", source)
        except SystemExit as exit_:
            status = exit_.code
        assert expected in refused(status)


def cli_train(*arguments):
    try:
        return cli.main(["train", *map(str, arguments)])
    except SystemExit as exit_:
        return exit_.code
