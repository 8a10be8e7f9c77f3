"""`keras_transformer.backend`: the only module that looks at the backend, and its switches."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, to_numpy

from keras_transformer import backend
from keras_transformer.layers import Dropout, LayerNormalization

# Which modules may look at the backend, or read private names: tests/test_layering.py.


def test_the_environment_variable_names_forms_or_none():
    assert backend.forms._parse_disabled("") == frozenset()
    assert backend.forms._parse_disabled(" fused_adam, kernel_gradient ") == {
        "fused_adam",
        "kernel_gradient",
    }
    assert backend.forms._parse_disabled("none") == frozenset(backend.FORMS)
    with pytest.raises(ValueError, match=r"KERAS_TRANSFORMER_FAST_FORMS.*'hash'"):
        backend.forms._parse_disabled("hash")


def test_the_environment_variable_is_read_at_start():
    code = "from keras_transformer import backend; print(sorted(backend.disabled_forms()))"
    env = {**os.environ, backend.ENVIRONMENT_VARIABLE: "loss_gradient,kernel_gradient"}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "['kernel_gradient', 'loss_gradient']"


def stock_forms():
    """What runs with every speed form off: Keras' ops, but on torch the dropout that resumes."""
    if keras.backend.backend() == "torch":
        return backend.FastForms(dropout="torch_generator")
    return backend.FastForms()


def test_all_forms_off_give_the_stock_keras_ops():
    with backend.fast_forms_disabled("none"):
        assert backend.fast_forms() == stock_forms()
        x = keras.ops.reshape(keras.ops.linspace(-2.0, 2.0, 64 * 32), (64, 32))
        if keras.backend.backend() != "torch":
            layer = Dropout(0.5, seed=3)
            generator = keras.random.SeedGenerator(3)
            np.testing.assert_array_equal(
                to_numpy(layer(x, training=True)),
                to_numpy(keras.random.dropout(x, 0.5, seed=generator)),
            )
        ours = LayerNormalization(epsilon=1e-6)
        stock = keras.layers.LayerNormalization(epsilon=1e-6)
        np.testing.assert_allclose(to_numpy(ours(x)), to_numpy(stock(x)), rtol=1e-6, atol=1e-6)
    assert backend.disabled_forms() == backend.forms._disabled_by_environment()


@pytest.mark.skipif(
    keras.backend.backend() != "torch" and not backend.on_accelerator(),
    reason="the CPU forms of TensorFlow and JAX",
)
def test_torch_and_accelerators_use_the_stock_keras_ops():
    if keras.backend.backend() == "jax":  # the accelerator's own form
        assert backend.fast_forms() == backend.FastForms(one_hot_row_gradient=True)
    else:
        assert backend.fast_forms() == stock_forms()


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="a JAX custom gradient")
@pytest.mark.parametrize(
    "dtype, entries", [("float32", 2**27), ("bfloat16", 2**27), ("float32", 70)]
)
def test_one_hot_row_gradient_equals_the_scatter_of_take(monkeypatch, dtype, entries):
    """`gather_rows`' accelerator form against autodiff of `jnp.take`, chunked or not."""
    import jax
    import jax.numpy as jnp

    # 70 entries: chunks of 3 of 23 tokens.
    monkeypatch.setattr(
        backend.kernels, "_ONE_HOT_ENTRIES", entries
    )  # 70: chunks of 3 of 23 tokens
    rng = np.random.default_rng(0)
    table = jnp.asarray(rng.normal(size=(20, 6)), jnp.float32)
    ids = jnp.asarray(rng.integers(0, 20, size=(23,)).reshape(1, 23))
    ids = ids.at[0, :8].set(0)  # one row named often, as the padding id
    weights = jnp.asarray(rng.normal(size=(1, 23, 6)), dtype)

    def loss(take, table):
        return jnp.sum(take(table, ids).astype(dtype) * weights).astype(jnp.float32)

    form = backend.kernels._one_hot_gradient_take()
    np.testing.assert_array_equal(form(table, ids), jnp.take(table, ids, axis=0))
    expected = jax.grad(lambda t: loss(lambda t, i: jnp.take(t, i, axis=0), t))(table)
    gradient = jax.grad(lambda t: loss(form, t))(table)
    tolerance = 1e-6 if dtype == "float32" else 1e-2
    np.testing.assert_allclose(gradient, expected, rtol=tolerance, atol=tolerance)
    assert gradient.dtype == table.dtype


@pytest.mark.skipif(
    keras.backend.backend() == "torch" or backend.on_accelerator(), reason="the stock ops there"
)
def test_turning_one_form_off_leaves_the_others():
    name = "loss_gradient" if keras.backend.backend() == "tensorflow" else "kernel_gradient"
    on = backend.fast_forms()
    with backend.fast_forms_disabled([name]):
        off = backend.fast_forms()
    assert getattr(on, name) and not getattr(off, name)
    assert (on.dropout, on.layer_norm) == (off.dropout, off.layer_norm)
    if keras.backend.backend() == "jax":
        assert (on.dropout, on.layer_norm) == ("hash", "scale_last")


def test_each_cpu_form_is_on_where_it_was_measured_faster():
    """The table of backend/forms.py's docstring (and docs/architecture.md), form by form."""
    xla_forms = {"hash_dropout", "layer_norm_scale_last"}
    tables = {
        ("tensorflow", False): {"fused_adam", "loss_gradient"},
        ("tensorflow", True): {*xla_forms, "loss_gradient"},
        ("jax", True): {*xla_forms, "kernel_gradient", "paired_beam_steps"},
    }
    for (name, xla), expected in tables.items():
        everything = backend.forms._cpu_forms(name, xla, frozenset())
        applied = {
            form
            for form in backend.FORMS
            if backend.forms._cpu_forms(name, xla, frozenset({form})) != everything
        }
        assert applied == {*expected, "blocked_top_k"}, (name, xla)  # decoding's, on in all
    # The label-smoothed loss's gradient is autodiff's on JAX (measured 1.2% slower there).
    assert not backend.forms._cpu_forms("jax", True, frozenset()).loss_gradient
    assert backend.forms._cpu_forms("tensorflow", False, frozenset()).loss_gradient


