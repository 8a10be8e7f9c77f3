import keras
import numpy as np
import pytest
from conftest import random_token_ids, to_numpy
from references import numpy_transformer

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer
from keras_transformer.models import PRESETS


def make_inputs(rng, config, batch=3, source_length=7, target_length=6):
    return {
        "encoder_token_ids": random_token_ids(rng, batch, source_length, config.vocabulary_size),
        "decoder_token_ids": random_token_ids(rng, batch, target_length, config.vocabulary_size),
    }


VARIANTS = {
    "paper": {},
    "pre_ln": {"normalize_first": True},
    "untied_learned": {
        "share_embeddings": False,
        "tie_output_projection": False,
        "position_embedding": "learned",
        "source_vocabulary_size": 19,
    },
    "row_B": {"key_dim": 2, "value_dim": 4},
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_decoding_reproduces_teacher_forced_logits(tiny_config, variant):
    config = tiny_config.replace(**VARIANTS[variant])
    model = Seq2SeqTransformer(config)
    rng = np.random.default_rng(0)
    inputs = make_inputs(rng, config)
    inputs["encoder_token_ids"] = np.minimum(inputs["encoder_token_ids"], 18)
    full = to_numpy(model(inputs))

    encoder_outputs = model.encode(inputs["encoder_token_ids"])
    cache = model.initialize_cache(encoder_outputs, inputs["encoder_token_ids"], max_length=8)
    steps = []
    for t in range(6):
        logits, cache = model.decode(inputs["decoder_token_ids"][:, t : t + 1], cache, t)
        steps.append(to_numpy(logits))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_cached_decoding_runs_no_dropout_layer_call(tiny_config, monkeypatch):
    # Decoding is inference: each dropout returns its input without Keras' work per call,
    # which an eager step (torch) would otherwise pay a dozen times.
    config = tiny_config.replace(dropout=0.1, attention_dropout=0.1, activation_dropout=0.1)
    model = Seq2SeqTransformer(config)
    inputs = make_inputs(np.random.default_rng(3), config)
    full = to_numpy(model(inputs))
    calls = []
    layer_call = keras.layers.Layer.__call__

    def counting(layer, *args, **kwargs):
        calls.append(type(layer).__name__)
        return layer_call(layer, *args, **kwargs)

    monkeypatch.setattr(keras.layers.Layer, "__call__", counting)
    cache = model.initialize_cache(model.encode(inputs["encoder_token_ids"]),
                                   inputs["encoder_token_ids"], max_length=6)  # fmt: skip
    calls.clear()
    steps = []
    for t in range(6):
        logits, cache = model.decode(inputs["decoder_token_ids"][:, t : t + 1], cache, t)
        steps.append(to_numpy(logits))
    assert "Dropout" not in calls and "MultiHeadAttention" in calls
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_logits_at_t_ignore_later_tokens(tiny_config):
    model = Seq2SeqTransformer(tiny_config)
    rng = np.random.default_rng(1)
    inputs = make_inputs(rng, tiny_config, target_length=8)
    inputs["decoder_token_ids"] = rng.integers(1, 31, size=(3, 8)).astype("int32")
    base = to_numpy(model(inputs))
    for t in (0, 3, 6):
        changed = dict(inputs)
        changed["decoder_token_ids"] = inputs["decoder_token_ids"].copy()
        changed["decoder_token_ids"][:, t + 1 :] = rng.integers(1, 31, size=(3, 7 - t))
        logits = to_numpy(model(changed))
        np.testing.assert_allclose(logits[:, : t + 1], base[:, : t + 1], atol=1e-6)
        assert not np.allclose(logits[:, t + 1 :], base[:, t + 1 :], atol=1e-4)


def test_source_padding_is_ignored(tiny_config):
    model = Seq2SeqTransformer(tiny_config)
    inputs = make_inputs(np.random.default_rng(2), tiny_config)
    base = to_numpy(model(inputs))
    padded = dict(inputs)
    padded["encoder_token_ids"] = np.pad(inputs["encoder_token_ids"], ((0, 0), (0, 5)))
    np.testing.assert_allclose(to_numpy(model(padded)), base, atol=1e-5)


def test_embeddings_are_shared_and_scaled(tiny_config):
    model = Seq2SeqTransformer(tiny_config)
    inputs = make_inputs(np.random.default_rng(3), tiny_config)
    logits = to_numpy(model(inputs))
    embedding_weights = [w for w in model.weights if "embeddings" in w.path]
    assert len(embedding_weights) == 1  # source, target and pre-softmax share one matrix
    untied = Seq2SeqTransformer(
        tiny_config.replace(share_embeddings=False, tie_output_projection=False)
    )
    untied(inputs)
    extra = 2 * tiny_config.vocabulary_size * tiny_config.d_model
    assert untied.count_params() == model.count_params() + extra
    # Numpy forward from the weights: E[ids] * sqrt(d_model) + PE into post-LN blocks, and
    # logits = decoder states @ E^T with the same E (3.4, 3.5).
    expected = numpy_transformer(model, inputs["encoder_token_ids"], inputs["decoder_token_ids"])
    encoded = to_numpy(model.encode(inputs["encoder_token_ids"]))
    np.testing.assert_allclose(encoded, expected["encoder_outputs"], atol=1e-5)
    np.testing.assert_allclose(logits, expected["logits"], atol=1e-5)


def test_untied_logits_are_the_decoder_states_times_the_output_kernel(tiny_config):
    config = tiny_config.replace(tie_output_projection=False)
    model = Seq2SeqTransformer(config)
    inputs = make_inputs(np.random.default_rng(5), config)
    logits = to_numpy(model(inputs))
    # Numpy forward of the shared-embedding stack; only the pre-softmax projection differs.
    expected = numpy_transformer(model, inputs["encoder_token_ids"], inputs["decoder_token_ids"])
    kernel = to_numpy(model.output_projection.kernel).astype("float64")  # (d_model, vocabulary)
    np.testing.assert_allclose(logits, expected["decoder_states"] @ kernel, atol=1e-5)


def test_save_and_load_round_trips_exactly(tiny_config, tmp_path):
    model = Seq2SeqTransformer(tiny_config.replace(position_embedding="learned", max_position=16))
    inputs = make_inputs(np.random.default_rng(4), tiny_config)
    expected = to_numpy(model(inputs))
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, Seq2SeqTransformer)
    assert restored.config == model.config
    np.testing.assert_array_equal(to_numpy(restored(inputs)), expected)
    for before, after in zip(model.weights, restored.weights, strict=True):
        np.testing.assert_array_equal(to_numpy(before), to_numpy(after))


