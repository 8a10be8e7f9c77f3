"""Inputs reported in the user's terms: what `train` drops from its data, and damaged or
unreadable files named by the file or flag the user gave (never a library's argument names),
with what was expected. Each command runs in-process (`run_in_process` of test_command_errors).
"""

import os

import pytest
from conftest import BACKEND_INDEPENDENT
from test_command_errors import run_in_process

from keras_transformer.synthetic.corpus import generate_synthetic_pairs

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


@pytest.fixture
def read_only(tmp_path, monkeypatch):
    """A folder no one may write in; as root (who may), `os.access` is made to say so."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:
        real_access = os.access

        def access(path, mode, **kwargs):
            if mode & os.W_OK and os.path.realpath(path) == str(folder.resolve()):
                return False
            return real_access(path, mode, **kwargs)

        monkeypatch.setattr(os, "access", access)
    yield folder
    folder.chmod(0o755)


@BACKEND_INDEPENDENT
def test_a_read_only_output_folder_is_named_by_its_flag(data, tmp_path, read_only):
    model = tmp_path / "model.keras"
    model.write_bytes(b"not read: the output is refused first")
    checkpoint = tmp_path / "ckpt-1.weights.h5"
    checkpoint.write_bytes(b"not read either")
    text = str(data / "test.de")
    cases = [
        (["translate", "--model", str(model), "--input", text], "--output", "out.de"),
        (["average", "--checkpoints", str(checkpoint)], "--output", "avg.weights.h5"),
        (["evaluate", "--hypotheses", text, "--references", text], "--json", "scores.json"),
        (["export", "--model", str(model)], "--output", "serving"),
        (["import", "fairseq", str(model), "--dictionary-dir", str(tmp_path)], "--output",
         "x.keras"),
    ]  # fmt: skip
    for argv, flag, name in cases:
        output = read_only / name
        one_line_error(
            run_in_process([*argv, flag, str(output)]),
            f"{flag} {output}: cannot write in its folder {read_only}",
        )
    assert os.listdir(read_only) == []


@BACKEND_INDEPENDENT
def test_atomic_writes_name_the_file_asked_for(tmp_path, monkeypatch):
    """Where the temporary file beside it cannot be made, the error names the target."""
    from keras_transformer.text.text_files import write_bytes_atomic

    target = tmp_path / "vocabulary.model"
    real_open = os.open

    def refusing_open(path, *args, **kwargs):
        if os.path.dirname(path) == str(tmp_path):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    with pytest.raises(PermissionError) as error:
        write_bytes_atomic(target, b"data")
    assert error.value.filename == str(target)


@BACKEND_INDEPENDENT
def test_evaluate_names_the_line_that_is_not_utf8(data, tmp_path):
    hypotheses = tmp_path / "latin1.de"
    hypotheses.write_bytes("Grüße\n".encode() + "Straße\n".encode("latin-1"))
    references = tmp_path / "references.de"
    references.write_text("Grüße\nStraße\n", encoding="utf-8")
    argv = ["evaluate", "--hypotheses", str(hypotheses), "--references", str(references)]
    stderr = one_line_error(
        run_in_process(argv),
        f"{hypotheses}: line 2 is not UTF-8 text (byte 5: b'\\xdf'); the file must be UTF-8",
    )
    assert "errors=" not in stderr
