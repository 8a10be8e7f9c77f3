"""Every command answers --help and a user error before any backend loads: fast, one line."""

import json
import os
import subprocess
import sys
import zipfile

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer import __version__
from keras_transformer.cli import COMMANDS
from keras_transformer.evaluation.tokenized_bleu import tokenized_bleu
from keras_transformer.experiment.inputs.output_dir_lock import OutputDirLock
from keras_transformer.experiment.inputs.run_config_file import run_settings, write_run_config
from keras_transformer.experiment.recipes import load_recipe, recipe_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKENDS = ("tensorflow", "keras", "jax", "torch")
# Runs the command line as `keras-transformer` does, then writes which of BACKENDS it loaded.
WRAPPER = f"""
import json, sys
from keras_transformer.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as exit:
    code = exit.code
with open(sys.argv[1], "w") as report:
    json.dump(sorted(name for name in {BACKENDS!r} if name in sys.modules), report)
sys.exit(code)
"""

pytestmark = BACKEND_INDEPENDENT


def run_command(tmp_path, *arguments, environment=None):
    """(result, backends loaded) of `keras-transformer ARGUMENTS` in a subprocess.

    Speed is not asserted here (the tests share the cores); loading no backend is what keeps
    an answer under a second: `python -X importtime` shows the rest costs about 0.1 s.
    """
    report = tmp_path / "loaded.json"
    env = {**os.environ, "PYTHONPATH": ROOT, **(environment or {})}
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(report), *arguments],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    return result, json.loads(report.read_text())


HELP = [
    ["--help"],
    *([command, "--help"] for command in COMMANDS),
    *(["train", "--recipe", name, "--help"] for name in recipe_names()),
]


@pytest.mark.parametrize("arguments", HELP, ids=" ".join)
def test_help_loads_no_backend(tmp_path, arguments):
    result, loaded = run_command(tmp_path, *arguments)
    assert (result.returncode, result.stderr, loaded) == (0, "", [])
    # The usage shows the command as typed, not the module that implements it.
    command = " ".join(["keras-transformer", *arguments[:1]]) if arguments[0] in COMMANDS else ""
    assert result.stdout.startswith(f"usage: {command or 'keras-transformer'}"), result.stdout[:200]


def test_version_is_the_package_version(tmp_path):
    result, loaded = run_command(tmp_path, "--version")
    expected = f"keras-transformer {__version__}\n"
    assert (result.returncode, result.stdout, loaded) == (0, expected, [])


ERRORS = [
    ([], "a command is needed"),
    (["fly"], "invalid choice: 'fly'"),
    # argparse names a missing required flag before an unknown one.
    *(([command, "--no-such-flag"], "error:") for command in COMMANDS if command != "import"),
    (["import", "nope"], "invalid choice: 'nope'"),
    (["translate", "--model", "absent.keras"], "absent.keras"),
    (["translate", "--model", "absent.keras", "--beam-size", "0"], "--beam-size"),
    (["evaluate", "--hypotheses", "absent.hyp", "--references", "absent.de"], "absent.hyp"),
    (["evaluate", "--hypotheses", "a", "--references", "b", "--metrics", "ter"], "'ter'"),
    (["evaluate", "--run-dir", "absent"], "--run-dir absent"),
    (["average", "--checkpoints", "absent.weights.h5", "--output", "x.weights.h5"], "absent"),
    (["average", "--run-dir", "absent", "--output", "x.keras"], "--run-dir absent"),
    (["export", "--model", "absent.keras", "--output", "out"], "absent.keras"),
    (["export", "--run-dir", "absent", "--output", "out"], "--run-dir absent"),
    (["plot", "--run-dir", "absent"], "absent"),
    (["train", "--recipe", "nope"], "invalid choice: 'nope'"),
    (["train", "--max-steps", "x"], "--max-steps"),
    (["train", "--model-override", "nope=1"], "nope"),
    (["train", "--recipe", "wmt14_base"], "--data-dir"),
    (["train", "--recipe", "wmt14_base", "--data-dir", "absent"], "absent is not a directory"),
    (["train", "--recipe", "wmt14_base", "--data-dir", ".", "--target-language", "ja"], "en-ja"),
    (["train", "--recipe", "table3", "--variants", "nope"], "invalid choice: 'nope'"),
]  # fmt: skip


