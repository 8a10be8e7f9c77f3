"""The commands keep the backends' own log lines off stderr unless asked for them.

TensorFlow (and the XLA, CUDA and absl libraries under it and under jaxlib) write
their own lines to stderr: `I0000 ... cpu_feature_guard.cc:...] This TensorFlow
binary is optimized ...`, `E0000 ... failed call to cuInit ...` on a machine
without a GPU, `E0000 ... oneDNN supports DT_INT64 only ...`. They say nothing
about the user's command, and an `E` line reads as an error. A command process
therefore, before any backend loads:

- sets `TF_CPP_MIN_LOG_LEVEL=3` (TensorFlow's and jaxlib's C++ logging: only
  fatal lines) unless the user set it; a process started by the command (the
  export's TensorFlow subprocess) inherits the setting;
- drops the lines that absl writes while the backend library loads, before
  TensorFlow has read that setting (absl's "All log messages before
  absl::InitializeLog() is called are written to STDERR" and the lines after
  it), those of a severity the level hides; every other line written during
  the import is passed on;
- raises the Python loggers `absl` and `tensorflow` to errors only.

`--verbose` (`train --verbose 2`) leaves all of it as the libraries have it, and
a `TF_CPP_MIN_LOG_LEVEL` the user set is kept (`0` shows every line).
"""

import importlib.machinery
import os
import re
import sys

LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
QUIET_LEVEL = "3"  # TensorFlow's C++ logging: 0 all, 1 no INFO, 2 no WARNING, 3 no ERROR
# The top-level modules whose import loads a backend's native libraries.
WATCHED_MODULES = ("tensorflow", "jax", "jaxlib", "torch")
SEVERITIES = "IWEF"
# absl's and glog's prefix: severity, MMDD, time, thread id, file:line].
LOG_LINE = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ [^\s\]]+:\d+\] ")
PRE_INIT_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called"
# The second line of TensorFlow's cpu_feature_guard message.
CONTINUATION = "To enable the following instructions:"

_finder = None


def wants_backend_logs(argv):
    """Whether a command's arguments ask for the backends' log lines.

    `--verbose` as a switch (every command but `train`) or with the value 2
    (`train --verbose 2`; 0 and 1 keep them off).

    Args:
        argv: list of str, the command's arguments.

    Returns:
        bool.

    Example:

    >>> wants_backend_logs(["--model", "m.keras", "--verbose"])
    True
    >>> wants_backend_logs(["--recipe", "quickstart", "--verbose", "1"])
    False
    """
    argv = list(argv)
    for index, argument in enumerate(argv):
        if argument == "--verbose=2":
            return True
        if argument == "--verbose":
            value = argv[index + 1] if index + 1 < len(argv) else None
            return value not in ("0", "1")
    return False


def quiet_backend_logs(argv=None, verbose=None):
    """Keeps the backends' own log lines off stderr for this command process.

    Called by the command-line entry points before anything loads a backend; a
    program that imports the package keeps the libraries' own settings. Calling
    it again changes nothing.

    Args:
        argv: list of str, the command's arguments (`--verbose` in them turns
            this off), or None for `sys.argv[1:]`.
        verbose: bool or None; given, it decides instead of `argv`.

    Example:

    >>> quiet_backend_logs(["translate", "--model", "m.keras"])  # in a command's main()
    """
    global _finder
    if verbose is None:
        verbose = wants_backend_logs(sys.argv[1:] if argv is None else argv)
    if verbose:
        # Also for the processes the command starts, which would otherwise quiet theirs.
        os.environ.setdefault(LEVEL_VARIABLE, "0")
        return
    os.environ.setdefault(LEVEL_VARIABLE, QUIET_LEVEL)
    level = log_level()
    if level == 0 or _finder is not None:
        return
    _finder = _QuietImportFinder(level)
    sys.meta_path.insert(0, _finder)


def log_level():
    """The C++ log level in force (`TF_CPP_MIN_LOG_LEVEL`, 0 when unset or not a number)."""
    try:
        return max(0, int(os.environ.get(LEVEL_VARIABLE, "0")))
    except ValueError:
        return 0


def filter_log_lines(text, level):
    """`text` without the log lines that log level `level` hides.

    Args:
        text: str, what was written to stderr.
        level: int, a `TF_CPP_MIN_LOG_LEVEL` value.

    Returns:
        str, the other lines, in order.

    Example:

    >>> filter_log_lines("I0000 00:00:1.5 12 port.cc:153] oneDNN ...\\nkept\\n", 3)
    'kept\\n'
    """
    kept = []
    dropped_last = False
    for line in text.splitlines(keepends=True):
        match = LOG_LINE.match(line)
        if match is not None:
            drop = SEVERITIES.index(match.group(1)) < min(level, 3)
        elif line.startswith(PRE_INIT_NOTICE):
            drop = level >= 1
        else:
            drop = dropped_last and line.startswith(CONTINUATION)
        if not drop:
            kept.append(line)
        dropped_last = drop
    return "".join(kept)


def _quiet_python_loggers(level):
    import logging

    for name in ("absl", "tensorflow"):
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.level, logging.WARNING if level == 1 else logging.ERROR))


class _QuietImportFinder:
    """Wraps the first import of a watched backend module: its stderr lines filtered."""

    def __init__(self, level):
        self.level = level

    def find_spec(self, name, path=None, target=None):
        if name not in WATCHED_MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):  # on this loader instance only; its class is unchanged
            with _FilteredStderr(self.level):
                run(module)
            _quiet_python_loggers(self.level)

        spec.loader.exec_module = exec_module
        return spec


class _FilteredStderr:
    """File descriptor 2 goes to a temporary file; its lines, filtered, are written back."""

    def __init__(self, level):
        self.level = level

    def __enter__(self):
        import tempfile

        sys.stderr.flush()
        self.saved = os.dup(2)
        self.capture = tempfile.TemporaryFile()
        os.dup2(self.capture.fileno(), 2)
        return self

    def __exit__(self, kind, error, traceback):
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.capture.seek(0)
        text = self.capture.read().decode("utf-8", errors="replace")
        self.capture.close()
        if error is None:  # a failed import shows everything it wrote
            text = filter_log_lines(text, self.level)
        if text:
            sys.stderr.write(text)
            sys.stderr.flush()
        return False
