"""Training runs end to end, as the recipes and the command line start them."""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "CheckpointConfig": "settings.checkpoint_config",
        "DataConfig": "settings.data_config",
        "DISTRIBUTIONS": "settings.experiment_config",
        "ExperimentConfig": "settings.experiment_config",
        "ExtraDataConfig": "settings.extra_data_config",
        "ModelSettings": "settings.model_settings",
        "OptimizationConfig": "settings.optimization_config",
        "ValidationConfig": "settings.validation_config",
        "ExperimentResult": "experiment_result",
        "run_experiment": "run_experiment",
        "split_paths": "inputs.split_files",
    },
)