def test_an_accelerator_gets_only_the_forms_measured_there():
    """On a GPU or TPU: JAX's embedding gradient; TensorFlow and torch the stock ops."""
    for name, expected in (("jax", {"one_hot_row_gradient"}), ("tensorflow", set())):
        everything = backend.forms._device_forms(name, True, True, frozenset())
        applied = {
            form
            for form in backend.FORMS
            if backend.forms._device_forms(name, True, True, frozenset({form})) != everything
        }
        assert applied == expected, name
    assert backend.forms._device_forms("jax", True, True, frozenset()) == backend.FastForms(
        one_hot_row_gradient=True
    )
    for accelerator in (False, True):  # torch: its resumable dropout, nothing else
        forms = backend.forms._device_forms("torch", accelerator, False, frozenset())
        assert forms == backend.FastForms(dropout="torch_generator")


@pytest.mark.parametrize("n, k", [(10000, 10), (4000, 3), (30, 4)])
def test_top_k_gives_the_values_and_indices_of_keras_top_k(n, k):
    rng = np.random.default_rng(n)
    x = rng.normal(size=(5, n)).astype("float32")
    x[:, [3, n - 1]] = x[:, [n // 2, n // 2]]  # ties in other blocks: the lower index first
    x[1, :] = np.round(x[1, :])  # many ties
    x[2, ::7] = 50.0  # the best entries spread over more blocks than k
    x[3] -= 10.0
    x[3, [0, n - 3, n - 2]] = [1.0, 1.0, 10.0]  # a tie whose later entry has the best block
    expected_values, expected_indices = (to_numpy(t) for t in keras.ops.top_k(x, k))
    values, indices = (to_numpy(t) for t in backend.top_k(keras.ops.convert_to_tensor(x), k))
    np.testing.assert_array_equal(values, expected_values)
    if keras.backend.backend() != "torch":  # torch.topk may order ties either way
        np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(np.take_along_axis(x, indices, -1), values)
    # The form applies to wide rows only, each cut into blocks that divide it.
    block = backend.kernels._top_k_block(n, k)
    assert (block is None) == (n == 30) and (block is None or n % block == 0)


@pytest.mark.skipif(
    keras.backend.backend() == "torch" or backend.on_accelerator(), reason="the stock ops there"
)
def test_a_training_step_is_not_offered_decodings_forms():
    forms = backend.applicable_forms(xla=True)
    assert "blocked_top_k" in forms
    training = backend.applicable_forms(xla=True, decoding=False)
    assert set(training) == set(forms) - set(backend.DECODING_FORMS)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="a JAX custom gradient")
def test_token_embedding_takes_the_one_hot_row_gradient_from_its_variable(monkeypatch):
    """The accelerator's form inside a layer (a Keras variable, a traced step) on the CPU."""
    import jax

    from keras_transformer.layers import TokenEmbedding

    layer = TokenEmbedding(vocabulary_size=30, embedding_dim=8)
    ids = np.array([[0, 0, 0, 5, 7, 29], [0, 3, 3, 3, 2, 1]])
    layer.build()
    weights = np.random.default_rng(1).normal(size=(2, 6, 8)).astype("float32")

    def gradient():
        def loss(variables):
            outputs, _ = layer.stateless_call(variables, [], ids)
            return (outputs * weights).sum()

        values = [variable.value for variable in layer.trainable_variables]
        return np.asarray(jax.jit(jax.grad(loss))(values)[0])

    expected = gradient()
    form = backend.FastForms(one_hot_row_gradient=True)
    monkeypatch.setattr(backend.kernels, "fast_forms", lambda: form)
    np.testing.assert_allclose(gradient(), expected, rtol=1e-6, atol=1e-6)
    # Row 0 gets four tokens' sums, unused rows nothing: the scatter's result.
    assert np.abs(expected[[4, 6, 8]]).max() == 0 and np.abs(expected[0]).max() > 0


@BACKEND_INDEPENDENT
def test_frozen_heap_skips_old_objects_and_still_frees_new_garbage():
    import gc
    import weakref

    from keras_transformer.backend import frozen_heap

    class Node:
        pass

    def cycle():  # garbage only a collection frees (a reference cycle)
        node = Node()
        node.self = node
        return weakref.ref(node)

    suite_frozen = gc.get_freeze_count() > 0  # tests/conftest.py freezes after collection
    collecting = gc.isenabled()
    gc.unfreeze()
    gc.disable()  # only the explicit collections below: an automatic one could free `old` early
    try:
        old = cycle()  # made before: frozen inside, so not collected there
        with frozen_heap():
            assert gc.get_freeze_count() > 0
            new = cycle()
            gc.collect()
            assert new() is None  # what is made inside is still collected
            assert old() is not None  # the frozen cycle is not walked
        assert gc.get_freeze_count() == 0  # unfrozen on exit
        gc.collect()
        assert old() is None

        gc.freeze()  # a caller's freeze is left as it is
        count = gc.get_freeze_count()
        with frozen_heap():
            pass
        assert gc.get_freeze_count() == count
    finally:
        gc.unfreeze()
        if suite_frozen:
            gc.freeze()
        if collecting:
            gc.enable()
