"""The distribution of one training run: strategy scope, replicas, process share, folder."""

import contextlib
import typing

import keras

from keras_transformer import backend
from keras_transformer.experiment.inputs.input_checks import (  # noqa: F401 (exported names)
    ALTERNATIVES,
    NEEDED_BACKEND,
    PROCESSES_VARIABLE,
    check_distribution,
    jax_processes_requested,
)


class _StrategyScope:
    """A `tf.distribute` strategy's scope that `with` may enter more than once.

    A `strategy.scope()` object enters once (a second `with` fails in
    TensorFlow's context code); the run enters its strategy's scope to build
    the model and again to build the validation search, so each `with` here
    takes a fresh one.
    """

    def __init__(self, strategy):
        self._strategy = strategy
        self._entered = []

    def __enter__(self):
        scope = self._strategy.scope()
        self._entered.append(scope)
        return scope.__enter__()

    def __exit__(self, *exception):
        return self._entered.pop().__exit__(*exception)


class RunDistribution(typing.NamedTuple):
    """How one process of a run trains: strategy scope, devices, data share, output folder.

    `RunDistribution.from_name(distribution)` sets up an `ExperimentConfig.distribution`
    (`"none"`, `"mirrored"`, `"multi_worker"` or `"data_parallel"`); call it before
    anything else touches the backend, since
    `keras.distribution.initialize()` (JAX) and `MultiWorkerMirroredStrategy`
    (TensorFlow) must come first.
    """

    scope: contextlib.AbstractContextManager  # entered to build and compile the model
    replicas: int  # devices that share every global batch
    processes: dict  # `num_processes` / `process_index` for the pipeline
    # Subfolder of --output-dir for this process ("" for process 0 or the chief).
    member_folder: str

    @classmethod
    def from_name(cls, distribution):
        """Sets up `distribution` for this process and describes it.

        Args:
            distribution: str, an `ExperimentConfig.distribution`.

        Returns:
            A `RunDistribution`. Raises `ValueError` for a distribution the
            backend lacks, or a bad `KERAS_DISTRIBUTION_NUM_PROCESSES`.
        """
        single = {"num_processes": 1, "process_index": 0}
        if distribution == "none":
            return cls(contextlib.nullcontext(), 1, single, "")
        check_distribution(distribution, backend.name())
        if distribution == "data_parallel":
            import jax

            if jax_processes_requested() > 1 and not jax.distributed.is_initialized():
                # Coordinator address and this process's index from KERAS_DISTRIBUTION_*.
                keras.distribution.initialize()
            index = jax.process_index()
            processes = {"num_processes": jax.process_count(), "process_index": index}
            # Several processes: each feeds its own share of every global batch (the
            # pipeline's `process_index`), since Keras can only shard fixed-size batches.
            keras.distribution.set_distribution(
                keras.distribution.DataParallel(auto_shard_dataset=processes["num_processes"] == 1)
            )
            member = f"process-{index}" if index else ""
            return cls(contextlib.nullcontext(), jax.device_count(), processes, member)
        import tensorflow as tf

        if distribution == "mirrored":
            strategy = tf.distribute.MirroredStrategy()
            member = ""
        else:
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
            resolver = strategy.cluster_resolver
            member = (
                ""
                if strategy.extended.should_checkpoint
                else f"{resolver.task_type}-{resolver.task_id}"
            )
        return cls(_StrategyScope(strategy), strategy.num_replicas_in_sync, single, member)
