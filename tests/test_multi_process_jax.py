"""Two JAX processes on localhost train under keras.distribution and agree with one process.

Each process calls `keras.distribution.initialize()` (coordinator, process count and index
from the `KERAS_DISTRIBUTION_*` variables), sets `DataParallel(auto_shard_dataset=False)`
and feeds its share of every global batch from `make_translation_dataset(num_processes=2,
process_index=i)`. After a few steps of `fit` on the bucketed pipeline both must hold the
same weights and logs, equal to one process with one device training on the same global
batches; a per-process token mean must land elsewhere.
"""

import json
import os
import sys
import textwrap

import numpy as np
import pytest
from process_group import (
    ROOT,
    assert_group_matches_single,
    checkpoint_weights,
    free_ports,
    once_per_suite,
    recipe_command,
    run_all,
    write_recipe_data,
)
from split_batch_loss import TOKEN_MEAN_PER_HALF

pytestmark = once_per_suite("jax")

SCRIPT = TOKEN_MEAN_PER_HALF + textwrap.dedent(
    """
    import json
    import sys
    import numpy as np
    import keras

    out, distributed = sys.argv[1], sys.argv[2] == "1"
    if distributed:
        keras.distribution.initialize()  # before any JAX computation
    import jax
    from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, TransformerConfig
    from keras_transformer.data import TokenizedCorpus, make_translation_dataset

    rng = np.random.default_rng(0)
    sources = [list(rng.integers(4, 23, rng.integers(1, 14))) for _ in range(60)]
    targets = [list(rng.integers(4, 23, rng.integers(1, 14))) for _ in range(60)]
    # Two replicas' worth of rows per global batch whether one process or two run it, so
    # both see the same global batches.
    train = make_translation_dataset(
        TokenizedCorpus.from_ids(sources, targets), token_budget=48, max_length=16,
        bucket_growth=2.0, num_replicas=2, num_processes=jax.process_count(),
        process_index=jax.process_index())
    if distributed:
        keras.distribution.set_distribution(
            keras.distribution.DataParallel(auto_shard_dataset=False))
    config = TransformerConfig(vocabulary_size=23, num_layers=1, d_model=16, num_heads=2,
                               intermediate_dim=32, dropout=0.0)

    def flat(weights):
        return np.concatenate([np.ravel(np.asarray(w)) for w in weights])

    def train_with(loss, start=None):
        keras.utils.set_random_seed(3)
        model = Seq2SeqTransformer(config)
        model.build()
        if start is not None:
            model.set_weights(start)
        initial = model.get_weights()
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss=loss)
        history = model.fit(train.dataset, steps_per_epoch=4, epochs=1, verbose=0)
        return initial, model.get_weights(), history.history["loss"]

    start, weights, losses = train_with(LabelSmoothedCrossEntropy())
    np.save(out + ".npy", flat(weights))
    np.save(out + "_start.npy", flat(start))
    if not distributed:  # each process's own token mean, averaged over the processes
        np.save(out + "_naive.npy", flat(train_with(TokenMeanPerHalf(), start)[1]))
    shares = [list(labels.shape) for _, labels in train.dataset.take(4)]
    with open(out + ".json", "w") as f:
        json.dump({"loss": losses, "processes": jax.process_count(),
                   "devices": jax.device_count(), "shares": shares}, f)
    """
)

NAMES = ("process0", "process1", "single")


def test_two_processes_agree_with_each_other_and_with_one_process(tmp_path):
    (port,) = free_ports(1)
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    cluster = {
        "KERAS_DISTRIBUTION_JOB_ADDRESSES": f"127.0.0.1:{port}",
        "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
    }
    commands = {
        f"process{index}": (
            [sys.executable, "-c", SCRIPT, str(tmp_path / f"process{index}"), "1"],
            {**env, **cluster, "KERAS_DISTRIBUTION_PROCESS_ID": str(index)},
        )
        for index in range(2)
    }
    commands["single"] = ([sys.executable, "-c", SCRIPT, str(tmp_path / "single"), "0"], env)
    run_all(commands, tmp_path)

    logs = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in NAMES}
    assert logs["process0"]["processes"] == 2 and logs["process0"]["devices"] == 2
    assert logs["single"]["processes"] == 1 and logs["single"]["devices"] == 1
    # Each process held half of every global batch.
    for local, whole in zip(logs["process1"]["shares"], logs["single"]["shares"], strict=True):
        assert local == [whole[0] // 2, whole[1]]

    assert_group_matches_single(tmp_path, NAMES[:2])
    assert logs["process0"]["loss"] == logs["process1"]["loss"]
    np.testing.assert_allclose(logs["process0"]["loss"], logs["single"]["loss"], atol=1e-5)


@pytest.mark.slow
def test_recipe_on_two_processes_equals_two_devices_in_one(tmp_path):
    """`wmt14_base.py --distribution data_parallel` as two processes, one device each, stopped
    after 6 steps and resumed to 9, against one process with two devices running 9 at once.
    The two processes share one --output-dir: the second writes in its `process-1` folder."""
    write_recipe_data(tmp_path / "data")
    outputs = {
        "process0": tmp_path / "group",
        "process1": tmp_path / "group" / "process-1",
        "single": tmp_path / "single",
    }
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    env.pop("XLA_FLAGS", None)

    def run_processes(steps, single_steps=None):
        (port,) = free_ports(1)
        cluster = {
            "KERAS_DISTRIBUTION_JOB_ADDRESSES": f"127.0.0.1:{port}",
            "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
        }
        commands = {}
        for index, name in enumerate(NAMES[:2]):
            command = recipe_command(
                tmp_path / "data", tmp_path / "group", "data_parallel", "--no-export", steps=steps
            )
            commands[name] = (
                command,
                {**env, **cluster, "KERAS_DISTRIBUTION_PROCESS_ID": str(index)},
            )
        if single_steps is not None:  # the same global batches on one process, two devices
            command = recipe_command(
                tmp_path / "data", tmp_path / "single", "data_parallel", "--no-export",
                steps=single_steps,
            )  # fmt: skip
            two_devices = {**env, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
            commands["single"] = (command, two_devices)
        run_all(commands, tmp_path, timeout=900)

    run_processes(6, single_steps=9)
    first, second, single = (checkpoint_weights(outputs[name], 6) for name in NAMES)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, single, rtol=0, atol=1e-5)
    assert np.abs(single - checkpoint_weights(outputs["single"], 3)).max() > 1e-2

    run_processes(9)  # resumes from each process's step-6 checkpoint
    first, second, single = (checkpoint_weights(outputs[name], 9) for name in NAMES)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, single, rtol=0, atol=1e-5)
    assert np.abs(single - checkpoint_weights(outputs["single"], 6)).max() > 1e-2
    translations = {
        name: (outputs[name] / "newstest2014.de.hyp").read_text(encoding="utf-8") for name in NAMES
    }
    assert translations["process0"] == translations["process1"] == translations["single"]


@pytest.mark.parametrize("value", ["two", "0"])
def test_bad_process_count_is_named(tmp_path, monkeypatch, value):
    from keras_transformer.experiment import ExperimentConfig, run_experiment

    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", value)
    config = ExperimentConfig(output_dir=str(tmp_path), distribution="data_parallel")
    with pytest.raises(ValueError, match=f"KERAS_DISTRIBUTION_NUM_PROCESSES .* {value!r}"):
        run_experiment(config)
    assert os.listdir(tmp_path) == []  # failed before writing anything
