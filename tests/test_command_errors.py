"""Every command's user errors: exit status 2, one line on stderr, nothing on stdout, and
the output (directory or file) left as it was, before any expensive work.

The bad invocations run in-process through `keras_transformer.cli.main(argv)`, with
`SystemExit` turned into an exit status as the interpreter does for `sys.exit(main())`;
two of them also run in a real process to show that the harness matches it.
"""

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer.cli import main
from keras_transformer.experiment.inputs.run_config_file import (
    RUN_CONFIG_FILE,
    run_settings,
    write_run_config,
)
from keras_transformer.experiment.recipes import load_recipe

pytestmark = BACKEND_INDEPENDENT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = ["--model-override", "num_layers=1", "--model-override", "d_model=32",
         "--model-override", "num_heads=2", "--model-override", "intermediate_dim=64"]  # fmt: skip


def exit_status(code):
    """The process exit status of `sys.exit(code)` (None is 0; a message prints and gives 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_in_process(argv):
    """`(status, stdout, stderr)` of `keras-transformer ARGV` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = exit_status(main(argv))
        except SystemExit as stop:
            status = exit_status(stop.code)
    return status, out.getvalue(), err.getvalue()


def snapshot(path):
    """The bytes of a file, or of every file under a folder; None when absent."""
    if os.path.isfile(path):
        with open(path, "rb") as file:
            return file.read()
    if not os.path.isdir(path):
        return None
    files = {}
    for folder, _, names in os.walk(path):
        for name in names:
            with open(os.path.join(folder, name), "rb") as file:
                files[os.path.relpath(os.path.join(folder, name), path)] = file.read()
    return files


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Small inputs: a data folder, a dummy model file, hypotheses, a started run."""
    root = tmp_path_factory.mktemp("inputs")
    data = root / "data"
    data.mkdir()
    for split in ("train", "valid", "test"):
        for language, word in (("en", "house"), ("de", "Haus")):
            (data / f"{split}.{language}").write_text(f"the {word}\n" * 4, encoding="utf-8")
    (root / "model.keras").write_bytes(b"not looked at: the invocation fails before")
    (root / "ckpt-1.weights.h5").write_bytes(b"not looked at either")
    (root / "hyp.de").write_text("a\nb\n", encoding="utf-8")
    (root / "ref.de").write_text("a\n", encoding="utf-8")
    (root / "broken.json").write_text("{not json", encoding="utf-8")
    (root / "unknown.json").write_text(json.dumps({"experiment": {"vocab_size": 100}}))
    (root / "existing").mkdir()
    (root / "existing" / "saved_model.pb").write_bytes(b"an earlier export")
    incomplete = root / "incomplete_run"
    incomplete.mkdir()
    (incomplete / "train_log.csv").write_text("step,loss\n1,2.0\n")
    # A run started with d_model=32: its config.json as `run_experiment` writes it.
    started = root / "started"
    started.mkdir()
    quickstart = load_recipe("quickstart")
    overrides = {"num_layers": 1, "d_model": 32, "num_heads": 2, "intermediate_dim": 64}
    config = quickstart.replace(
        output_dir=str(started),
        data={"data_dir": str(data), "vocabulary_size": 100},
        model={"model_overrides": {**quickstart.model.model_overrides, **overrides}},
    )
    write_run_config(run_settings(config, config.pipeline_config(), "train ..."), str(started))
    return root


def cases(root):
    """(argv, text expected in the error line, path that must stay untouched)."""
    data, out = str(root / "data"), str(root / "out")
    train = ["train", "--data-dir", data, "--output-dir", out]
    model, hyp, ref = str(root / "model.keras"), str(root / "hyp.de"), str(root / "ref.de")
    average = ["average", "--checkpoints", str(root / "ckpt-1.weights.h5")]
    averaged = str(root / "averaged.weights.h5")
    exported = str(root / "exported")
    figures = str(root / "figures")
    return [
        # train: override names, types and ranges, presets, paths, files, resume.
        ([*train, "--model-override", "num_layer=2"], "did you mean num_layers?", out),
        ([*train, "--model-override", "dropout=abc"], "dropout expected a number", out),
        ([*train, "--pipeline-override", "bucket_growth=abc"], "bucket_growth expected", out),
        ([*train, "--model-override", "dropout=1.5"], "`dropout` must be in [0, 1)", out),
        ([*train, "--model-override", "d_model=130"], "divisible by `num_heads`", out),
        ([*train, "--model-override", "num_layers"], "takes FIELD=VALUE", out),
        ([*train, "--model-override", "vocabulary_size=8"], "set by the run itself", out),
        ([*train, "--pipeline-override", "token_budget=8"], "set by the run itself", out),
        ([*train, "--pipeline-override", "max_length=9999"], "token_budget", out),
        ([*train, "--average-last", "0"], "average_last` (--average-last) must be >= 1", out),
        ([*train, "--average-last", "8", "--keep-checkpoints", "6"], "averaged at the end", out),
        ([*train, "--max-steps", "0"], "(--max-steps) must be >= 1", out),
        ([*train, "--max-steps", "ten"], "argument --max-steps: expected an int", out),
        ([*train, "--warmup-steps", "0"], "warmup_steps", out),
        ([*train, "--learning-rate-scale", "-1"], "must be > 0", out),
        ([*train, "--label-smoothing", "1"], "label_smoothing", out),
        ([*train, "--preset", "bas"], "expected one of base, big", out),
        ([*train, "--metrics", "ter"], "expected one of bleu", out),
        ([*train, "--verbose", "3"], "--verbose", out),
        ([*train, "--target-language", "en"], "languages must differ", out),
        ([*train, "--test-split", "missing"], "missing.en, which does not exist", out),
        (["train", "--data-dir", str(root / "absent"), "--output-dir", out], "absent", out),
        (["train", "--recipe", "wmt14_base", "--output-dir", out], "needs --data-dir", out),
        ([*train, "--config", str(root / "absent.json")], "absent.json", out),
        ([*train, "--config", str(root / "broken.json")], "is not valid JSON", out),
        ([*train, "--config", str(root / "unknown.json")], "did you mean", out),
        (
            [
                "train",
                "--data-dir",
                data,
                "--output-dir",
                str(root / "started"),
                "--vocabulary-size",
                "100",
                *SMALL[:-2],
                "--model-override",
                "intermediate_dim=128",
            ],
            "the run was started with intermediate_dim=64; this command asks for "
            "intermediate_dim=128 (resuming must keep",
            str(root / "started"),
        ),
        # translate
        (
            [
                "translate",
                "--model",
                str(root / "absent.keras"),
                "--input",
                hyp,
                "--output",
                str(root / "t.txt"),
            ],
            "no such file",
            str(root / "t.txt"),
        ),
        (
            [
                "translate",
                "--model",
                model,
                "--input",
                str(root / "absent.en"),
                "--output",
                str(root / "t.txt"),
            ],
            "no such file",
            str(root / "t.txt"),
        ),
        (
            ["translate", "--model", model, "--beam-size", "0", "--output", str(root / "t.txt")],
            "--beam-size must be >= 1",
            str(root / "t.txt"),
        ),
        (
            ["translate", "--input", hyp, "--output", str(root / "t.txt")],
            "--model",
            str(root / "t.txt"),
        ),
        # evaluate
        (
            ["evaluate", "--hypotheses", str(root / "absent.de"), "--references", ref],
            "does not exist",
            hyp,
        ),
        (["evaluate", "--hypotheses", hyp, "--references", ref], "Line counts differ", hyp),
        (
            ["evaluate", "--hypotheses", hyp, "--references", ref, "--metric", "ter"],
            "invalid choice",
            hyp,
        ),
        # average
        ([*average, "--output", averaged, "--preset", "base"], "needs --vocabulary-size", averaged),
        (
            ["average", "--directory", str(root), "--last", "0", "--output", averaged],
            "--last must be >= 1",
            averaged,
        ),
        (
            ["average", "--directory", str(root / "absent"), "--output", averaged],
            "--directory not found",
            averaged,
        ),
        (
            [*average, "--config", str(root / "absent.json"), "--output", averaged],
            "--config file not found",
            averaged,
        ),
        (
            [*average, "--output", str(root / "averaged.txt")],
            "must end in .weights.h5",
            str(root / "averaged.txt"),
        ),
        ([*average, "--output", averaged], "holds no config", averaged),
        (
            [*average, "--config", str(root / "broken.json"), "--output", averaged],
            "is not valid JSON",
            averaged,
        ),
        # export
        (
            ["export", "--model", str(root / "absent.keras"), "--output", exported],
            "no such file",
            exported,
        ),
        (
            ["export", "--weights", str(root / "ckpt-1.weights.h5"), "--output", exported],
            "--weights needs --tokenizer",
            exported,
        ),
        (
            ["export", "--model", model, "--beam-size", "0", "--output", exported],
            "--beam-size must be >= 1",
            exported,
        ),
        (
            ["export", "--model", model, "--output", str(root / "existing")],
            "--overwrite",
            str(root / "existing"),
        ),
        # plot
        (
            ["plot", "--run-dir", str(root / "absent"), "--output-dir", figures],
            "run directory not found",
            figures,
        ),
        (
            ["plot", "--run-dir", str(root / "incomplete_run"), "--output-dir", figures],
            "no model.keras",
            figures,
        ),
        (
            [
                "plot",
                "--run-dir",
                str(root / "incomplete_run"),
                "--dpi",
                "0",
                "--output-dir",
                figures,
            ],
            "--dpi",
            figures,
        ),
        # the command itself
        (["fly"], "invalid choice", out),
        ([], "a command is needed", out),
    ]


def test_every_bad_invocation_is_one_line_with_status_2_and_writes_nothing(files):
    checked = cases(files)
    assert len(checked) >= 25
    wrong = []  # every case checked, so one run lists all that misbehave
    for argv, expected, watched in checked:
        before = snapshot(watched)
        status, stdout, stderr = run_in_process(argv)
        one_line = stderr.endswith("\n") and stderr.count("\n") == 1
        says_it = " error: " in stderr and expected in stderr
        if (status, stdout) != (2, "") or not one_line or not says_it:
            wrong.append((argv, status, stdout, stderr, expected))
        elif snapshot(watched) != before:
            wrong.append((argv, "wrote to", watched))
    assert not wrong, "\n".join(map(repr, wrong))
    config = json.loads((files / "started" / RUN_CONFIG_FILE).read_text())
    assert config["model"]["intermediate_dim"] == 64


def command_lines(stderr):
    """stderr without TensorFlow's C++ start-up log lines (not the command's)."""
    return [
        line
        for line in stderr.splitlines()
        if not line.startswith(("WARNING: All log messages before absl", "I0000", "W0000"))
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--model-override", "num_layer=2", "--output-dir", "{root}/out"],
        ["average", "--directory", "{root}", "--last", "0", "--output", "{root}/a.weights.h5"],
    ],
)
def test_a_real_process_gives_what_the_in_process_harness_gives(files, argv):
    argv = [argument.format(root=files) for argument in argv]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    process = subprocess.run(
        [sys.executable, "-m", "keras_transformer", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    status, stdout, stderr = run_in_process(argv)
    assert (process.returncode, process.stdout) == (status, stdout) == (2, "")
    assert command_lines(process.stderr) == stderr.splitlines()
    assert len(stderr.splitlines()) == 1 and not (files / "out").exists()


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_backend_not_installed_is_one_line_naming_its_extra(backend, tmp_path):
    # The backend's package made unimportable, as on a machine without it.
    code = (
        f"import sys; sys.modules[{backend!r}] = None; from keras_transformer.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    output = tmp_path / "run"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT, "KERAS_BACKEND": backend}
    process = subprocess.run(
        [sys.executable, "-c", code, "train", "--recipe", "quickstart", "--output-dir",
         str(output), "--max-steps", "1"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert process.returncode == 2 and process.stdout == ""
    assert command_lines(process.stderr) == [
        f"keras-transformer train: error: the Keras backend {backend} is not installed: "
        f"pip install 'keras-transformer-mt[{backend}]', or set KERAS_BACKEND to an installed "
        "one (tensorflow is always installed)"
    ]
    assert not output.exists()


def test_an_import_writes_one_line_and_tells_user_errors_from_failures(capsys):
    import errno

    from keras_transformer.utils.command_line import OneLineErrorParser, write_model_file

    parser = OneLineErrorParser(prog="keras-transformer import demo")

    def chatty():
        print("a message of the importer")

    assert write_model_file(parser, chatty, "m.keras") == 0
    out, err = capsys.readouterr()
    assert out == ""  # stdout carries no data, even what the importer prints
    assert err.splitlines() == [
        "a message of the importer",
        "keras-transformer import demo: wrote m.keras",
    ]

    def refused():
        raise ValueError("the model uses relative positions\nwhich are not supported")

    with pytest.raises(SystemExit) as exited:
        write_model_file(parser, refused, "m.keras")
    assert exited.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1

    def disk_full():
        raise OSError(errno.ENOSPC, "No space left on device", "m.keras")

    assert write_model_file(parser, disk_full, "m.keras") == 1  # not the user's input
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "m.keras" in err
