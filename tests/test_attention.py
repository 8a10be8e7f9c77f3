import threading
import warnings

import keras
import numpy as np
import pytest
from conftest import to_numpy
from references import numpy_attention

from keras_transformer.layers import MultiHeadAttention, TokenEmbedding
from keras_transformer.layers.matrix_glorot_uniform import MatrixGlorotUniform


@pytest.mark.parametrize("use_bias", [False, True])
def test_matches_numpy_reference_with_separate_key_and_value_sizes(use_bias):
    rng = np.random.default_rng(0)
    query = rng.normal(size=(2, 5, 12)).astype("float32")
    memory = rng.normal(size=(2, 7, 12)).astype("float32")
    mask = np.ones((2, 1, 7), bool)
    mask[1, :, 4:] = False
    layer = MultiHeadAttention(num_heads=3, key_dim=2, value_dim=6, use_bias=use_bias)
    output, weights = layer(query, memory, attention_mask=mask, return_attention_scores=True)
    expected, expected_weights = numpy_attention(
        layer, query, memory, np.broadcast_to(mask, (2, 5, 7))
    )
    assert layer.query_dense.kernel.shape == (12, 3, 2)
    assert len(layer.weights) == (8 if use_bias else 4)
    assert layer.value_dense.kernel.shape == (12, 3, 6)
    np.testing.assert_allclose(to_numpy(output), expected, atol=1e-5)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=1e-6)
    assert np.all(to_numpy(weights)[1, :, :, 4:] == 0.0)


def test_a_single_key_matches_the_reference_without_a_warning():
    # A cached search's first step attends over one key; Keras' softmax warns about a size-1
    # axis (to stderr, on every backend that runs the step eagerly).
    rng = np.random.default_rng(5)
    query = rng.normal(size=(3, 1, 8)).astype("float32")
    memory = rng.normal(size=(3, 1, 8)).astype("float32")
    mask = np.array([True, False, True]).reshape(3, 1, 1)  # a masked single key still gets all
    layer = MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        output, weights = layer(query, memory, attention_mask=mask, return_attention_scores=True)
    expected, _ = numpy_attention(layer, query, memory)
    np.testing.assert_allclose(to_numpy(output), expected, atol=1e-5)
    np.testing.assert_array_equal(to_numpy(weights), np.ones((3, 2, 1, 1)))


def test_causal_self_attention_matches_reference():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    output = layer(x, use_causal_mask=True)
    causal = np.tril(np.ones((6, 6), bool))[None].repeat(2, 0)
    expected, _ = numpy_attention(layer, x, x, causal)
    np.testing.assert_allclose(to_numpy(output), expected, atol=1e-5)


def test_growing_cache_reproduces_full_causal_attention():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    layer = MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3)
    full = to_numpy(layer(x, use_causal_mask=True))
    # (batch, heads, length, head_dim)
    cache = (np.zeros((2, 2, 6, 4), "float32"), np.zeros((2, 2, 6, 3), "float32"))
    steps = []
    for t in range(6):
        out, cache = layer(x[:, t : t + 1], use_causal_mask=True, cache=cache, cache_index=t)
        steps.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)
    # The cache holds the projected keys of every step.
    keys = np.transpose(to_numpy(layer.key_dense(x)), (0, 2, 1, 3))  # (batch, heads, length, d_k)
    np.testing.assert_allclose(to_numpy(cache[0]), keys, atol=1e-6)


def test_fixed_matrices_give_the_same_outputs_and_follow_weight_changes():
    rng = np.random.default_rng(4)
    query = rng.normal(size=(2, 3, 8)).astype("float32")
    memory = rng.normal(size=(2, 5, 8)).astype("float32")
    layer = MultiHeadAttention(num_heads=2, key_dim=4, use_bias=True)
    expected = (to_numpy(layer(query, use_causal_mask=True)), to_numpy(layer(query, memory)))
    with layer.fixed_matrices():
        inside = (to_numpy(layer(query, use_causal_mask=True)), to_numpy(layer(query, memory)))
    for got, want in zip(inside, expected, strict=True):
        np.testing.assert_array_equal(got, want)
    # Outside the context the matrices are read from the weights again.
    layer.output_dense.kernel.assign(2.0 * layer.output_dense.kernel)
    doubled = to_numpy(layer(query, memory))
    np.testing.assert_allclose(
        doubled, 2.0 * expected[1] - to_numpy(layer.output_dense.bias), atol=1e-5
    )


