"""`train --init-from MODEL --lora-rank R` and `translate --adapter` from the command line.

A LoRA run writes the merged model (`model.keras`) and the adapters alone (`adapter.lora`);
`translate --model START --adapter adapter.lora` translates as the merged model does, and a
LoRA run resumed halfway ends with the adapters of an uninterrupted one. The runs train a
random one-layer model for a few steps: what is checked is the files, not what it learns.
They run in the PyTorch suite only (tests/test_lora.py checks the adapters' training on
every backend); the refusals need no backend.
"""

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


@RUNS
def test_a_lora_run_writes_the_merged_model_and_its_adapter(start, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(start, run, "--lora-rank", 2, "--max-steps", 4) == 0
    assert "trainable parameters of" in capsys.readouterr().err
    adapter = factors(run / "adapter.lora")
    assert len(adapter) == 2 * 4 * 3  # A and B of 4 projections in 3 attention layers
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


@BACKEND_INDEPENDENT
def test_lora_settings_and_adapters_are_refused_in_one_line(start, tmp_path, capsys):
    def refused(status):
        assert status == 2
        error = capsys.readouterr().err.strip()
        assert "\n" not in error and "Traceback" not in error, error
        return error

    output = tmp_path / "never"
    assert "must be >= 1" in refused(train(start, output, "--lora-rank", 0))
    assert "above the width" in refused(train(start, output, "--lora-rank", 9))
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