def test_attention_initializer_reaches_every_attention_and_round_trips(tiny_config):
    config = tiny_config.replace(attention_initializer="xavier_fused_qkv", attention_bias=True)
    model = Seq2SeqTransformer(config)
    model.build()
    restored = Seq2SeqTransformer.from_config(model.get_config())
    assert restored.config == config
    blocks = [*model.encoder_blocks, *model.decoder_blocks]
    attentions = [b.self_attention for b in blocks] + [
        b.cross_attention for b in model.decoder_blocks
    ]
    assert {a.get_config()["kernel_initializer"] for a in attentions} == {"xavier_fused_qkv"}
    limit = (6 / (4 * config.d_model)) ** 0.5
    for attention in attentions:
        kernel = to_numpy(attention.query_dense.kernel)
        assert np.abs(kernel).max() <= limit < 1.5 * np.abs(kernel).max()


def test_attention_weights_are_distributions_with_padding_masked(tiny_config):
    model = Seq2SeqTransformer(tiny_config)
    inputs = make_inputs(np.random.default_rng(5), tiny_config)
    inputs["encoder_token_ids"][0, 3:] = 0
    weights = model.attention_weights(inputs)
    assert len(weights["encoder_self_attention"]) == tiny_config.num_layers
    cross = to_numpy(weights["decoder_cross_attention"][0])
    assert cross.shape == (3, tiny_config.num_heads, 6, 7)
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)
    assert np.all(cross[0, :, :, 3:] == 0.0)
    decoder_self = to_numpy(weights["decoder_self_attention"][1])
    assert np.all(np.triu(decoder_self[0, 0], k=1) == 0.0)
    # Every layer's weights are softmax(Q K^T / sqrt(d_k)) of that layer's numpy inputs.
    expected = numpy_transformer(model, inputs["encoder_token_ids"], inputs["decoder_token_ids"])
    for name, layers in weights.items():
        assert len(layers) == len(expected[name])
        for layer, reference in zip(layers, expected[name], strict=True):
            np.testing.assert_allclose(to_numpy(layer), reference, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_fit_under_mixed_precision_gives_float32_logits(tiny_config, policy):
    keras.config.set_dtype_policy(policy)
    model = Seq2SeqTransformer(tiny_config)
    inputs = make_inputs(np.random.default_rng(6), tiny_config, batch=8)
    labels = inputs["decoder_token_ids"]
    logits = model(inputs)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert model.encoder_blocks[0].compute_dtype == policy.split("_")[1]
    # The same weights in float32 give the same logits up to the compute dtype's rounding:
    # unit roundoff u = 2^-8 (bfloat16 keeps 8 significant bits) or 2^-11 (float16). About a
    # dozen rounded steps (embedding, 10 residual sublayers, logits) accumulate a few u of
    # the logits' scale (measured: at most ~4u), so 10u; a wrong model is off by far more.
    reference = Seq2SeqTransformer(tiny_config, dtype="float32")
    reference(inputs)
    reference.set_weights(model.get_weights())
    expected = to_numpy(reference(inputs))
    roundoff = 2.0**-8 if policy == "mixed_bfloat16" else 2.0**-11
    tolerance = 10 * roundoff * np.abs(expected).max()
    np.testing.assert_allclose(to_numpy(logits), expected, rtol=0, atol=tolerance)
    optimizer = keras.optimizers.Adam(1e-3)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, loss=LabelSmoothedCrossEntropy())
    history = model.fit(inputs, labels, batch_size=4, epochs=4, verbose=0)
    losses = history.history["loss"]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_presets_cover_the_paper():
    expected = {"base", "big"} | {f"table3-A{i}" for i in range(1, 5)}
    expected |= {"table3-B1", "table3-B2", "table3-E"} | {f"table3-C{i}" for i in range(1, 8)}
    expected |= {f"table3-D{i}" for i in range(1, 5)}
    assert set(PRESETS) == expected
    base = PRESETS["base"].config(37000)
    assert (base.num_layers, base.d_model, base.num_heads, base.intermediate_dim) == (
        6,
        512,
        8,
        2048,
    )
    assert (base.head_key_dim, base.head_value_dim, base.dropout) == (64, 64, 0.1)
    big = PRESETS["big"].config(37000)
    assert (big.d_model, big.num_heads, big.intermediate_dim, big.dropout) == (1024, 16, 4096, 0.3)
    assert PRESETS["table3-B1"].config(100).head_key_dim == 16
    assert PRESETS["table3-B1"].config(100).head_value_dim == 64
    assert PRESETS["table3-A4"].config(100).head_key_dim == 16
    assert PRESETS["table3-E"].config(100).position_embedding == "learned"
    assert PRESETS["table3-D4"].label_smoothing == 0.2
    with pytest.raises(ValueError, match="Known presets"):
        Seq2SeqTransformer.from_architecture("huge", vocabulary_size=10)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"d_model": 30, "num_heads": 4}, r"d_model=30, num_heads=4"),
        ({"vocabulary_size": 0}, r"vocabulary_size=0"),
        ({"num_heads": -2}, r"num_heads=-2"),
        ({"dropout": 1.0}, r"dropout=1.0"),
        ({"position_embedding": "rotary"}, r"position_embedding='rotary'"),
        ({"pad_id": 99}, r"pad_id=99"),
        ({"attention_initializer": "he"}, r"attention_initializer='he'"),
    ],
)
def test_bad_config_arguments_name_argument_and_value(tiny_config, changes, message):
    with pytest.raises(ValueError, match=message):
        tiny_config.replace(**changes)


