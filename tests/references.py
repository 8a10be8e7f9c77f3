"""Independent numpy implementations of the paper's equations, read from layer weights."""

import numpy as np
from conftest import to_numpy


def weights64(layer):
    return [to_numpy(w).astype(np.float64) for w in layer.weights]


def numpy_attention(layer, query, key_value, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V per head, then W^O, from the layer's weights."""

    def project(dense, x, equation="btd,dhk->bthk"):
        kernel, *bias = weights64(dense)
        return np.einsum(equation, x, kernel) + (bias[0] if bias else 0.0)

    q = project(layer.query_dense, query)
    k = project(layer.key_dense, key_value)
    v = project(layer.value_dense, key_value)
    scores = np.einsum("bqhk,bthk->bhqt", q, k) / np.sqrt(layer.key_dim)
    if mask is not None:
        scores = np.where(mask[:, None], scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    context = np.einsum("bhqt,bthv->bqhv", weights, v)
    return project(layer.output_dense, context, "bqhv,hvd->bqd"), weights


def layer_norm(x, layer):
    gamma, beta = weights64(layer)
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + layer.epsilon) * gamma + beta


def feed_forward(x, layer):
    w1, b1 = weights64(layer.inner_dense)
    w2, b2 = weights64(layer.output_dense)
    return np.maximum(0.0, x @ w1 + b1) @ w2 + b2


def sinusoid_encoding(length, d_model, max_wavelength=10000.0):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) (3.5)."""
    dims = np.arange(d_model)
    angles = np.arange(length)[:, None] / max_wavelength ** ((dims - dims % 2) / d_model)
    return np.where(dims % 2 == 0, np.sin(angles), np.cos(angles))  # interleaved sin, cos


def numpy_transformer(model, encoder_token_ids, decoder_token_ids):
    """The paper's post-LN encoder-decoder (3.1-3.5) from the weights of a `Seq2SeqTransformer`.

    Shared embedding matrix E: inputs are E[ids] * sqrt(d_model) + PE, logits are h E^T.
    Returns a dict with the encoder outputs, the decoder states, the logits and every
    layer's attention weights (as `Seq2SeqTransformer.attention_weights` names them).
    """
    config = model.config
    (embeddings,) = weights64(model.target_embedding)

    def embed(ids):
        scaled = embeddings[ids] * np.sqrt(config.d_model)
        return scaled + sinusoid_encoding(ids.shape[1], config.d_model)

    def residual(x, sublayer_output, norm):
        return layer_norm(x + sublayer_output, norm)  # LN(x + Sublayer(x))

    source_mask = (encoder_token_ids != config.pad_id)[:, None, :]  # (batch, 1, source_length)
    causal = np.tril(np.ones((decoder_token_ids.shape[1],) * 2, bool))[None]
    result = {name: [] for name in ("encoder_self_attention", "decoder_self_attention")}
    result["decoder_cross_attention"] = []
    x = embed(encoder_token_ids)
    for block in model.encoder_blocks:
        attended, weights = numpy_attention(block.self_attention, x, x, source_mask)
        result["encoder_self_attention"].append(weights)
        x = residual(x, attended, block.self_attention_norm)
        x = residual(x, feed_forward(x, block.feed_forward), block.feed_forward_norm)
    y = embed(decoder_token_ids)
    for block in model.decoder_blocks:
        attended, weights = numpy_attention(block.self_attention, y, y, causal)
        result["decoder_self_attention"].append(weights)
        y = residual(y, attended, block.self_attention_norm)
        attended, weights = numpy_attention(block.cross_attention, y, x, source_mask)
        result["decoder_cross_attention"].append(weights)
        y = residual(y, attended, block.cross_attention_norm)
        y = residual(y, feed_forward(y, block.feed_forward), block.feed_forward_norm)
    result.update(encoder_outputs=x, decoder_states=y, logits=y @ embeddings.T)
    return result
