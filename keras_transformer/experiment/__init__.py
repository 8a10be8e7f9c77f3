"""Training runs end to end, as the recipes and the command line start them."""

from keras_transformer.experiment.experiment_config import DISTRIBUTIONS, ExperimentConfig
from keras_transformer.experiment.experiment_result import ExperimentResult
from keras_transformer.experiment.run_experiment import run_experiment
from keras_transformer.experiment.split_files import split_paths

__all__ = ["DISTRIBUTIONS", "ExperimentConfig", "ExperimentResult", "run_experiment", "split_paths"]