def test_bad_inputs_name_the_key_and_what_was_received(tiny_config):
    model = Seq2SeqTransformer(tiny_config)
    inputs = make_inputs(np.random.default_rng(7), tiny_config)
    with pytest.raises(ValueError, match=r"Missing: \['decoder_token_ids'\]"):
        model({"encoder_token_ids": inputs["encoder_token_ids"]})
    with pytest.raises(ValueError, match=r"unexpected: \['labels'\]"):
        model({**inputs, "labels": inputs["decoder_token_ids"]})
    with pytest.raises(TypeError, match=r"`decoder_token_ids` must hold integer.*float32"):
        model({**inputs, "decoder_token_ids": inputs["decoder_token_ids"].astype("float32")})
    with pytest.raises(TypeError, match="dict"):
        model(inputs["encoder_token_ids"])
    with pytest.raises(
        ValueError, match=r"TransformerConfig has no field 'layers' \(did you mean num_layers\?\)"
    ):
        Seq2SeqTransformer({"vocabulary_size": 10, "layers": 2})


def test_decode_compiles_with_a_tensor_index(tiny_config):
    """One compiled decode step serves every position: the index is a traced scalar."""
    model = Seq2SeqTransformer(tiny_config.replace(position_embedding="learned", max_position=8))
    inputs = make_inputs(np.random.default_rng(8), tiny_config)
    full = to_numpy(model(inputs))
    if keras.backend.backend() == "jax":
        import jax

        compiled = jax.jit(model.decode)
    elif keras.backend.backend() == "torch":
        compiled = model.decode  # decoding runs eagerly on torch; the index is still a tensor
    else:
        import tensorflow as tf

        compiled = tf.function(model.decode, jit_compile=False, reduce_retracing=True)
    source = inputs["encoder_token_ids"]
    cache = model.initialize_cache(model.encode(source), source, max_length=6)
    for t in range(6):
        index = keras.ops.convert_to_tensor(t, "int32")
        logits, cache = compiled(inputs["decoder_token_ids"][:, t : t + 1], cache, index)
        np.testing.assert_allclose(to_numpy(logits)[:, 0], full[:, t], atol=1e-5)
