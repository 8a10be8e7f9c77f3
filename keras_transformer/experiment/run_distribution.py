"""The distribution of one training run: strategy scope, replicas, process share, folder."""

import contextlib
import os
import typing

import keras

# Keras' variable for the number of JAX processes (`keras.distribution.initialize`).
PROCESSES_VARIABLE = "KERAS_DISTRIBUTION_NUM_PROCESSES"
# The backend each distribution runs on: `keras.distribution` is JAX's only, and
# `tf.distribute` TensorFlow's.
NEEDED_BACKEND = {"data_parallel": "jax", "mirrored": "tensorflow", "multi_worker": "tensorflow"}
# What a backend offers instead. Keras 3 has no multi-device `fit` on torch (its `fit` does
# not run under torch's DistributedDataParallel), so torch trains on one device.
ALTERNATIVES = {
    "tensorflow": "'mirrored' or 'multi_worker'",
    "jax": "'data_parallel'",
    "torch": "'none' (Keras trains on one device on torch)",
}


def _jax_processes_requested():
    """`KERAS_DISTRIBUTION_NUM_PROCESSES` as an int (1 when unset)."""
    value = os.environ.get(PROCESSES_VARIABLE, "1")
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(
            f"The environment variable {PROCESSES_VARIABLE} must be a positive int (the "
            f"number of JAX processes). Received: {value!r}"
        )
    return count


class RunDistribution(typing.NamedTuple):
    """How one process of a run trains: strategy scope, devices, data share, output folder.

    `RunDistribution.from_config(config)` sets up `config.distribution` (an
    `ExperimentConfig`'s `"none"`, `"mirrored"`, `"multi_worker"` or
    `"data_parallel"`); call it before anything else touches the backend, since
    `keras.distribution.initialize()` (JAX) and `MultiWorkerMirroredStrategy`
    (TensorFlow) must come first.
    """

    scope: contextlib.AbstractContextManager  # entered to build and compile the model
    replicas: int  # devices that share every global batch
    processes: dict  # `num_processes` / `process_index` for the pipeline
    # Subfolder of --output-dir for this process ("" for process 0 or the chief).
    member_folder: str

    @classmethod
    def from_config(cls, config):
        """Sets up `config.distribution` for this process and describes it.

        Args:
            config: an `ExperimentConfig`; only `distribution` is read.

        Returns:
            A `RunDistribution`. Raises `ValueError` for a distribution the
            backend lacks, or a bad `KERAS_DISTRIBUTION_NUM_PROCESSES`.
        """
        single = {"num_processes": 1, "process_index": 0}
        if config.distribution == "none":
            return cls(contextlib.nullcontext(), 1, single, "")
        backend = keras.backend.backend()
        needed = NEEDED_BACKEND[config.distribution]
        if backend != needed:
            raise ValueError(
                f"distribution={config.distribution!r} needs KERAS_BACKEND={needed}, not "
                f"{backend}; use {ALTERNATIVES.get(backend, repr('none'))}."
            )
        if config.distribution == "data_parallel":
            import jax

            if _jax_processes_requested() > 1 and not jax.distributed.is_initialized():
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

        if config.distribution == "mirrored":
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
        return cls(strategy.scope(), strategy.num_replicas_in_sync, single, member)
