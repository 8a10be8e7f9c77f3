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