@pytest.mark.parametrize(("arguments", "expected"), ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_user_error_is_one_line_status_2_before_any_backend(tmp_path, arguments, expected):
    result, loaded = run_command(tmp_path, *arguments)
    assert (result.returncode, result.stdout, loaded) == (2, "", []), result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("keras-transformer"), result.stderr
    assert "error:" in lines[0] and expected in lines[0], lines[0]


# `keras-transformer train` over tmp_path/data (train, valid.en, test: no valid.de).
TRAIN = ["train", "--recipe", "quickstart", "--data-dir", "data", "--output-dir", "run",
         "--train-split", "train", "--test-split", "test", "--valid-split", "none"]  # fmt: skip
# Errors found after parsing, by the checks that need no backend (`input_checks`).
TRAIN_ERRORS = [
    (["--valid-split", "valid"], {}, "valid.de, which does not exist"),
    (["--init-from", "absent.keras"], {}, "--init-from absent.keras: no such file"),
    (["--init-from", "corrupt.keras"], {}, "--init-from corrupt.keras: not a .keras (zip)"),
    (["--init-from", "damaged.keras"], {}, "--init-from damaged.keras:"),
    (["--vocabulary", "data/train.en"], {}, "--vocabulary data/train.en:"),
    (["--vocabulary", "absent.model"], {}, "--vocabulary absent.model: no such file"),
    (["--distribution", "data_parallel"], {"KERAS_BACKEND": "tensorflow"}, "KERAS_BACKEND=jax"),
    (["--distribution", "mirrored"], {"KERAS_BACKEND": "torch"}, "needs KERAS_BACKEND=tensorflow"),
    (["--distribution", "data_parallel"],
     {"KERAS_BACKEND": "jax", "KERAS_DISTRIBUTION_NUM_PROCESSES": "two"}, "positive int"),
    (["--output-dir", "data/train.en"], {}, "--output-dir data/train.en is a file"),
    (["--output-dir", "locked"], {}, "Another run is writing in the output directory"),
    (["--output-dir", "resumed", "--seed", "7"], {}, "the run was started with seed=0"),
    (["--output-dir", "changed"], {}, "the training data changed since the run started"),
]  # fmt: skip


# The other commands' errors found once paths are parsed, before the backend loads.
FILE_ERRORS = [
    (["average", "--checkpoints", "w.weights.h5", "--output", "w.weights.h5"],
     "--output w.weights.h5 is the same file as --checkpoints w.weights.h5"),
    (["average", "--checkpoints", "w.weights.h5", "--output", "x.keras"], "holds no config"),
    (["average", "--directory", "empty", "--output", "x.keras"], "but there are 0"),
    (["translate", "--model", "other.keras", "--input", "data/test.en"], "holds no tokenizer"),
    (["export", "--model", "other.keras", "--output", "out"], "holds no tokenizer"),
    (["export", "--weights", "w.weights.h5", "--tokenizer", "data/test.en", "--preset", "base",
      "--output", "out"], "--tokenizer data/test.en: `proto` is not a valid SentencePiece"),
    (["import", "marian", "empty", "--output", "x.keras"],
     "empty: missing config.json, source.spm, target.spm, vocab.json, model.safetensors"),
    (["import", "fairseq", "w.weights.h5", "--dictionary-dir", "empty", "--output", "x.keras"],
     "CHECKPOINT w.weights.h5: not a torch checkpoint"),
]  # fmt: skip


@pytest.fixture
def inputs(tmp_path):
    """tmp_path with the files the errors name; yields while `locked` is held by a run."""
    data = tmp_path / "data"
    data.mkdir()
    for split, language in [("train", "en"), ("train", "de"), ("test", "en"), ("test", "de")]:
        (data / f"{split}.{language}").write_text("ein Satz\n", encoding="utf-8")
    (data / "valid.en").write_text("a sentence\n", encoding="utf-8")
    (tmp_path / "corrupt.keras").write_bytes(b"not a zip archive")
    (tmp_path / "w.weights.h5").write_bytes(b"not an HDF5 file")
    (tmp_path / "empty").mkdir()
    with zipfile.ZipFile(tmp_path / "other.keras", "w") as archive:  # no tokenizer member
        archive.writestr("config.json", '{"class_name": "Sequential", "config": {}}')
    with zipfile.ZipFile(tmp_path / "damaged.keras", "w") as archive:
        archive.writestr("config.json", '{"class_name": "Seq2SeqTransformer"')  # cut short
    # Runs started with these settings (seed 0), as run_experiment records them.
    config = load_recipe("quickstart").replace(
        data={"data_dir": str(data), "train_split": "train", "test_split": "test",
              "valid_split": None}
    )  # fmt: skip
    files = (str(data / "train.en"), str(data / "train.de"))
    for name in ("resumed", "changed"):
        (tmp_path / name).mkdir()
        write_run_config(run_settings(config, config.pipeline_config(), data_files=files),
                         str(tmp_path / name))  # fmt: skip
    with open(tmp_path / "changed" / "config.json", encoding="utf-8") as file:
        recorded = json.load(file)
    recorded["data"]["train.en"]["sha256"] = "0" * 64  # the file was edited since
    (tmp_path / "changed" / "config.json").write_text(json.dumps(recorded))
    (tmp_path / "locked").mkdir()
    with OutputDirLock(str(tmp_path / "locked")):
        yield tmp_path


@pytest.mark.parametrize(("extra", "environment", "expected"), TRAIN_ERRORS,
                         ids=[" ".join(a) for a, _, _ in TRAIN_ERRORS])  # fmt: skip
def test_train_input_error_is_one_line_status_2_before_any_backend(
    inputs, extra, environment, expected
):
    arguments = [*TRAIN, *extra]
    result, loaded = run_command(inputs, *arguments, environment=environment)
    assert (result.returncode, result.stdout, loaded) == (2, "", []), result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("keras-transformer train: error:"), lines
    assert expected in lines[0], lines[0]
    assert not (inputs / "run").exists()  # nothing written


@pytest.mark.parametrize(("arguments", "expected"), FILE_ERRORS,
                         ids=[" ".join(a) for a, _ in FILE_ERRORS])  # fmt: skip
def test_input_file_error_is_one_line_status_2_before_any_backend(inputs, arguments, expected):
    result, loaded = run_command(inputs, *arguments)
    assert (result.returncode, result.stdout, loaded) == (2, "", []), result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"keras-transformer {arguments[0]}"), lines
    assert "error:" in lines[0] and expected in lines[0], lines[0]
    assert not any((inputs / name).exists() for name in ("x.keras", "out"))  # nothing written


