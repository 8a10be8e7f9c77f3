import atexit
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

# CTranslate2 reads this when it is imported. On AMD CPUs it picks oneDNN for its int8
# matmuls, whose AVX2 kernels (u8s8, without AVX-512 VNNI) moved the tests' per-token
# log-probabilities by 0.50 on average against float32; Intel MKL's by 0.025
# (docs/serving.md). The int8 test checks the export, so it runs on MKL's kernels.
os.environ.setdefault("CT2_USE_MKL", "1")

# Under pytest-xdist (`.ci/run` starts two test processes on CI's two cores) each process
# computes on one thread. Two processes that each start a thread per core oversubscribe the
# cores, and spinning thread pools then wait on each other: PyTorch's OpenMP ran a training
# test 8x slower than alone. The subprocesses that tests start inherit these settings.
# (XLA's CPU thread pool has no such setting; holding each JAX process to one core changed
# nothing measurable.)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # PyTorch, NumPy's BLAS
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
# XLA's optimizing passes cost more than they save on the tests' tiny models and batches: a
# test compiles far more than it runs. JAX's documented switch for that case keeps the
# programs' meaning and leaves out most of their optimization (on CI's AVX2 cores, five
# compile-heavy decoding tests went from 81 to 58 s). The processes that tests start inherit
# it; a user's own runs keep XLA's default.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# XLA's CPU fusion emitters and thunk runtime compile several times slower than the older
# code generation they replace (on CI's AVX2 cores, three compile-heavy test files under JAX:
# 167 s -> 110 s, their 411 compilations 97 s -> 46 s; the JAX suite 849 s -> 592 s; the
# TensorFlow files that compile with XLA 131 s -> 114 s). The tests and the processes they
# start use the older path where XLA still has it. XLA aborts a process on a flag it does
# not know, so the first process (pytest-xdist's controller, or the only one) tries them in
# a fresh JAX process first; TensorFlow reads them only where it compiles with XLA, and this
# TensorFlow's XLA knows them. XLA_FLAGS set by the user, and a user's own runs, keep theirs.
OLDER_XLA_CPU_CODEGEN = "--xla_cpu_use_fusion_emitters=false --xla_cpu_use_thunk_runtime=false"
if "XLA_FLAGS" not in os.environ and "KERAS_TRANSFORMER_TESTS_XLA_FLAGS_TRIED" not in os.environ:
    os.environ["KERAS_TRANSFORMER_TESTS_XLA_FLAGS_TRIED"] = "1"
    _tried = subprocess.run(
        [sys.executable, "-c", "import jax.numpy as jnp; jnp.ones(2).block_until_ready()"],
        env={**os.environ, "XLA_FLAGS": OLDER_XLA_CPU_CODEGEN},
        capture_output=True,
        timeout=300,
    )
    if _tried.returncode == 0:
        os.environ["XLA_FLAGS"] = OLDER_XLA_CPU_CODEGEN
# The session's compilation cache for started processes (below), inherited from pytest-xdist's
# controller: kept from this process's own JAX, which reads it when keras imports it.
if os.environ.get("JAX_COMPILATION_CACHE_DIR", "") == os.environ.get(
    "KERAS_TRANSFORMER_TESTS_XLA_CACHE"
):
    os.environ.pop("JAX_COMPILATION_CACHE_DIR")

import numpy as np
import pytest

from keras_transformer import TransformerConfig
from keras_transformer.utils.process_exit import skip_collection_at_exit

# A test process exits as the commands do, without the interpreter's last garbage collection
# over every object its tests left (seconds at the end of each suite, waited for by pytest).
skip_collection_at_exit()

# The commands keep compiled programs in the user's cache directory (JAX): the tests and the
# commands they start use one of their own, never the user's.
_CACHE_HOME = tempfile.mkdtemp(prefix="keras-transformer-tests-cache-")
atexit.register(shutil.rmtree, _CACHE_HOME, ignore_errors=True)
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME

# The processes that tests start (recipes, commands, benchmarks) share one JAX compilation
# cache for the whole session, across both test processes: many of them compile the same tiny
# models on the same batch shapes. The first process (pytest-xdist's controller, or the only
# one) makes it and passes it on. The test processes themselves compile as before (above), so
# the tests that count compilations see what a user would; a test that checks a run's own
# cache drops `JAX_COMPILATION_CACHE_DIR` from the environment it passes on. A cache the user
# set is kept.
if "KERAS_TRANSFORMER_TESTS_XLA_CACHE" not in os.environ:
    _shared = tempfile.mkdtemp(prefix="keras-transformer-tests-xla-")
    os.environ["KERAS_TRANSFORMER_TESTS_XLA_CACHE"] = _shared
    atexit.register(shutil.rmtree, _shared, ignore_errors=True)
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.environ["KERAS_TRANSFORMER_TESTS_XLA_CACHE"])
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def only_under(backend, reason):
    """Runs the test only in the suite run under `backend` (CI runs one suite per backend)."""
    import keras

    return pytest.mark.skipif(keras.backend.backend() != backend, reason=reason)