@pytest.mark.parametrize("layer_name", ["attention", "embedding"])
def test_prepared_matrices_are_seen_only_in_the_thread_that_prepared_them(layer_name):
    # While one thread traces a decoding loop with the prepared matrices, another
    # calling the same layer (a server decoding two requests) reads the weights.
    rng = np.random.default_rng(6)
    if layer_name == "attention":
        layer = MultiHeadAttention(num_heads=2, key_dim=4)
        query = rng.normal(size=(2, 3, 8)).astype("float32")
        memory = rng.normal(size=(2, 5, 8)).astype("float32")
        call, prepare = (lambda: layer(query, memory)), layer.fixed_matrices
        before = to_numpy(call())  # builds the layer
        weight = layer.output_dense.kernel
    else:
        layer = TokenEmbedding(vocabulary_size=10, embedding_dim=8)
        states = rng.normal(size=(2, 3, 8)).astype("float32")
        call, prepare = (lambda: layer(states, reverse=True)), layer.fixed_output_matrix
        before = to_numpy(call())
        weight = layer.embeddings
    entered, release = threading.Event(), threading.Event()

    def hold():
        with prepare():
            entered.set()
            release.wait(timeout=60)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert entered.wait(timeout=60)
        weight.assign(2.0 * to_numpy(weight))  # the other thread's matrices are the old ones
        after = to_numpy(call())
    finally:
        release.set()
        thread.join()
    np.testing.assert_allclose(after, 2.0 * before, rtol=1e-5, atol=1e-5)


def test_static_cache_equals_recomputing_keys_and_values():
    rng = np.random.default_rng(3)
    query = rng.normal(size=(2, 3, 8)).astype("float32")
    memory = rng.normal(size=(2, 5, 8)).astype("float32")
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    direct = layer(query, memory)
    cached = layer(query, cache=layer.compute_key_value(memory))
    np.testing.assert_allclose(to_numpy(cached), to_numpy(direct), atol=1e-6)


def test_static_cache_shared_by_consecutive_query_rows_matches_the_reference():
    # Beam search's cross-attention: 3 beams per source read one cache row.
    rng = np.random.default_rng(5)
    beams, query_len = 3, 2
    query = rng.normal(size=(2 * beams, query_len, 8)).astype("float32")
    memory = rng.normal(size=(2, 5, 8)).astype("float32")
    mask = np.ones((2, 1, 5), bool)
    mask[1, :, 3:] = False
    layer = MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3, use_bias=True)
    layer.build(query.shape, memory.shape)
    output, weights = layer(
        query,
        cache=layer.compute_key_value(memory),
        attention_mask=mask,
        return_attention_scores=True,
    )
    tiled = np.repeat(memory, beams, axis=0)  # row i * beams + j holds source i
    tiled_mask = np.broadcast_to(np.repeat(mask, beams, axis=0), (2 * beams, query_len, 5))
    expected, expected_weights = numpy_attention(layer, query, tiled, tiled_mask)
    assert tuple(output.shape) == (2 * beams, query_len, 8)
    np.testing.assert_allclose(to_numpy(output), expected, atol=1e-5)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_masks_are_safe_in_low_precision(policy):
    # Relative to the output's scale: about 5 roundings to the compute dtype (inputs,
    # kernels, projections, weights, context), of unit roundoff 2**-11 or 2**-8.
    tolerance = 5 * {"mixed_float16": 2**-11, "mixed_bfloat16": 2**-8}[policy]
    rng = np.random.default_rng(4)
    mask = np.ones((2, 4, 4), bool)
    mask[0, :, 2:] = False
    mask[1] = False  # a fully masked row (an all-padding source) must not give NaN
    layer = MultiHeadAttention(num_heads=2, key_dim=4, dtype=policy)
    # A documented fully masked row attends uniformly: the mean of the outputs of
    # attending to each key alone.
    only_key = [np.broadcast_to(np.arange(4) == t, (1, 4, 4)) for t in range(4)]
    # Unit-scale activations keep the softmax soft, so the weights check the 1/sqrt(d_k)
    # scale; large ones (scores in the thousands) would overflow a -1e9 additive mask
    # in float16 to -inf/NaN.
    for scale in (1.0, 30.0):
        query = (rng.normal(size=(2, 4, 8)) * scale).astype("float32")
        output, weights = layer(
            keras.ops.convert_to_tensor(query), attention_mask=mask, return_attention_scores=True
        )
        assert keras.backend.standardize_dtype(output.dtype) == policy.split("_")[1]
        assert keras.backend.standardize_dtype(weights.dtype) == "float32"
        output, weights = to_numpy(keras.ops.cast(output, "float32")), to_numpy(weights)
        assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
        assert np.all(weights[0, :, :, 2:] == 0.0)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)

        x = query.astype(np.float64)
        expected, expected_weights = numpy_attention(layer, x[:1], x[:1], mask[:1])
        uniform = np.mean([numpy_attention(layer, x[1:], x[1:], m)[0] for m in only_key], 0)
        expected = np.concatenate([expected, uniform])
        expected_weights = np.concatenate([expected_weights, np.full((1, 2, 4, 4), 0.25)])
        np.testing.assert_allclose(weights, expected_weights, atol=tolerance)
        np.testing.assert_allclose(output, expected, atol=tolerance * np.abs(expected).max())


