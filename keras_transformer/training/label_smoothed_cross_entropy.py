"""Label-smoothed cross-entropy over sparse targets with padding excluded (paper 5.4)."""

import math

import keras
from keras import ops

from keras_transformer import backend


def smoothed_target_entropy(label_smoothing, vocabulary_size):
    """Entropy of the smoothed target distribution: the loss of a perfect prediction."""
    eps, k = float(label_smoothing), int(vocabulary_size)
    on_value = 1.0 - eps + eps / k
    entropy = -on_value * math.log(on_value)
    if eps > 0:
        entropy -= (k - 1) * (eps / k) * math.log(eps / k)
    return entropy


def _smoothed_cross_entropy_from_logits(logits, labels, label_smoothing):
    """Per-token `lse(z) - (1 - eps) z_y - eps mean(z)`, with a one-pass gradient.

    The gradient of this loss in the logits is `softmax(z) - q`, `q` the smoothed
    target distribution. Left to autodiff, the three terms give three (batch,
    length, vocab) gradients added together, and the one of `z_y` is a scatter
    into a dense zero tensor; where `keras_transformer.backend` picks
    `loss_gradient` (TensorFlow on a CPU) it is one fused expression instead.

    Args:
        logits: float32 (batch, length, vocab).
        labels: int32 (batch, length).
        label_smoothing: float. `eps`.

    Returns:
        float32 (batch, length) losses.
    """
    eps = float(label_smoothing)
    vocabulary_size = logits.shape[-1] or ops.shape(logits)[-1]

    def losses_and_log_normalizer(z):
        log_normalizer = ops.logsumexp(z, axis=-1)  # (batch, length)
        target = ops.take_along_axis(z, labels[..., None], axis=-1)[..., 0]  # (batch, length)
        losses = log_normalizer - (1.0 - eps) * target
        if eps > 0:
            losses = losses - eps * ops.mean(z, axis=-1)
        return losses, log_normalizer

    if not backend.fast_forms().loss_gradient:
        return losses_and_log_normalizer(logits)[0]

    @ops.custom_gradient
    def smoothed_cross_entropy(z):
        losses, log_normalizer = losses_and_log_normalizer(z)

        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            probabilities = ops.exp(z - log_normalizer[..., None])  # softmax(z)
            targets = (1.0 - eps) * ops.one_hot(labels, vocabulary_size, dtype=z.dtype)
            return upstream[..., None] * (probabilities - targets - eps / vocabulary_size)

        return losses, grad

    return smoothed_cross_entropy(logits)


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy against `(1 - eps) * one_hot(y) + eps / K` (Szegedy et al., 2016).

    Paper 5.4: "During training, we employed label smoothing of value
    eps_ls = 0.1". The smoothing mass is spread uniformly over all `K`
    classes, as in Szegedy et al. (2016), which the paper cites for it. Per token,
    `loss = (1 - eps) * (lse(z) - z_y) + eps * (lse(z) - mean(z))`, computed
    from the logits `z` directly, so no smoothed targets are built in the
    forward pass; the gradient is `softmax(z) - q` (`q` the smoothed targets),
    computed in one expression. The loss is computed in float32 whatever the
    dtype of the logits.

    Padding targets (`pad_id`) are excluded from the numerator and from the
    denominator: the default reduction is the mean over real target tokens
    (times any `sample_weight`). `reduction="sum"` gives the sum over real
    tokens, `reduction="none"` per-token losses with padding set to 0.

    Under a `tf.distribute` strategy (MirroredStrategy, multi-worker) the
    mean is over the real tokens of the *global* batch: each replica divides
    its sum by the token count all-reduced over replicas, so the summed
    gradients are those of one device on the whole batch, even when
    replicas hold different numbers of tokens (a per-replica mean would
    weight each replica's tokens by the inverse of its own count). With
    `keras.distribution` on JAX the loss already sees the global batch.

    Args:
        label_smoothing: float. `eps_ls` (paper: 0.1).
        pad_id: int. Target id ignored by the loss.
        from_logits: bool. `y_pred` are logits (default) or probabilities.
        subtract_minimum: bool. Subtract the entropy of the smoothed targets,
            so a perfect prediction scores 0 (the loss becomes a KL
            divergence; gradients are unchanged).
        reduction: `"mean_with_sample_weight"` (default: mean over real
            tokens), `"sum"`, or `"none"`.
        name: str. Name of the loss.

    Call arguments:
        y_true: int (batch, length) target ids.
        y_pred: (batch, length, vocabulary_size) logits or probabilities.
        sample_weight: optional (batch,) or (batch, length) weights.

    Example:

    >>> loss = LabelSmoothedCrossEntropy(label_smoothing=0.1)
    >>> model.compile(optimizer="adam", loss=loss)
    """

    def __init__(
        self,
        label_smoothing=0.1,
        pad_id=0,
        from_logits=True,
        subtract_minimum=False,
        reduction="mean_with_sample_weight",
        name="label_smoothed_cross_entropy",
        dtype=None,
    ):
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "`label_smoothing` must be in [0, 1). "
                f"Received: label_smoothing={label_smoothing!r}"
            )
        allowed = ("mean_with_sample_weight", "sum", "none", None)
        if reduction not in allowed:
            raise ValueError(f"`reduction` must be one of {allowed}. Received: {reduction!r}")
        super().__init__(name=name, reduction=reduction, dtype=dtype or "float32")
        self.label_smoothing = float(label_smoothing)
        self.pad_id = pad_id
        self.from_logits = from_logits
        self.subtract_minimum = subtract_minimum

    def __call__(self, y_true, y_pred, sample_weight=None):
        # The token mask becomes the sample weight, so Keras' own
        # "mean_with_sample_weight" reduction divides by the number of real tokens.
        weights = ops.cast(ops.not_equal(ops.convert_to_tensor(y_true), self.pad_id), "float32")
        if sample_weight is not None:
            sample_weight = ops.cast(ops.convert_to_tensor(sample_weight), "float32")
            if len(sample_weight.shape) == 1:
                sample_weight = sample_weight[:, None]  # one weight per sequence
            weights = weights * sample_weight
        replicas = backend.replica_context()
        if replicas is not None and self.reduction == "mean_with_sample_weight":
            total = ops.sum(self.call(y_true, y_pred) * weights)
            global_count = replicas.all_reduce("sum", ops.sum(weights))
            return total / ops.maximum(global_count, 1.0)
        return super().__call__(y_true, y_pred, sample_weight=weights)

    def call(self, y_true, y_pred):
        labels = ops.cast(y_true, "int32")  # (batch, length)
        scores = ops.cast(y_pred, "float32")  # (batch, length, vocab)
        if not self.from_logits:
            # log(p) are logits whose log-normalizer is log(sum p), 0 for normalized p.
            scores = ops.log(ops.clip(scores, 1e-12, 1.0))
        losses = _smoothed_cross_entropy_from_logits(scores, labels, self.label_smoothing)
        if self.subtract_minimum:
            losses = losses - smoothed_target_entropy(self.label_smoothing, scores.shape[-1])
        return ops.where(ops.not_equal(labels, self.pad_id), losses, 0.0)

    def get_config(self):
        return {
            "name": self.name,
            "reduction": self.reduction,
            "label_smoothing": self.label_smoothing,
            "pad_id": self.pad_id,
            "from_logits": self.from_logits,
            "subtract_minimum": self.subtract_minimum,
        }
