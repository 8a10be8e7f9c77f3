"""Runs a group of cooperating processes (workers of one job) for the multi-process tests,
and the small `wmt14_base.py` run those tests launch on every process."""

import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import only_under

from keras_transformer.compat import keras_needs_workarounds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A one-layer width-32 model: a recipe's code path, minutes -> seconds.
SMALL_MODEL = [
    "--model-override", "num_layers=1", "--model-override", "d_model=32",
    "--model-override", "num_heads=2", "--model-override", "intermediate_dim=64",
]  # fmt: skip
# Untrained models never end a sentence: their outputs stop 5 tokens past the source, not 50.
SHORT_OUTPUTS = ["--max-extra-length", "5"]


def once_per_suite(backend):
    """Runs the test only in the suite run under `backend`.

    For tests that start their own `backend` processes: the suite under the other backend
    would repeat the same work (CI runs the suite once per backend).
    """
    return only_under(
        backend, f"starts its own {backend} processes; runs under KERAS_BACKEND={backend}"
    )


def fails_while_keras_needs(workaround, problem):
    """Expects the test to fail while Keras is known to need `workaround`; strict, so that
    a Keras release that fixes `problem` makes the test fail, saying to drop the workaround.
    """
    return pytest.mark.xfail(
        keras_needs_workarounds(),
        strict=True,
        reason=f"{problem} If this passes, this Keras fixed it: drop the {workaround} "
        "workaround of keras_transformer/compat.py (apply_distribute_workarounds).",
    )


# The scripts exit as the commands do (keras_transformer/utils/process_exit.py).
FROZEN_AT_EXIT = (
    "from keras_transformer.utils.process_exit import skip_collection_at_exit\n"
    "skip_collection_at_exit()\n"
)


def run_saving_script(script, backend, tmp_path, extra_env=None):
    """Runs `script` in a fresh `backend` process; it saves arrays with `np.savez(OUT, ...)`.

    For tests that need a backend started with its own devices. Returns the saved arrays.
    """
    out = tmp_path / "weights.npz"
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", **(extra_env or {})}
    result = subprocess.run(
        [sys.executable, "-c", f"{FROZEN_AT_EXIT}OUT = {str(out)!r}\n" + script],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return np.load(out)


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_all(commands, tmp_path, timeout=300):
    """Runs `{name: (argv, env)}` at once; fails on the first error or at the timeout.

    A worker whose peer died waits on its collectives, so this polls all of them rather
    than waiting on one; whatever still runs at the end (timeout, failure) is killed.
    """
    deadline = time.monotonic() + timeout
    processes, logs = {}, {}
    try:
        for name, (argv, env) in commands.items():
            logs[name] = tmp_path / f"{name}.log"
            with open(logs[name], "w") as log:
                processes[name] = subprocess.Popen(
                    argv, env=env, stdout=log, stderr=subprocess.STDOUT
                )
        while time.monotonic() < deadline:
            codes = {name: process.poll() for name, process in processes.items()}
            failed = [name for name, code in codes.items() if code not in (None, 0)]
            if failed:
                name = failed[0]
                raise AssertionError(f"{name} failed:\n{logs[name].read_text()[-4000:]}")
            if None not in codes.values():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout} s: {sorted(processes)}")
    finally:
        for process in processes.values():  # never leave a process behind
            if process.poll() is None:
                process.kill()
                process.wait()


def assert_group_matches_single(tmp_path, members, single="single"):
    """Weights the scripts saved as NAME.npy, NAME_start.npy and SINGLE_naive.npy agree.

    The group's members hold the same weights, equal to the single process's within 1e-5;
    all started from the same weights; training moved them far beyond the tolerance; and a
    per-member token mean (the naive control) lands elsewhere, so the comparison can fail.
    """
    first, second = (np.load(tmp_path / f"{name}.npy") for name in members)
    alone = np.load(tmp_path / f"{single}.npy")
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, alone, rtol=0, atol=1e-5)
    start = np.load(tmp_path / f"{single}_start.npy")
    for name in members:
        np.testing.assert_array_equal(np.load(tmp_path / f"{name}_start.npy"), start)
    assert np.abs(alone - start).max() > 1e-2
    assert np.abs(np.load(tmp_path / f"{single}_naive.npy") - alone).max() > 1e-3


def write_recipe_data(directory):
    """Generated WMT-named splits: train.{en,de}, valid.{en,de}, newstest2014.{en,de}."""
    from keras_transformer.synthetic import write_synthetic_corpus

    write_synthetic_corpus(directory, train_size=400, valid_size=10, test_size=12, seed=3)
    for language in ("en", "de"):
        os.replace(directory / f"test.{language}", directory / f"newstest2014.{language}")


def recipe_command(data, output, distribution, *arguments, steps=6):
    """A `steps`-step `wmt14_base.py` run of a one-layer width-32 model, checkpoints every 3."""
    return [
        sys.executable, os.path.join(ROOT, "recipes", "wmt14_base.py"),
        "--data-dir", str(data), "--output-dir", str(output), "--distribution", distribution,
        "--max-steps", str(steps), "--vocabulary-size", "300", "--token-budget", "256",
        "--checkpoint-every-steps", "3", "--verbose", "0",
        "--warmup-steps", "4",  # updates large enough for comparisons of weights to fail
        *SHORT_OUTPUTS, *SMALL_MODEL, *arguments,
    ]  # fmt: skip


def checkpoint_weights(output, step):
    """Every array of a run's checkpoint at `step`, flattened into one vector."""
    import h5py

    values = []
    with h5py.File(output / "checkpoints" / f"ckpt-{step:08d}.weights.h5") as file:
        file.visititems(
            lambda key, item: values.append(np.ravel(item[()]))
            if isinstance(item, h5py.Dataset) else None
        )  # fmt: skip
    return np.concatenate(values)