def __getattr__(name):
    """The marks that need Keras, made when a test module imports them.

    This file imports no Keras itself: pytest-xdist's controller, which loads it but runs no
    test, then starts its test processes without waiting for Keras (about 10 s per suite).
    """
    if name == "CPU_FORMS":
        # The fast forms of `keras_transformer.backend` apply on a CPU; a test of one skips
        # elsewhere.
        from keras_transformer import backend

        reason = "a GPU or TPU runs the stock Keras ops, not the CPU forms"
        return pytest.mark.skipif(backend.on_accelerator(), reason=reason)
    if name == "BACKEND_INDEPENDENT":
        # What does not depend on the Keras backend (argument handling, file formats,
        # command-line streams, converters of saved weights) runs once: `.ci/run` runs the
        # suite three times. It runs under PyTorch, which Keras runs eagerly, so these tests'
        # own training and decoding trace nothing (on CI's AVX2 cores, 1168 s of them under
        # TensorFlow, 806 s under PyTorch). The docs pages' commands still run under
        # TensorFlow, the users' default.
        return only_under("torch", "backend-independent; runs on PyTorch")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The files with the longest runs in CI (pytest --durations), started first. Under
# `--dist loadfile` a file runs whole in one of the two workers, and xdist's own order (most
# tests first) started most of these late, as they hold few tests, so one worker could be
# left running the longest of them alone at the end. `.ci/run` passes
# `--no-loadscope-reorder` so that xdist keeps this order.
LONGEST_FIRST = (
    "test_recipes.py",
    "test_docs.py",
    "test_resume.py",
    "test_fine_tuning.py",
    "test_lora_runs.py",  # its runs under torch only
    "test_benchmarks.py",
    "test_lora.py",
    "test_periodic_checkpoint.py",
    "test_multi_process_jax.py",
    "test_multi_worker.py",
    "test_accumulation.py",
    "test_distributed.py",
    "test_export.py",
    "test_translator.py",
    "test_figures.py",
    "test_learning.py",
    "test_cross_backend.py",
    "test_training_monitor.py",
)


def pytest_collection_modifyitems(config, items):
    """Files in `LONGEST_FIRST` order, then the others by number of tests (xdist's order)."""
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    counts = Counter(item.path.name for item in items)
    # A stable sort on a per-file key: each file stays contiguous and in its own order.
    items.sort(
        key=lambda item: (
            rank.get(item.path.name, len(rank)),
            -counts[item.path.name],
            item.path.name,
        )
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Freezes the objects alive after collection (the three backends' modules, the tests').

    Keras runs a full `gc.collect()` each time a layer drops a variable (int8 quantization,
    enabling LoRA): a walk over every object in the process, about 0.5 s in a test
    process that holds TensorFlow, JAX and PyTorch. Frozen objects are left out of those
    walks (`gc.freeze`), and those made by the tests are still collected as before (the int8
    tests under JAX: 59 s -> 36 s of CPU time). Only imported modules and the collected tests
    are frozen, which live to the end of the process anyway.
    """
    import gc

    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    import keras

    keras.utils.set_random_seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture
def tiny_config():
    return TransformerConfig(
        vocabulary_size=31,
        num_layers=2,
        d_model=16,
        num_heads=4,
        intermediate_dim=32,
        dropout=0.0,
    )


@pytest.fixture
def one_layer_config():
    """`small_config()`, for tests of training's bookkeeping (steps, files, logs, optimizer
    updates): the model's depth changes nothing there but the time spent tracing it."""
    return small_config()


def small_config(vocabulary_size=31, **overrides):
    """A one-layer model's config: d_model 16, 2 heads, d_ff 32, no dropout.

    For tests that need their own vocabulary (a tokenizer's) or another size than
    `tiny_config`'s, and for module-level models, where a fixture cannot reach.

    Args:
        vocabulary_size: int.
        **overrides: other `TransformerConfig` fields.

    Returns:
        A `TransformerConfig`.
    """
    sizes = {"num_layers": 1, "d_model": 16, "num_heads": 2, "intermediate_dim": 32, "dropout": 0.0}
    return TransformerConfig(vocabulary_size=vocabulary_size, **{**sizes, **overrides})


def random_token_ids(rng, batch, length, vocabulary_size, min_length=1, pad_id=0):
    """Right-padded random ids with lengths in [min_length, length]."""
    ids = rng.integers(1, vocabulary_size, size=(batch, length)).astype("int32")
    for row, row_length in enumerate(rng.integers(min_length, length + 1, size=batch)):
        ids[row, row_length:] = pad_id
    return ids


def to_numpy(x):
    import keras

    return keras.ops.convert_to_numpy(x)


def numpy_perplexity(model, batches):
    """Dev perplexity in float64 NumPy from the model's logits: the reference for
    `evaluation.perplexity`.

    The logits come from Keras' compiled `predict_on_batch`, one program per batch
    shape: run op by op, JAX compiles every operation for every shape.
    """
    pad_id = model.config.pad_id
    total, count = 0.0, 0
    for inputs, labels in batches:
        logits = to_numpy(model.predict_on_batch(inputs)).astype("float64")
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        label_log_probs = np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
        total -= label_log_probs[labels != pad_id].sum()
        count += int((labels != pad_id).sum())
    return math.exp(total / count)
