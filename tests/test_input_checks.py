"""`input_checks`: a run's checks that need no backend agree with the backend's own answers."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import BACKEND_INDEPENDENT
from test_bad_inputs import made  # noqa: F401 (the fixture: a run directory, data files)

from keras_transformer.experiment.inputs.input_checks import check_output_dir
from keras_transformer.experiment.inputs.output_dir_lock import OutputDirLock, check_output_dir_free
from keras_transformer.experiment.inputs.run_config_file import data_fingerprint

pytestmark = BACKEND_INDEPENDENT
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_configured_backend_is_the_one_keras_loads(tmp_path):
    # keras.json names the backend when KERAS_BACKEND is unset; Keras itself is the reference.
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax"}))
    code = (
        "import sys\n"
        "from keras_transformer.experiment.inputs.input_checks import configured_backend\n"
        "before = configured_backend()\n"
        "assert 'keras' not in sys.modules\n"
        "import keras\n"
        "print(before, keras.backend.backend())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(KERAS_HOME=str(tmp_path), PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["jax", "jax"]


def test_a_free_output_dir_passes_and_is_left_as_it_was(tmp_path):
    check_output_dir_free(str(tmp_path / "absent"))  # nothing to check yet
    with OutputDirLock(str(tmp_path)):
        pass
    lock = tmp_path / OutputDirLock.NAME
    before = lock.read_text()
    check_output_dir_free(str(tmp_path))
    assert lock.read_text() == before and os.listdir(tmp_path) == [OutputDirLock.NAME]
    with OutputDirLock(str(tmp_path)), pytest.raises(OSError, match="Another run is writing"):
        check_output_dir_free(str(tmp_path))
    with OutputDirLock(str(tmp_path)):  # the check released what it took
        pass


def test_output_dir_under_a_file_is_named(tmp_path):
    (tmp_path / "a_file").write_text("x")
    check_output_dir(str(tmp_path / "new" / "run"))  # created by the run
    with pytest.raises(NotADirectoryError, match="a_file is a file, not a directory"):
        check_output_dir(str(tmp_path / "a_file" / "run"))


def test_fingerprint_follows_an_edited_file(tmp_path):
    path = tmp_path / "train.en"
    path.write_bytes(b"one\n")
    first = data_fingerprint([str(path)])["train.en"]
    path.write_bytes(b"two\n")  # the same size: only the time and the bytes differ
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    second = data_fingerprint([str(path)])["train.en"]
    assert first == {"bytes": 4, "sha256": hashlib.sha256(b"one\n").hexdigest()}
    assert second == {"bytes": 4, "sha256": hashlib.sha256(b"two\n").hexdigest()}


def test_an_input_the_run_would_write_over_is_refused_before_anything_is_written(made, tmp_path):  # noqa: F811
    from test_bad_inputs import SMALL
    from test_command_errors import run_in_process, snapshot

    run = tmp_path / "run"
    shutil.copytree(made / "run", run)
    exported = run / "saved_model"  # replaced by the run's export
    shutil.copytree(made / "data", exported)
    (tmp_path / "link.keras").symlink_to(run / "model.keras")
    before = snapshot(run)
    cases = [
        (["--init-from", str(run / "model.keras")], "--init-from", "model.keras"),
        (["--init-from", str(tmp_path / "link.keras")], "--init-from", "model.keras"),
        (["--vocabulary", str(exported / "vocabulary.model")], "--vocabulary", "saved_model"),
        (["--data-dir", str(exported)], "--train-split", "saved_model"),
    ]
    shutil.copy(run / "vocabulary.model", exported / "vocabulary.model")
    before = snapshot(run)
    for flags, flag, what in cases:
        argv = ["train", "--output-dir", str(run), "--max-steps", "1", "--no-validate",
                "--no-export", "--verbose", "0", *flags]  # fmt: skip
        if "--init-from" not in flags:
            argv += SMALL
        if "--data-dir" not in flags:
            argv += ["--data-dir", str(made / "data")]
        if "--vocabulary" not in flags and "--init-from" not in flags:
            argv += ["--vocabulary-size", "100"]
        status, stdout, stderr = run_in_process(argv)
        lines = stderr.splitlines()
        assert (status, stdout, len(lines)) == (2, "", 1), (flags, stderr[-2000:])
        assert f"error: {flag} " in lines[0] and "would write over" in lines[0], lines[0]
        assert f"writes {what}" in lines[0], lines[0]
        assert snapshot(run) == before, flags
    # That every file a run writes is among them: test_recipes.py checks a finished run.
