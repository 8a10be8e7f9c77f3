"""Training pieces of paper section 5: the schedule, the optimizer and the loss."""

from keras_transformer.training.fused_adam import FusedAdam
from keras_transformer.training.label_smoothed_cross_entropy import LabelSmoothedCrossEntropy
from keras_transformer.training.paper_optimizer import paper_optimizer
from keras_transformer.training.training_monitor import TrainingMonitor
from keras_transformer.training.transformer_schedule import TransformerSchedule

__all__ = [
    "FusedAdam",
    "LabelSmoothedCrossEntropy",
    "TrainingMonitor",
    "TransformerSchedule",
    "paper_optimizer",
]
