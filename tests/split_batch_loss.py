"""Source of a loss class for the distributed tests' subprocess scripts.

`TokenMeanPerHalf` is what a loss normalized per replica gives when a global batch of 4
splits 2 + 2 over two replicas (devices or workers): the token mean of rows 0-1 and of
rows 2-3, averaged. The tests train with it as a control that must land elsewhere than
the correct global token mean, so their equality checks can fail.
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
            means = [keras.ops.sum(losses[rows] * mask[rows]) / keras.ops.sum(mask[rows])
                     for rows in (slice(0, 2), slice(2, 4))]
            return (means[0] + means[1]) / 2
    """
)
