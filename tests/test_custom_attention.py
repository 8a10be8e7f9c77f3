"""A decoder self-attention defined outside the package, plugged in by the cache contract.

`RelativeBiasSelfAttention` adds a learned bias per head and clipped query-key distance
(Shaw et al., 2018; T5 buckets distances likewise) to the attention scores. It keeps the
contract of `keras_transformer.layers.CachedAttention` and nothing else of the package's
attention: cached searches must then equal searches that recompute the whole decoder at every
step, and a SavedModel export must serve what `Translator` returns.
"""

import math

import keras
import numpy as np
import pytest
from conftest import small_config, to_numpy
from keras import ops

from keras_transformer import Seq2SeqTransformer, backend
from keras_transformer.decoding import build_beam_search, build_greedy_search
from keras_transformer.layers import CachedAttention

PAD, BOS, EOS = 0, 2, 3
MAX_DISTANCE = 3


@keras.saving.register_keras_serializable(package="test_custom_attention")
class RelativeBiasSelfAttention(CachedAttention):
    """Causal multi-head self-attention with a learned bias per head and distance.

    `scores[h, i, j] = q_i . k_j / sqrt(d_k) + bias[h, min(i - j, MAX_DISTANCE)]`.
    Takes the constructor arguments `TransformerDecoderBlock` passes to its self-attention.
    """

    def __init__(self, num_heads, key_dim, value_dim=None, **kwargs):
        for name in ("dropout", "use_bias", "kernel_initializer", "bias_initializer"):
            kwargs.pop(name, None)  # the paper's values here: no dropout, no biases
        super().__init__(**kwargs)
        self.num_heads, self.key_dim = num_heads, key_dim
        self.value_dim = value_dim or key_dim

    def build(self, query_shape, key_value_shape=None):
        d_model, h = query_shape[-1], self.num_heads
        widths = {"query": self.key_dim, "key": self.key_dim, "value": self.value_dim}
        self.kernels = {
            name: self.add_weight(shape=(d_model, h * width), name=name)
            for name, width in widths.items()
        }
        self.output_kernel = self.add_weight(shape=(h * self.value_dim, d_model), name="output")
        # Large enough to change which token wins, so a misplaced bias cannot go unnoticed.
        self.distance_bias = self.add_weight(
            shape=(h, MAX_DISTANCE + 1),
            initializer=keras.initializers.RandomNormal(stddev=2.0),
            name="distance_bias",
        )

    def initial_cache(self, rows, max_length):
        return tuple(
            ops.zeros((rows, self.num_heads, max_length, width), self.compute_dtype)
            for width in (self.key_dim, self.value_dim)
        )

    def _heads(self, sequence, name):
        projected = ops.matmul(sequence, self.kernels[name])  # (batch, length, h * width)
        batch, length = ops.shape(sequence)[0], ops.shape(sequence)[1]
        return ops.transpose(
            ops.reshape(projected, (batch, length, self.num_heads, -1)), (0, 2, 1, 3)
        )

    def call(
        self,
        query,
        key_value=None,
        attention_mask=None,
        use_causal_mask=False,
        cache=None,
        cache_index=None,
        return_attention_scores=False,
        training=None,
    ):
        if key_value is not None or attention_mask is not None or not use_causal_mask:
            raise ValueError("RelativeBiasSelfAttention is causal self-attention only.")
        query_heads, key_heads, value_heads = (self._heads(query, n) for n in self.kernels)
        offset = 0
        if cache is not None:
            key_heads = backend.update_cache(cache[0], key_heads, cache_index)
            value_heads = backend.update_cache(cache[1], value_heads, cache_index)
            offset = cache_index
        query_positions = ops.arange(ops.shape(query_heads)[2], dtype="int32") + offset
        distance = query_positions[:, None] - ops.arange(ops.shape(key_heads)[2], dtype="int32")
        bias = ops.take(self.distance_bias, ops.clip(distance, 0, MAX_DISTANCE), axis=1)
        scores = ops.einsum("bhqd,bhkd->bhqk", query_heads, key_heads) / math.sqrt(self.key_dim)
        scores = ops.where(distance[None, None] >= 0, scores + bias[None], -1.0e9)
        weights = ops.softmax(scores, axis=-1)
        context = ops.transpose(ops.matmul(weights, value_heads), (0, 2, 1, 3))
        batch, length = ops.shape(context)[0], ops.shape(context)[1]
        outputs = ops.matmul(ops.reshape(context, (batch, length, -1)), self.output_kernel)
        results = (outputs,)
        if cache is not None:
            results += ((key_heads, value_heads),)
        if return_attention_scores:
            results += (weights,)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim)
        return config


