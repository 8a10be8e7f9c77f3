"""Argument parsing shared by the package's commands.

Every user error of every command is one line on stderr and exit status 2:
argparse's own errors (through `OneLineErrorParser.error`) and the ValueError /
OSError a command raises on the user's input (through `OneLineErrorParser.fail`).
"""

import argparse
import contextlib
import dataclasses
import os
import sys

from keras_transformer.utils.config_arguments import add_config_arguments
from keras_transformer.utils.same_file import check_output_writable

# Exit status of every user error (argparse's own for a bad invocation).
USER_ERROR_STATUS = 2


def one_line(error):
    """The message of an exception on one line; an OSError names its file.

    An error with a `command_line_message()` (`InvalidUtf8Error`) gives that: advice a
    user of a command can follow, where its own message is for Python callers.
    """
    message = str(error)
    if callable(getattr(error, "command_line_message", None)):
        message = error.command_line_message()
    elif isinstance(error, OSError) and error.filename is not None and error.strerror:
        message = f"{error.strerror}: {error.filename}"
    elif isinstance(error, KeyError) and error.args:
        message = str(error.args[0])
    return " ".join(message.split())


@dataclasses.dataclass(frozen=True)
class BackendLogOptions:
    """The flag every command but `train` shares (`train --verbose 2` does the same)."""

    verbose: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "Also show the backends' own log lines on stderr (TensorFlow, XLA, CUDA, "
            "absl), which are hidden unless TF_CPP_MIN_LOG_LEVEL is set.",
            "action": "store_true",
        },
    )


def add_verbose_flag(parser):
    """Adds `--verbose`: the backends' own log lines on stderr (`utils/backend_logs.py`).

    The entry points read the flag from the arguments before the backend loads
    (`wants_backend_logs`); here it is accepted and shown in `--help`, generated
    from `BackendLogOptions` like every other flag.

    Args:
        parser: an `argparse.ArgumentParser`.

    Returns:
        `{dest: field}` of the flag added.
    """
    return add_config_arguments(parser, BackendLogOptions())


class OneLineErrorParser(argparse.ArgumentParser):
    """Reports a bad invocation in one line (argparse prints the usage first), exit code 2."""

    def error(self, message):
        message = " ".join(str(message).split())
        self.exit(USER_ERROR_STATUS, f"{self.prog}: error: {message} (see --help)\n")

    def fail(self, error):
        """Exits with one line for an error the user's input caused (exit code 2).

        Args:
            error: an exception (its message, an OSError's file) or a str.
        """
        message = error if isinstance(error, str) else one_line(error)
        self.exit(USER_ERROR_STATUS, f"{self.prog}: error: {message}\n")


def check_keras_output(parser, output, overwrite):
    """Exits with one line (status 2) unless the command may write the `.keras` file `output`.

    It must end with `.keras`, be new (or `overwrite` given), sit in an existing
    folder and be writable: checked before any backend loads, so that a long
    import or conversion never fails at its last step.

    Args:
        parser: the command's `OneLineErrorParser`.
        output: str, the `--output` path.
        overwrite: bool, `--overwrite`.
    """
    if not output.endswith(".keras"):
        parser.error(f"--output must end with .keras. Received: {output}")
    if os.path.exists(output) and not overwrite:
        parser.fail(f"--output {output} exists; pass --overwrite to replace it")
    if not os.path.isdir(os.path.dirname(os.path.abspath(output))):
        parser.fail(f"--output {output}: its folder does not exist")
    try:
        check_output_writable(output)
    except PermissionError as error:
        parser.fail(error)


def check_input_files(parser, named_paths):
    """Exits with one line (status 2) for the first given path that is not a file.

    Args:
        parser: the command's `OneLineErrorParser`.
        named_paths: `(flag, path)` pairs; a None path (flag not given) is skipped.
    """
    for flag, path in named_paths:
        if path is not None and not os.path.isfile(path):
            parser.fail(f"{flag} {path}: no such file")


def write_model_file(parser, write, output):
    """Runs `write()`, which writes the model file `output`; returns the exit status.

    The end of an `import FORMAT` command, once its arguments are checked.
    What the importer prints goes to stderr (stdout carries no data). An
    error the input caused (a refused model, a missing dependency or file)
    is one line, status 2; another `OSError` (a full disk, a lost mount) is
    one line, status 1. On success, one line names the file.

    Args:
        parser: the command's `OneLineErrorParser`.
        write: a callable taking no arguments.
        output: str, the file `write` writes.

    Returns:
        int, 0 or 1 (status 2 exits).
    """
    try:
        with contextlib.redirect_stdout(sys.stderr):
            write()
    except (ValueError, ImportError, FileNotFoundError, IsADirectoryError) as error:
        parser.fail(error)
    except OSError as error:
        print(f"{parser.prog}: error: {one_line(error)}", file=sys.stderr)
        return 1
    print(f"{parser.prog}: wrote {output}", file=sys.stderr)
    return 0
