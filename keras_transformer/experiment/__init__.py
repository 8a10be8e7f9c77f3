"""Training runs end to end, as the recipes and the command line start them."""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "CheckpointConfig": "checkpoint_config",
        "DataConfig": "data_config",
        "DISTRIBUTIONS": "experiment_config",
        "ExperimentConfig": "experiment_config",
        "ExtraDataConfig": "extra_data_config",
        "ModelSettings": "model_settings",
        "OptimizationConfig": "optimization_config",
        "ValidationConfig": "validation_config",
        "ExperimentResult": "experiment_result",
        "run_experiment": "run_experiment",
        "split_paths": "split_files",
    },
)