def relative_bias_model(vocabulary_size, seed):
    keras.utils.set_random_seed(seed)
    model = Seq2SeqTransformer(
        small_config(vocabulary_size),
        decoder_self_attention=RelativeBiasSelfAttention,
    )
    model.build()
    return model


@pytest.fixture(scope="module")
def model():
    return relative_bias_model(13, seed=5)


@pytest.fixture(scope="module")
def sources():
    rng = np.random.default_rng(1)
    ids = rng.integers(4, 13, size=(4, 6)).astype("int32")
    ids[1, 3:] = PAD
    ids[2, 5:] = PAD
    return ids


def test_the_custom_layer_is_the_decoders_self_attention_and_its_bias_counts(model, sources):
    for block in model.decoder_blocks:
        assert type(block.self_attention) is RelativeBiasSelfAttention
    assert type(model.decoder_blocks[0].cross_attention).__name__ == "MultiHeadAttention"
    targets = np.random.default_rng(2).integers(4, 13, size=sources.shape).astype("int32")
    inputs = {"encoder_token_ids": sources, "decoder_token_ids": targets}
    with_bias = to_numpy(model(inputs))
    bias = model.decoder_blocks[0].self_attention.distance_bias
    saved = to_numpy(bias)
    bias.assign(np.zeros_like(saved))
    try:
        without_bias = to_numpy(model(inputs))
    finally:
        bias.assign(saved)
    assert np.abs(with_bias - without_bias).max() > 0.05


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_cached_decoding_equals_recomputing_the_decoder_every_step(model, sources, search):
    # Cached: one decoder step at a time through the layer's cache (growing on TensorFlow and
    # torch, a fixed buffer filled in two stages on JAX). Uncached: the whole decoder over the
    # tokens so far at every step, the layer's plain call, no cache.
    if search == "greedy":
        build, kwargs = build_greedy_search, {}
    else:
        build, kwargs = build_beam_search, {"beam_size": 3, "num_results": 2}
    (cached_tokens, cached_scores), (plain_tokens, plain_scores) = (
        build(model, bos_id=BOS, eos_id=EOS, max_extra_length=12, use_cache=use, **kwargs)(sources)
        for use in (True, False)
    )
    cached_tokens, plain_tokens = to_numpy(cached_tokens), to_numpy(plain_tokens)
    np.testing.assert_array_equal(cached_tokens, plain_tokens)
    np.testing.assert_allclose(to_numpy(cached_scores), to_numpy(plain_scores), atol=1e-4)
    lengths = (cached_tokens != PAD).sum(axis=-1)
    assert lengths.max() > MAX_DISTANCE + 1  # the bias's clipped distances are reached


def test_the_model_config_names_the_custom_layer(model):
    config = model.get_config()
    assert config["decoder_self_attention"] == "test_custom_attention>RelativeBiasSelfAttention"
    rebuilt = Seq2SeqTransformer.from_config(config)
    rebuilt.build()
    assert type(rebuilt.decoder_blocks[0].self_attention) is RelativeBiasSelfAttention


def test_saved_model_export_serves_what_translator_returns(tmp_path):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the SavedModel is exported from a TensorFlow model here")
    import tensorflow as tf

    from keras_transformer.decoding import Translator
    from keras_transformer.export import export_saved_model
    from keras_transformer.synthetic import generate_synthetic_pairs
    from keras_transformer.text import train_vocabulary

    english, german = generate_synthetic_pairs(200, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=120)
    model = relative_bias_model(120, seed=3)
    decoding = {"beam_size": 3, "alpha": 0.6, "max_extra_length": 6}
    sentences = [english[0], "", english[1][:12], english[2], english[3][:5]]
    translations, scores = Translator(model, tokenizer, **decoding).translate(
        sentences, return_scores=True
    )
    path = export_saved_model(model, tokenizer, tmp_path / "translator" / "1", **decoding)
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    outputs = served(sentences=tf.constant(sentences))
    assert [t.decode("utf-8") for t in outputs["translations"].numpy()] == translations
    np.testing.assert_allclose(outputs["scores"].numpy(), scores, atol=1e-4)
    assert len(set(translations) - {""}) >= 2  # the sentences do not all translate alike