def test_evaluate_run_dir_scores_with_the_runs_target_language(tmp_path):
    # An en-fr run: Moses tokenizes French apostrophes its own way, German its own.
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    hypothesis = "Je vois l'homme qui mange une pomme rouge ."
    reference = "Je vois l' homme qui mange une pomme rouge ."
    (run / "test.fr.hyp").write_text(hypothesis + "\n", encoding="utf-8")
    (run / "data" / "test.fr").write_text(reference + "\n", encoding="utf-8")
    settings = {"experiment": {"source_language": "en", "target_language": "fr"}}
    (run / "config.json").write_text(json.dumps(settings))
    arguments = ["evaluate", "--run-dir", str(run), "--metrics", "tokenized_bleu", "--json"]
    result, _ = run_command(tmp_path, *arguments)
    assert result.returncode == 0, result.stderr
    french = tokenized_bleu([hypothesis], [[reference]], "fr")
    assert french != tokenized_bleu([hypothesis], [[reference]], "de")
    assert json.loads(result.stdout)["tokenized_bleu"] == pytest.approx(french, abs=1e-9)
    # The deprecated `--metric` still works; --language overrides the run's.
    arguments[3] = "--metric"
    result, _ = run_command(tmp_path, *arguments, "--language", "de")
    assert result.returncode == 0, result.stderr
    german = tokenized_bleu([hypothesis], [[reference]], "de")
    assert json.loads(result.stdout)["tokenized_bleu"] == pytest.approx(german, abs=1e-9)