def test_attention_dropout_only_in_training():
    x = np.random.default_rng(5).normal(size=(1, 6, 8)).astype("float32")
    layer = MultiHeadAttention(num_heads=2, key_dim=4, dropout=0.5)
    inference = to_numpy(layer(x))
    np.testing.assert_allclose(to_numpy(layer(x)), inference)
    assert not np.allclose(to_numpy(layer(x, training=True)), inference)


def test_config_round_trip_and_bad_arguments():
    layer = MultiHeadAttention(num_heads=4, key_dim=8, value_dim=16, dropout=0.1, use_bias=True)
    clone = MultiHeadAttention.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    with pytest.raises(ValueError, match="num_heads=0"):
        MultiHeadAttention(num_heads=0, key_dim=8)
    with pytest.raises(ValueError, match=r"dropout=1\.5"):
        MultiHeadAttention(num_heads=2, key_dim=8, dropout=1.5)


def test_matrix_glorot_uniform_variance_is_xaviers():
    # U(-L, L) has variance L^2 / 3 = 2 / (fan_in + fan_out).
    for shape, input_axes, fan_out, fans in (
        ((256, 8, 32), 1, None, 256 + 256),
        ((8, 32, 256), 2, None, 256 + 256),
        ((256, 8, 32), 1, 3 * 256, 256 + 3 * 256),
    ):
        initializer = MatrixGlorotUniform(input_axes=input_axes, fan_out=fan_out, seed=3)
        values = to_numpy(initializer(shape))
        assert initializer.limit(shape) == pytest.approx((6 / fans) ** 0.5)
        assert np.abs(values).max() <= initializer.limit(shape)
        assert values.var() == pytest.approx(2 / fans, rel=0.03)
    restored = keras.initializers.deserialize(keras.initializers.serialize(initializer))
    assert restored.get_config() == {"input_axes": 1, "fan_out": 768, "seed": 3}
    with pytest.raises(ValueError, match="input_axes=0"):
        MatrixGlorotUniform(input_axes=0)


@pytest.mark.parametrize("initializer, qkv_variance", [
    ("glorot_uniform", 2 / (256 + 256)),  # Xavier per (d_model, d_model) projection
    ("xavier_fused_qkv", 2 / (256 + 3 * 256)),  # fairseq: one (3 d_model, d_model) matrix
])  # fmt: skip
def test_attention_initializers_give_the_closed_form_variances(initializer, qkv_variance):
    layer = MultiHeadAttention(num_heads=8, key_dim=32, kernel_initializer=initializer)
    layer.build((None, None, 256))
    for dense in (layer.query_dense, layer.key_dense, layer.value_dense):
        assert to_numpy(dense.kernel).var() == pytest.approx(qkv_variance, rel=0.04)
    assert to_numpy(layer.output_dense.kernel).var() == pytest.approx(2 / 512, rel=0.04)
    clone = MultiHeadAttention.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    clone.build((None, None, 256))
    assert to_numpy(clone.query_dense.kernel).var() == pytest.approx(qkv_variance, rel=0.04)


@pytest.mark.parametrize("length, index", [(1, 0), (1, 5), (3, 2), (3, 4)])
def test_cache_update_writes_the_positions_and_keeps_those_before(length, index):
    from keras_transformer.backend import growing_cache, update_cache

    rng = np.random.default_rng(0)
    cache = rng.normal(size=(2, 3, 7, 4)).astype("float32")  # (batch, heads, length, dim)
    update = rng.normal(size=(2, 3, length, 4)).astype("float32")
    expected = cache.copy()
    expected[:, :, index : index + length] = update
    # A growing cache ends after the update; a fixed buffer keeps its length.
    expected = expected[:, :, : index + length] if growing_cache() else expected
    # The index as a traced tensor too, as in the decoding loop.
    for position in (index, keras.ops.convert_to_tensor(index, "int32")):
        result = to_numpy(update_cache(keras.ops.convert_to_tensor(cache), update, position))
        np.testing.assert_array_equal(result, expected)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow graphs")
def test_cached_decoding_step_traces_without_xla_ops():
    import tensorflow as tf

    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    cache = (tf.zeros((1, 2, 5, 4)), tf.zeros((1, 2, 5, 4)))  # (batch, heads, length, dim)
    step = tf.function(lambda x, i: layer(x, cache=cache, cache_index=i, use_causal_mask=True)[0])
    graph = step.get_concrete_function(tf.TensorSpec((1, 1, 8)), tf.TensorSpec((), tf.int32)).graph
    op_types = {op.type for op in graph.get_operations()}
    assert not {t for t in op_types if t.startswith("Xla")}, op_types
    assert "ConcatV2" in op_types
