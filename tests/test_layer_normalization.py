"""LayerNormalization: Keras' layer in another form; values and gradients against closed forms."""

import keras
import numpy as np
import pytest
from conftest import to_numpy
from references import layer_norm

from keras_transformer import Seq2SeqTransformer
from keras_transformer.layers import LayerNormalization


def normalization(seed=0, features=16, epsilon=1e-6, **kwargs):
    """A built layer with random (not the initial ones and zeros) gamma and beta."""
    rng = np.random.default_rng(seed)
    layer = LayerNormalization(epsilon=epsilon, **kwargs)
    layer.build((None, None, features))
    gamma = rng.uniform(0.5, 1.5, size=features)
    beta = rng.normal(size=features)
    layer.set_weights([gamma.astype("float32"), beta.astype("float32")])
    return layer


def gradients(layer, x, upstream):
    """The gradients of `sum(layer(x) * upstream)` in x, gamma and beta (backend autodiff)."""
    if keras.backend.backend() == "jax":
        import jax

        def loss(x, gamma, beta):
            outputs, _ = layer.stateless_call([gamma, beta], [], x)
            return (outputs * upstream).sum()

        grads = jax.grad(loss, argnums=(0, 1, 2))(x, *(w.value for w in layer.weights))
        return [np.asarray(g) for g in grads]
    if keras.backend.backend() == "torch":
        import torch

        x = torch.tensor(x, requires_grad=True)
        loss = (layer(x) * torch.as_tensor(upstream)).sum()
        weights = [w.value for w in layer.trainable_variables]
        return [g.numpy() for g in torch.autograd.grad(loss, [x, *weights])]
    import tensorflow as tf

    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(layer(x) * upstream)
    return [g.numpy() for g in tape.gradient(loss, [x, *layer.trainable_variables])]


def closed_form_gradients(x, gamma, upstream, epsilon):
    """LayerNorm's gradients: dx = (g' - mean(g') - x_hat mean(g' x_hat)) / sigma, g' = g gamma."""
    x, upstream = x.astype(np.float64), upstream.astype(np.float64)
    sigma = np.sqrt(x.var(-1, keepdims=True) + epsilon)
    x_hat = (x - x.mean(-1, keepdims=True)) / sigma
    scaled = upstream * gamma
    dx = (
        scaled - scaled.mean(-1, keepdims=True) - x_hat * (scaled * x_hat).mean(-1, keepdims=True)
    ) / sigma
    return dx, (upstream * x_hat).sum((0, 1)), upstream.sum((0, 1))


def test_matches_the_definition_and_keras_layer():
    layer = normalization()
    rng = np.random.default_rng(1)
    x = rng.normal(loc=3.0, scale=2.0, size=(4, 7, 16)).astype("float32")
    expected = layer_norm(x.astype(np.float64), layer)
    np.testing.assert_allclose(to_numpy(layer(x)), expected, rtol=1e-5, atol=1e-5)

    # Keras' own layer with the same weights: the same function, computed differently.
    reference = keras.layers.LayerNormalization(epsilon=1e-6)
    reference.build(x.shape)
    reference.set_weights(layer.get_weights())
    np.testing.assert_allclose(to_numpy(layer(x)), to_numpy(reference(x)), rtol=1e-5, atol=1e-5)


def test_gradients_match_the_closed_form():
    layer = normalization(seed=2, epsilon=1e-3)
    rng = np.random.default_rng(3)
    x = rng.normal(loc=-1.0, scale=3.0, size=(3, 5, 16)).astype("float32")
    upstream = rng.normal(size=x.shape).astype("float32")
    gamma = to_numpy(layer.gamma).astype(np.float64)
    got = gradients(layer, x, upstream)
    expected = closed_form_gradients(x, gamma, upstream, epsilon=1e-3)
    for name, g, e in zip(["x", "gamma", "beta"], got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow, XLA on and off")
@pytest.mark.parametrize("jit_compile", [False, True])
def test_tensorflow_functions_with_and_without_xla_match_the_closed_form(jit_compile):
    import tensorflow as tf

    layer = normalization(seed=4, epsilon=1e-3)
    rng = np.random.default_rng(5)
    x = tf.constant(rng.normal(loc=2.0, scale=0.5, size=(2, 9, 16)).astype("float32"))
    upstream = rng.normal(size=x.shape).astype("float32")

    @tf.function(jit_compile=jit_compile)
    def outputs_and_gradients(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs = layer(x)
            loss = tf.reduce_sum(outputs * upstream)
        return outputs, tape.gradient(loss, [x, *layer.trainable_variables])

    outputs, got = outputs_and_gradients(x)
    np.testing.assert_allclose(outputs.numpy(), layer_norm(x.numpy(), layer), rtol=1e-5, atol=1e-5)
    gamma = to_numpy(layer.gamma).astype(np.float64)
    expected = closed_form_gradients(x.numpy(), gamma, upstream, epsilon=1e-3)
    for name, g, e in zip(["x", "gamma", "beta"], got, expected, strict=True):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_half_precision_inputs_are_normalized_in_float32(policy):
    layer = normalization(seed=6, dtype=policy)
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 3, 16)).astype("float32")
    half = keras.ops.cast(x, policy.removeprefix("mixed_"))
    outputs = layer(half)
    assert keras.backend.standardize_dtype(outputs.dtype) == policy.removeprefix("mixed_")
    # Only the input's and the output's roundings: unit roundoff 2**-11 or 2**-8.
    expected = layer_norm(to_numpy(keras.ops.cast(half, "float32")).astype(np.float64), layer)
    tolerance = 4 * {"mixed_float16": 2**-11, "mixed_bfloat16": 2**-8}[policy]
    np.testing.assert_allclose(
        to_numpy(keras.ops.cast(outputs, "float32")), expected, rtol=tolerance, atol=tolerance
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param(
            {"axis": 1},
            marks=pytest.mark.skipif(
                keras.backend.backend() == "torch",
                reason="Keras' LayerNormalization on torch passes one non-last axis to "
                "F.layer_norm, which normalizes the last axes only, and fails",
            ),
        ),
        {"center": False},
        {"scale": False},
    ],
)
def test_other_settings_fall_back_to_keras(kwargs):
    rng = np.random.default_rng(8)
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    ours = LayerNormalization(epsilon=1e-6, **kwargs)
    reference = keras.layers.LayerNormalization(epsilon=1e-6, **kwargs)
    ours.build(x.shape)
    reference.build(x.shape)
    reference.set_weights(ours.get_weights())
    np.testing.assert_allclose(to_numpy(ours(x)), to_numpy(reference(x)), rtol=1e-6, atol=1e-6)


def test_config_round_trip_and_the_models_norms(tiny_config):
    layer = normalization()
    clone = LayerNormalization.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    assert keras.saving.get_registered_name(LayerNormalization) == (
        "keras_transformer>LayerNormalization"
    )
    model = Seq2SeqTransformer(tiny_config.replace(normalize_first=True))
    model.build()
    norms = [
        layer
        for layer in model._flatten_layers()
        if isinstance(layer, keras.layers.LayerNormalization)
    ]
    # Two per encoder block, three per decoder block, one closing each pre-LN stack.
    assert len(norms) == 5 * tiny_config.num_layers + 2
    assert all(isinstance(norm, LayerNormalization) for norm in norms)
