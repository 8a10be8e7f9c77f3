"""Inputs reported in the user's terms: what `train` drops from its data, and damaged or
unreadable files named by the file or flag the user gave (never a library's argument names),
with what was expected. Each command runs in-process (`run_in_process` of test_command_errors).
"""

import pytest
from conftest import BACKEND_INDEPENDENT
from test_command_errors import run_in_process

from keras_transformer.text.synthetic_corpus import generate_synthetic_pairs

SMALL = ["--model-override", "num_layers=1", "--model-override", "d_model=16",
         "--model-override", "num_heads=2", "--model-override", "intermediate_dim=32"]  # fmt: skip


def one_line_error(result, *expected):
    """Exit status 2, nothing on stdout, one line on stderr holding every `expected` text."""
    status, stdout, stderr = result
    assert (status, stdout) == (2, ""), stderr
    assert stderr.endswith("\n") and stderr.count("\n") == 1, stderr
    for text in expected:
        assert text in stderr, stderr
    return stderr


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """train/valid/test .en/.de files of the generated corpus."""
    folder = tmp_path_factory.mktemp("data")
    english, german = generate_synthetic_pairs(120, seed=0)
    splits = (("train", slice(0, 100)), ("valid", slice(100, 102)), ("test", slice(110, 112)))
    for split, rows in splits:
        (folder / f"{split}.en").write_text("\n".join(english[rows]) + "\n", encoding="utf-8")
        (folder / f"{split}.de").write_text("\n".join(german[rows]) + "\n", encoding="utf-8")
    return folder


@BACKEND_INDEPENDENT
def test_train_drops_and_counts_pairs_with_an_empty_side(data, tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for name in ("valid", "test"):
        for language in ("en", "de"):
            path = f"{name}.{language}"
            (folder / path).write_bytes((data / path).read_bytes())
    english = (data / "train.en").read_text(encoding="utf-8").splitlines()
    german = (data / "train.de").read_text(encoding="utf-8").splitlines()
    english[5], german[40] = "", "   "
    (folder / "train.en").write_text("\n".join(english) + "\n", encoding="utf-8")
    (folder / "train.de").write_text("\n".join(german) + "\n", encoding="utf-8")
    argv = ["train", "--data-dir", str(folder), "--output-dir", str(tmp_path / "run"),
            "--vocabulary-size", "100", *SMALL, "--token-budget", "256", "--max-steps", "1",
            "--no-validate", "--no-export", "--verbose", "0"]  # fmt: skip
    status, stdout, stderr = run_in_process(argv)
    assert status == 0, stderr
    expected = "98 of 100 pairs per epoch (2 dropped: 2 with an empty side, 0 longer than 256"
    assert expected in stdout, stdout
