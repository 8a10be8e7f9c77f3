import keras
import numpy as np
import pytest
from conftest import to_numpy

from keras_transformer.training import LabelSmoothedCrossEntropy


def numpy_reference(labels, logits, eps, pad_id=0):
    """Cross-entropy against explicit smoothed one-hot targets, mean over real tokens."""
    vocab = logits.shape[-1]
    logits = logits.astype(np.float64)
    log_probs = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1))[..., None]
        - logits.max(-1, keepdims=True)
    )
    targets = np.full(logits.shape, eps / vocab)
    np.put_along_axis(targets, labels[..., None], 1.0 - eps + eps / vocab, axis=-1)
    per_token = -(targets * log_probs).sum(-1)
    mask = labels != pad_id
    return (per_token * mask).sum() / mask.sum(), per_token, targets


def make_batch(rng, batch=3, length=6, vocab=11):
    labels = rng.integers(1, vocab, size=(batch, length))
    labels[0, 4:] = 0
    labels[2, 1:] = 0
    logits = rng.normal(size=(batch, length, vocab)).astype("float32") * 3
    return labels, logits


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_loss_matches_numpy_reference(eps):
    labels, logits = make_batch(np.random.default_rng(0))
    expected, _, _ = numpy_reference(labels, logits, eps)
    loss = LabelSmoothedCrossEntropy(label_smoothing=eps)(labels, logits)
    assert float(to_numpy(loss)) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("reduction", ["mean_with_sample_weight", "sum"])
def test_a_nonzero_pad_id_is_the_one_masked(reduction):
    labels, logits = make_batch(np.random.default_rng(5))
    labels[labels == 3] = 4
    labels[labels == 0] = 3  # padding is 3 now
    labels[1, :2] = 0  # and 0 a real token
    expected, per_token, _ = numpy_reference(labels, logits, 0.1, pad_id=3)
    if reduction == "sum":
        expected = (per_token * (labels != 3)).sum()
    loss = LabelSmoothedCrossEntropy(0.1, pad_id=3, reduction=reduction)(labels, logits)
    assert float(to_numpy(loss)) == pytest.approx(expected, rel=1e-5)


def test_padding_length_does_not_change_loss():
    rng = np.random.default_rng(1)
    labels, logits = make_batch(rng)
    loss = LabelSmoothedCrossEntropy()
    base = float(to_numpy(loss(labels, logits)))
    for extra in (1, 9):
        padded_labels = np.pad(labels, ((0, 0), (0, extra)))
        padded_logits = np.concatenate(
            [logits, rng.normal(size=(3, extra, 11)).astype("float32") * 50], axis=1
        )
        assert float(to_numpy(loss(padded_labels, padded_logits))) == pytest.approx(base, rel=1e-6)


def test_sum_and_none_reductions_and_sequence_weights():
    labels, logits = make_batch(np.random.default_rng(2))
    _, per_token, _ = numpy_reference(labels, logits, 0.1)
    mask = labels != 0
    total = LabelSmoothedCrossEntropy(reduction="sum")(labels, logits)
    assert float(to_numpy(total)) == pytest.approx((per_token * mask).sum(), rel=1e-5)
    none = to_numpy(LabelSmoothedCrossEntropy(reduction="none")(labels, logits))
    np.testing.assert_allclose(none, per_token * mask, rtol=1e-5, atol=1e-6)
    weights = np.array([1.0, 0.0, 2.0], "float32")
    weighted = LabelSmoothedCrossEntropy()(labels, logits, sample_weight=weights)
    token_weights = mask * weights[:, None]
    expected = (per_token * token_weights).sum() / token_weights.sum()
    assert float(to_numpy(weighted)) == pytest.approx(expected, rel=1e-5)


def test_subtract_minimum_scores_a_perfect_prediction_zero():
    eps, vocab = 0.1, 11
    labels = np.array([[3, 5, 0]])
    # A model that outputs exactly the smoothed target distribution.
    targets = np.full((1, 3, vocab), eps / vocab)
    np.put_along_axis(targets, labels[..., None], 1 - eps + eps / vocab, axis=-1)
    logits = np.log(targets).astype("float32")
    plain = float(to_numpy(LabelSmoothedCrossEntropy(eps)(labels, logits)))
    shifted = float(to_numpy(LabelSmoothedCrossEntropy(eps, subtract_minimum=True)(labels, logits)))
    entropy = -(targets[0, 0] * np.log(targets[0, 0])).sum()
    assert plain == pytest.approx(entropy, rel=1e-5)
    assert shifted == pytest.approx(0.0, abs=1e-5)


