"""Runs a group of cooperating processes (workers of one job) for the multi-process tests."""

import socket
import subprocess
import time

import keras
import pytest


def once_per_suite(backend):
    """Runs the test only in the suite run under `backend`.

    For tests that start their own `backend` processes: the suite under the other backend
    would repeat the same work (CI runs the suite once per backend).
    """
    return pytest.mark.skipif(
        keras.backend.backend() != backend,
        reason=f"starts its own {backend} processes; runs under KERAS_BACKEND={backend}",
    )


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
