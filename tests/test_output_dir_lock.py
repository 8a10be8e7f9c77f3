"""The output-directory lock: a second run is refused; a killed run's lock is gone."""

import errno
import os
import signal
import subprocess
import sys

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer.experiment.inputs import output_dir_lock
from keras_transformer.experiment.inputs.output_dir_lock import OutputDirLock

pytestmark = BACKEND_INDEPENDENT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLDER = (
    "import sys, time\n"
    "from keras_transformer.experiment.inputs.output_dir_lock import OutputDirLock\n"
    "with OutputDirLock(sys.argv[1]):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(120)\n"
)


def test_second_holder_is_refused_with_the_directory_and_the_holder(tmp_path):
    first = OutputDirLock(str(tmp_path))
    with first, pytest.raises(OSError) as error, OutputDirLock(str(tmp_path)):
        pass
    message = str(error.value)
    assert str(tmp_path) in message and f"process {os.getpid()}" in message
    with OutputDirLock(str(tmp_path)):  # released on exit
        pass


def test_lock_of_a_killed_process_is_released(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(OSError, match=f"process {holder.pid} on "),
            OutputDirLock(str(tmp_path)),
        ):
            pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        with OutputDirLock(str(tmp_path)):  # no clean-up needed after kill -9
            pass
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_file_system_without_locks_warns_and_runs(tmp_path, monkeypatch, caplog):
    def no_locks(*args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(output_dir_lock.fcntl, "flock", no_locks)
    with OutputDirLock(str(tmp_path)):
        pass
    assert "not guarded" in caplog.text and str(tmp_path) in caplog.text
