import keras
import numpy as np
import pytest
from conftest import to_numpy
from references import feed_forward, layer_norm, numpy_attention

from keras_transformer.layers import (
    FeedForward,
    TokenEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)

BLOCK_ARGS = {"num_heads": 2, "key_dim": 4, "intermediate_dim": 16, "dropout": 0.0}


def numpy_encoder_block(block, x, mask, normalize_first):
    attention_mask = np.broadcast_to(mask[:, None, :], (x.shape[0], x.shape[1], x.shape[1]))

    def sublayer(x, function, norm):
        if normalize_first:  # x + Sublayer(LN(x))
            return x + function(layer_norm(x, norm))
        return layer_norm(x + function(x), norm)  # LN(x + Sublayer(x)), paper 3.1

    x = sublayer(
        x,
        lambda h: numpy_attention(block.self_attention, h, h, attention_mask)[0],
        block.self_attention_norm,
    )
    return sublayer(x, lambda h: feed_forward(h, block.feed_forward), block.feed_forward_norm)


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_encoder_block_matches_numpy_reference(normalize_first):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    mask = np.ones((2, 5), bool)
    mask[0, 3:] = False
    block = TransformerEncoderBlock(**BLOCK_ARGS, normalize_first=normalize_first)
    output = to_numpy(block(x, padding_mask=mask))
    expected = numpy_encoder_block(block, x.astype(np.float64), mask, normalize_first)
    np.testing.assert_allclose(output, expected, atol=2e-5)


def test_decoder_block_matches_numpy_reference():
    rng = np.random.default_rng(1)
    y = rng.normal(size=(2, 4, 8))
    memory = rng.normal(size=(2, 6, 8))
    mask = np.ones((2, 6), bool)
    mask[1, 2:] = False
    block = TransformerDecoderBlock(**BLOCK_ARGS)
    output = to_numpy(
        block(y.astype("float32"), memory.astype("float32"), encoder_padding_mask=mask)
    )

    causal = np.broadcast_to(np.tril(np.ones((4, 4), bool)), (2, 4, 4))
    cross = np.broadcast_to(mask[:, None, :], (2, 4, 6))
    h = layer_norm(
        y + numpy_attention(block.self_attention, y, y, causal)[0], block.self_attention_norm
    )
    h = layer_norm(
        h + numpy_attention(block.cross_attention, h, memory, cross)[0], block.cross_attention_norm
    )
    expected = layer_norm(h + feed_forward(h, block.feed_forward), block.feed_forward_norm)
    np.testing.assert_allclose(output, expected, atol=2e-5)


def test_residual_dropout_is_active_only_in_training():
    x = np.random.default_rng(2).normal(size=(2, 5, 8)).astype("float32")
    block = TransformerEncoderBlock(**{**BLOCK_ARGS, "dropout": 0.3})
    inference = to_numpy(block(x))
    np.testing.assert_allclose(to_numpy(block(x, training=False)), inference)
    assert not np.allclose(to_numpy(block(x, training=True)), inference)


def test_token_embedding_scales_and_ties():
    embedding = TokenEmbedding(vocabulary_size=10, embedding_dim=16)
    ids = np.array([[1, 4, 0]])
    vectors = to_numpy(embedding(ids))
    table = to_numpy(embedding.embeddings)
    np.testing.assert_allclose(vectors[0], table[[1, 4, 0]] * 4.0, rtol=1e-6)
    states = np.random.default_rng(3).normal(size=(1, 3, 16)).astype("float32")
    logits = embedding(states, reverse=True)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    np.testing.assert_allclose(to_numpy(logits), states @ table.T, rtol=1e-5, atol=1e-5)
    with embedding.fixed_output_matrix():
        fixed = embedding(states, reverse=True)
    assert keras.backend.standardize_dtype(fixed.dtype) == "float32"
    np.testing.assert_allclose(to_numpy(fixed), states @ table.T, rtol=1e-5, atol=1e-5)
    # Outside the context the logits follow the weights again.
    embedding.embeddings.assign(2.0 * table)
    np.testing.assert_allclose(
        to_numpy(embedding(states, reverse=True)), states @ (2.0 * table).T, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    "layer, inputs",
    [
        (TransformerEncoderBlock(**BLOCK_ARGS, value_dim=3), ((2, 5, 8),)),
        (TransformerDecoderBlock(**BLOCK_ARGS, normalize_first=True), ((2, 4, 8), (2, 6, 8))),
        (FeedForward(intermediate_dim=12, activation_dropout=0.2), ((2, 5, 8),)),
        (TokenEmbedding(vocabulary_size=10, embedding_dim=8), None),
    ],
    ids=["encoder", "decoder", "feed_forward", "token_embedding"],
)
def test_layers_round_trip_through_config_and_saving(layer, inputs, tmp_path):
    rng = np.random.default_rng(4)
    if inputs is None:
        args = (np.array([[1, 2, 3]], "int32"),)
    else:
        args = tuple(rng.normal(size=shape).astype("float32") for shape in inputs)
    expected = to_numpy(layer(*args))
    clone = layer.__class__.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()

    # Through a .keras file, weights included.
    symbolic = [keras.Input(batch_shape=a.shape, dtype=str(a.dtype)) for a in args]
    model = keras.Model(symbolic, layer(*symbolic))
    path = tmp_path / "layer.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(to_numpy(restored(list(args))), expected, atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_blocks_compute_in_the_policys_dtype_what_float32_blocks_compute(policy):
    # Training under both policies is tested on the whole model, these blocks included
    # (test_model.py's `test_fit_under_mixed_precision_gives_float32_logits`).
    keras.config.set_dtype_policy(policy)
    # Relative to the output's scale: about 8 roundings to the compute dtype across the
    # five sublayers, of unit roundoff 2**-11 (float16) or 2**-8 (bfloat16).
    tolerance = 8 * {"mixed_float16": 2**-11, "mixed_bfloat16": 2**-8}[policy]
    rng = np.random.default_rng(5)
    x = [rng.normal(size=(8, 6, 8)).astype("float32"), rng.normal(size=(8, 4, 8)).astype("float32")]
    encoder = TransformerEncoderBlock(**BLOCK_ARGS)
    decoder = TransformerDecoderBlock(**BLOCK_ARGS)

    # The same weights in float32 blocks: mixed precision only rounds, it computes the same.
    encoder32 = TransformerEncoderBlock(**BLOCK_ARGS, dtype="float32")
    decoder32 = TransformerDecoderBlock(**BLOCK_ARGS, dtype="float32")
    encoded32 = encoder32(x[0])
    expected = to_numpy(decoder32(x[1], encoded32))
    decoder(x[1], encoder(x[0]))  # both built, so that the float32 blocks' weights can be set
    encoder.set_weights(encoder32.get_weights())
    decoder.set_weights(decoder32.get_weights())
    encoded = encoder(x[0])
    assert keras.backend.standardize_dtype(encoded.dtype) == policy.split("_")[1]
    decoded = decoder(x[1], encoded)
    assert keras.backend.standardize_dtype(decoded.dtype) == policy.split("_")[1]
    for mixed, float32 in ((encoded, to_numpy(encoded32)), (decoded, expected)):
        mixed = to_numpy(keras.ops.cast(mixed, "float32"))
        np.testing.assert_allclose(mixed, float32, atol=tolerance * np.abs(float32).max())
