"""Training pieces of paper section 5: the schedule, the optimizer and the loss."""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "FusedAdam": "fused_adam",
        "LabelSmoothedCrossEntropy": "label_smoothed_cross_entropy",
        "paper_optimizer": "paper_optimizer",
        "TrainingMonitor": "training_monitor",
        "TransformerSchedule": "transformer_schedule",
    },
)
