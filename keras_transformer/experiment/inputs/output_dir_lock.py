"""An exclusive lock on a run's output directory, so two runs never write in one."""

import datetime
import logging
import os
import socket

from keras_transformer.utils.run_directory import LOCK_FILE, RunDirectory

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, runs are not guarded
    fcntl = None

logger = logging.getLogger("keras_transformer.experiment")


def _holder_error(path, holder):
    """The OSError naming the run that holds the lock file `path`."""
    directory = os.path.dirname(path)
    return OSError(
        f"Another run is writing in the output directory {directory} ({holder}; lock "
        f"file {path}). Wait for it to end or pass another --output-dir."
    )


def check_output_dir_free(directory):
    """Raises OSError when another run holds `directory`'s lock; writes nothing.

    A check ahead of `OutputDirLock` (which still takes the lock), so a command
    refuses an occupied directory before it loads the backend.

    Args:
        directory: str or `RunDirectory`, an output directory (it need not exist).
    """
    path = RunDirectory(directory).lock_path
    if fcntl is None or not os.path.isfile(path):
        return
    try:
        file = open(path, encoding="utf-8")  # noqa: SIM115 (`with file` below)
    except OSError:
        return  # unreadable: `OutputDirLock` decides
    with file:
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = file.read().strip() or "a process that wrote no details"
            raise _holder_error(path, holder) from None
        except OSError:
            return  # no locks on this file system: `OutputDirLock` warns


class OutputDirLock:
    """Holds `{directory}/.run.lock` while one run writes in `directory`.

    Two runs started on one output directory would prune each other's
    checkpoints and replace each other's SavedModel. The second one to start
    fails at once with an `OSError` that names the directory and the process
    holding it, before it writes anything. The lock is the operating system's
    (`flock`), so it ends with its process however that stops, `kill -9`
    included: an interrupted run resumes without any clean-up. The file itself
    stays and only records who held it last.

    Args:
        directory: str or `RunDirectory`. The output directory (it must exist).

    Example:

    >>> with OutputDirLock("runs/base"):
    ...     train_and_write_everything()
    """

    NAME = LOCK_FILE

    def __init__(self, directory):
        self.path = RunDirectory(directory).lock_path
        self._file = None

    def __enter__(self):
        if fcntl is None:
            logger.warning("No file locks on this platform: %s is not guarded", self.path)
            return self
        file = open(self.path, "a+", encoding="utf-8")  # held until __exit__
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # held by another open file: another run
            file.seek(0)
            holder = file.read().strip() or "a process that wrote no details"
            file.close()
            raise _holder_error(self.path, holder) from None
        except OSError as error:  # e.g. a file system without locks (ENOLCK)
            logger.warning("Cannot lock %s (%s): this run is not guarded", self.path, error)
            file.close()
            return self
        started = datetime.datetime.now().isoformat(timespec="seconds")
        file.truncate(0)
        file.write(f"process {os.getpid()} on {socket.gethostname()}, started {started}\n")
        file.flush()
        self._file = file
        return self

    def __exit__(self, *exc_info):
        if self._file is not None:
            self._file.close()  # closing releases the lock
            self._file = None
