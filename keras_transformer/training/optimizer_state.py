"""What training callbacks read from an optimizer, `LossScaleOptimizer` or not."""

import keras
from keras import ops

from keras_transformer import compat


def inner_optimizer(optimizer):
    """The optimizer that holds the schedule and counters (unwraps loss scaling)."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.inner_optimizer
    return optimizer


def accumulation_steps(optimizer):
    """Batches per update: Keras' `gradient_accumulation_steps`, 1 when unset."""
    return getattr(inner_optimizer(optimizer), "gradient_accumulation_steps", None) or 1


def batches_trained(optimizer):
    """Batches an optimizer has been applied on: the data position of its model.

    `optimizer.iterations` counts updates, which differ from batches under
    gradient accumulation; Keras keeps the batch counter in `_iterations`.
    A `LossScaleOptimizer` does not count the steps it skipped.
    """
    return int(ops.convert_to_numpy(compat.batch_counter(inner_optimizer(optimizer))))
