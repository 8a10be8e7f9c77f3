"""Source of a loss class for the distributed tests' subprocess scripts.

`TokenMeanPerHalf` is what a loss normalized per replica gives when a global batch splits
in two halves over two replicas (devices, workers or processes): the token mean of the
first half of the rows and of the second, averaged (an all-padding half counts as 0). The
tests train with it as a control that must land elsewhere than the correct global token
mean, so their equality checks can fail.
"""

import textwrap

TOKEN_MEAN_PER_HALF = textwrap.dedent(
    """
    import keras
    from keras_transformer import LabelSmoothedCrossEntropy

    class TokenMeanPerHalf(LabelSmoothedCrossEntropy):
        def __call__(self, y_true, y_pred, sample_weight=None):
            losses = self.call(y_true, y_pred)
            mask = keras.ops.cast(keras.ops.not_equal(y_true, 0), "float32")
            half = keras.ops.shape(y_true)[0] // 2
            means = [keras.ops.sum(losses[rows] * mask[rows])
                     / keras.ops.maximum(keras.ops.sum(mask[rows]), 1.0)
                     for rows in (slice(0, half), slice(half, None))]
            return (means[0] + means[1]) / 2
    """
)
