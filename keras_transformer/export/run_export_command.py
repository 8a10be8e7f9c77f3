"""Running the export command under the TensorFlow backend, from any backend."""

import os
import subprocess
import sys


def run_export_command(arguments, capture_stderr=False):
    """Runs `python -m keras_transformer.export ARGUMENTS` with `KERAS_BACKEND=tensorflow`.

    The serving graph is a TensorFlow graph, so the export traces on the
    TensorFlow backend; a model trained under JAX gets there through its
    backend-independent weights, in this subprocess.

    Args:
        arguments: list of str, the command's arguments.
        capture_stderr: bool. Capture the standard error as text (it is in
            the result's `stderr`) instead of passing it through.

    Returns:
        The `subprocess.CompletedProcess`.

    Example:

    >>> run_export_command(["--model", "run/translator.keras", "--output", "serving/1"])
    """
    environment = {**os.environ, "KERAS_BACKEND": "tensorflow"}
    return subprocess.run(
        [sys.executable, "-m", "keras_transformer.export", *arguments],
        env=environment,
        stderr=subprocess.PIPE if capture_stderr else None,
        text=True,
        check=False,
    )
