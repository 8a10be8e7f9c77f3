"""The private TensorFlow and Keras names of `keras_transformer.compat` still exist and behave.

Each test fails with a message naming the private thing, so that a new Keras or TensorFlow
that changes one shows where to look (and the `keras` upper bound in pyproject.toml is
raised only once these pass).
"""

import importlib

import keras
import numpy as np
import pytest

from keras_transformer import compat


def private(condition, name):
    assert condition, (
        f"{name} changed or disappeared in this Keras/TensorFlow "
        f"(keras {keras.__version__}); update keras_transformer/compat.py."
    )


def test_tensorflows_xla_context_check():
    tf = pytest.importorskip("tensorflow")
    try:
        module = importlib.import_module("tensorflow.python.ops.control_flow_util")
    except ImportError:
        module = None
    private(
        module is not None and callable(getattr(module, "GraphOrParentsInXlaContext", None)),
        "tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext",
    )
    seen = {}
    for jit_compile in (False, True):
        tf.function(
            lambda jit_compile=jit_compile: seen.setdefault(jit_compile, compat.in_xla_context()),
            jit_compile=jit_compile,
        )()
    private(seen == {False: False, True: True}, "GraphOrParentsInXlaContext's answer")
    assert not compat.in_xla_context()  # eager


def test_adams_moment_variables():
    optimizer = keras.optimizers.Adam(learning_rate=0.5)
    weights = [keras.Variable(np.ones((2, 3), "float32")), keras.Variable(np.ones(4, "float32"))]
    optimizer.build(weights)
    for name in ("_momentums", "_velocities", "_get_variable_index"):
        private(hasattr(optimizer, name), f"keras.optimizers.Adam.{name}")
    optimizer.apply([keras.ops.full((2, 3), 2.0), keras.ops.full((4,), 3.0)], weights)
    momentum, velocity = compat.adam_moments(optimizer, weights[1])
    # One step from zero: m = (1 - beta_1) g, v = (1 - beta_2) g^2.
    private(
        np.allclose(keras.ops.convert_to_numpy(momentum), 0.1 * 3.0)
        and np.allclose(keras.ops.convert_to_numpy(velocity), 0.001 * 9.0, rtol=1e-5),
        "Adam._momentums / _velocities (order or meaning)",
    )


def test_the_batch_counter_under_gradient_accumulation():
    optimizer = keras.optimizers.SGD(learning_rate=0.1, gradient_accumulation_steps=2)
    weights = keras.Variable(np.ones(3, "float32"))
    optimizer.build([weights])
    private(hasattr(optimizer, "_iterations"), "keras.optimizers.Optimizer._iterations")
    for _ in range(3):
        optimizer.apply([keras.ops.ones((3,))], [weights])
    batches = int(keras.ops.convert_to_numpy(compat.batch_counter(optimizer)))
    updates = int(keras.ops.convert_to_numpy(optimizer.iterations))
    private((batches, updates) == (3, 1), "Optimizer._iterations (counts batches)")


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="Keras' torch optimizers")
def test_kerass_torch_adam_update_of_all_variables():
    module = importlib.import_module("keras.src.backend.torch.optimizers.torch_adam")
    private(
        callable(getattr(getattr(module, "Adam", None), "_parallel_update_step", None)),
        "keras.src.backend.torch.optimizers.torch_adam.Adam._parallel_update_step",
    )


def test_kerass_safe_mode_flag():
    module = importlib.import_module("keras.src.saving.serialization_lib")
    private(
        callable(getattr(module, "in_safe_mode", None)),
        "keras.src.saving.serialization_lib.in_safe_mode",
    )
    with module.SafeModeScope(True):
        private(compat.in_safe_mode() is True, "serialization_lib.in_safe_mode (inside a scope)")
    with module.SafeModeScope(False):
        private(compat.in_safe_mode() is False, "serialization_lib.in_safe_mode (unsafe scope)")
