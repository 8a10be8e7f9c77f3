"""The commands keep TensorFlow's, XLA's, CUDA's and absl's own log lines off stderr.

The commands run as a user runs them: without `TF_CPP_MIN_LOG_LEVEL` in the environment
(the CI exports it; these processes do not get it), on a tiny quickstart run that trains,
translates and exports. Their stderr must hold only the package's own lines; `--verbose`
and a level the user set bring the libraries' lines back.
"""

import os
import re
import subprocess
import sys

import pytest
from conftest import BACKEND_INDEPENDENT
from process_group import SMALL_MODEL

from keras_transformer.utils.backend_logs import filter_log_lines, wants_backend_logs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What the libraries write, as TensorFlow 2.21 and jaxlib print it on a CPU-only machine.
LIBRARY_LINES = re.compile(
    r"^[EWIF]\d{4} |absl|cuInit|oneDNN|tensorflow/|cuda_platform|pjrt_client", re.MULTILINE
)
TINY_TRAINING = [
    "--vocabulary-size", "300", "--token-budget", "256", "--warmup-steps", "2",
    "--max-steps", "3", "--checkpoint-every-steps", "3", "--synthetic-sizes", "400", "10", "12",
    "--pipeline-override", "bucket_growth=1.5", "--max-extra-length", "3", *SMALL_MODEL,
]  # fmt: skip
CAPTURED = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1796661931.379585   12483 port.cc:153] oneDNN custom operations are on.
I0000 00:00:1796661931.825078   12483 cpu_feature_guard.cc:227] This TensorFlow binary is optimized.
To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow.
W1207 16:55:45.454064   18786 pjrt_client.cc:579] a warning
E0000 00:00:1796661964.514266   12483 cuda_platform.cc:52] failed call to cuInit: INTERNAL
F0000 00:00:1796661964.514266   12483 check.cc:1] a fatal error
To enable the following instructions: this line follows no log line
/site-packages/keras/src/x.py:1: UserWarning: a Python warning
"""


def environment(**settings):
    """The test's environment without TF_CPP_MIN_LOG_LEVEL, with `settings` added."""
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    return {**env, "PYTHONPATH": ROOT, **settings}


def run(arguments, cwd, stdin=None, **settings):
    command = [sys.executable, "-m", "keras_transformer", *arguments]
    result = subprocess.run(
        command, cwd=cwd, input=stdin, capture_output=True, text=True,
        env=environment(**settings), timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def library_lines(stderr):
    return [line for line in stderr.splitlines() if LIBRARY_LINES.search(line)]


@BACKEND_INDEPENDENT
def test_filter_drops_the_severities_the_level_hides_and_keeps_other_lines():
    lines = CAPTURED.splitlines(keepends=True)
    assert filter_log_lines(CAPTURED, 0) == CAPTURED
    assert filter_log_lines(CAPTURED, 1) == "".join(lines[4:])  # warnings and above
    assert filter_log_lines(CAPTURED, 2) == "".join(lines[5:])
    # Fatal lines always stay, and so does every line that is not a library's log line.
    assert filter_log_lines(CAPTURED, 3) == "".join(lines[6:])


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "argv, wanted",
    [
        (["translate", "--run-dir", "r"], False),
        (["translate", "--verbose", "--run-dir", "r"], True),
        (["export", "--run-dir", "r", "--verbose"], True),
        (["train", "--verbose", "1"], False),
        (["train", "--verbose", "0"], False),
        (["train", "--verbose", "2"], True),
        (["train", "--verbose=2"], True),
    ],
)
def test_verbose_asks_for_the_library_lines(argv, wanted):
    assert wants_backend_logs(argv) is wanted


@pytest.fixture(scope="module")
def quiet_run(tmp_path_factory):
    """A tiny quickstart run trained, translated and exported without TF_CPP_MIN_LOG_LEVEL."""
    work = tmp_path_factory.mktemp("quiet")
    train = run(["train", "--output-dir", "run", *TINY_TRAINING], work)
    sentences = "A dog runs.\nTwo men talk.\n"
    translate = run(["translate", "--run-dir", "run", "--max-extra-length", "3"], work, sentences)
    export = run(["export", "--run-dir", "run", "--output", "serving/1"], work)
    return work, {"train": train, "translate": translate, "export": export}


@BACKEND_INDEPENDENT
def test_train_translate_and_export_write_no_library_log_line(quiet_run):
    work, results = quiet_run
    assert (work / "run" / "saved_model").is_dir() and (work / "serving" / "1").is_dir()
    assert len(results["translate"].stdout.splitlines()) == 2
    assert "Finished 3 steps" in results["train"].stdout + results["train"].stderr
    for name, result in results.items():
        assert library_lines(result.stderr) == [], (name, result.stderr[-3000:])


@BACKEND_INDEPENDENT
def test_verbose_and_a_level_the_user_set_bring_the_lines_back(quiet_run):
    work, _ = quiet_run
    translate = ["translate", "--run-dir", "run", "--max-extra-length", "3"]
    verbose = run([*translate, "--verbose"], work, "A dog runs.\n")
    assert library_lines(verbose.stderr), verbose.stderr[-3000:]
    assert len(verbose.stdout.splitlines()) == 1
    user_level = run(translate, work, "A dog runs.\n", TF_CPP_MIN_LOG_LEVEL="0")
    assert library_lines(user_level.stderr), user_level.stderr[-3000:]