def test_probabilities_input_agrees_with_logits():
    labels, logits = make_batch(np.random.default_rng(3))
    probabilities = to_numpy(keras.ops.softmax(logits, axis=-1))
    from_logits = LabelSmoothedCrossEntropy()(labels, logits)
    from_probs = LabelSmoothedCrossEntropy(from_logits=False)(labels, probabilities)
    assert float(to_numpy(from_probs)) == pytest.approx(float(to_numpy(from_logits)), rel=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_loss_is_float32_for_low_precision_logits(dtype):
    labels, logits = make_batch(np.random.default_rng(4))
    low = keras.ops.cast(logits, dtype)
    loss = LabelSmoothedCrossEntropy()(labels, low)
    assert keras.backend.standardize_dtype(loss.dtype) == "float32"
    expected, _, _ = numpy_reference(labels, to_numpy(keras.ops.cast(low, "float32")), 0.1)
    assert float(to_numpy(loss)) == pytest.approx(expected, rel=1e-5)


def test_loss_round_trips_config_and_rejects_bad_arguments():
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.2, pad_id=3, subtract_minimum=True)
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert restored.get_config() == loss.get_config()
    with pytest.raises(ValueError, match="label_smoothing"):
        LabelSmoothedCrossEntropy(label_smoothing=1.5)
    with pytest.raises(ValueError, match="reduction"):
        LabelSmoothedCrossEntropy(reduction="mean")


def loss_and_gradient(loss_fn, labels, logits, jit):
    """The loss and its gradient in the logits, through the backend's autodiff."""
    if keras.backend.backend() == "jax":
        import jax

        value_and_grad = jax.value_and_grad(lambda z: loss_fn(labels, z))
        loss, grad = (jax.jit(value_and_grad) if jit else value_and_grad)(logits)
        return float(loss), np.asarray(grad)
    if keras.backend.backend() == "torch":  # eager: `jit` has no torch counterpart here
        import torch

        z = torch.tensor(logits, requires_grad=True)
        loss = loss_fn(labels, z)
        (grad,) = torch.autograd.grad(loss, [z])
        return float(loss), grad.numpy()
    import tensorflow as tf

    def value_and_grad(z):
        with tf.GradientTape() as tape:
            tape.watch(z)
            loss = loss_fn(labels, z)
        return loss, tape.gradient(loss, z)

    loss, grad = (tf.function(value_and_grad) if jit else value_and_grad)(tf.constant(logits))
    return float(loss), grad.numpy()


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_gradient_is_softmax_minus_smoothed_targets(eps, jit):
    labels, logits = make_batch(np.random.default_rng(3))
    expected_loss, _, targets = numpy_reference(labels, logits, eps)
    logits64 = logits.astype(np.float64)
    probabilities = np.exp(logits64 - logits64.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    mask = (labels != 0)[..., None]
    expected = (probabilities - targets) * mask / mask.sum()  # mean over real tokens
    loss, grad = loss_and_gradient(LabelSmoothedCrossEntropy(eps), labels, logits, jit)
    assert loss == pytest.approx(expected_loss, rel=1e-5)
    np.testing.assert_allclose(grad, expected, atol=1e-7)
    assert np.all(grad[labels == 0] == 0.0)  # padding gets no gradient


def test_gradient_with_sample_weights_and_sum_reduction():
    labels, logits = make_batch(np.random.default_rng(4))
    weights = np.array([2.0, 0.5, 1.0], dtype="float32")
    _, _, targets = numpy_reference(labels, logits, 0.1)
    logits64 = logits.astype(np.float64)
    probabilities = np.exp(logits64) / np.exp(logits64).sum(-1, keepdims=True)
    mask = (labels != 0)[..., None] * weights[:, None, None]
    loss_fn = LabelSmoothedCrossEntropy(0.1, reduction="sum")
    _, grad = loss_and_gradient(
        lambda y, z: loss_fn(y, z, sample_weight=weights), labels, logits, jit=False
    )
    np.testing.assert_allclose(grad, (probabilities - targets) * mask, atol=1e-6)
