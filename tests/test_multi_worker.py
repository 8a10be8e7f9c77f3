"""Two worker processes on localhost train under MultiWorkerMirroredStrategy and agree.

Each worker runs the same script with its own `TF_CONFIG`; after a few steps both must
hold the same weights and report the same logs, equal to one process training on the same
global batches. Relies on `keras_transformer.compat.apply_distribute_workarounds`
(Keras 3.15 fails to reduce scalar logs across workers, tensorflow/tensorflow#72388); a
test here tells when Keras no longer needs it.
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
    fails_while_keras_needs,
    free_ports,
    once_per_suite,
    recipe_command,
    run_all,
    write_recipe_data,
)
from split_batch_loss import TOKEN_MEAN_PER_HALF

SCRIPT = TOKEN_MEAN_PER_HALF + textwrap.dedent(
    """
    import json
    import sys
    import numpy as np
    import tensorflow as tf
    import keras
    from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, TransformerConfig
    from keras_transformer.compat import apply_distribute_workarounds

    out, distributed, logs_workaround = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
    strategy = (tf.distribute.MultiWorkerMirroredStrategy() if distributed
                else tf.distribute.get_strategy())
    config = TransformerConfig(vocabulary_size=23, num_layers=1, d_model=16, num_heads=2,
                               intermediate_dim=32, dropout=0.0)
    rng = np.random.default_rng(0)
    encoder = rng.integers(1, 23, size=(12, 7)).astype("int32")
    decoder = rng.integers(1, 23, size=(12, 9)).astype("int32")
    # Each global batch of 4 splits 2 + 2 between the workers; worker 0's rows are short,
    # so the workers hold different token counts.
    decoder[np.arange(12) % 4 < 2, 3:] = 0
    dataset = tf.data.Dataset.from_tensor_slices(
        ({"encoder_token_ids": encoder, "decoder_token_ids": decoder}, decoder)).batch(4)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options)

    def flat(weights):
        return np.concatenate([np.ravel(w) for w in weights])

    keras.utils.set_random_seed(3)
    with strategy.scope():
        model = apply_distribute_workarounds(Seq2SeqTransformer(config), logs=logs_workaround)
        model.build()
        start = model.get_weights()
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss=LabelSmoothedCrossEntropy())
    history = model.fit(dataset, epochs=2, verbose=0)  # 3 steps per epoch
    evaluation = model.evaluate(dataset, verbose=0, return_dict=True)
    np.save(out + ".npy", flat(model.get_weights()))
    np.save(out + "_start.npy", flat(start))

    if not distributed:  # the control, trained while the workers run
        naive = Seq2SeqTransformer(config)
        naive.build()
        naive.set_weights(start)
        # Each worker's own token mean, averaged over the workers.
        naive.compile(optimizer=keras.optimizers.SGD(0.5), loss=TokenMeanPerHalf())
        naive.fit(dataset, epochs=2, verbose=0)
        np.save(out + "_naive.npy", flat(naive.get_weights()))
    with open(out + ".json", "w") as f:
        json.dump({"fit": history.history["loss"], "evaluate": evaluation["loss"]}, f)
    """
)


NAMES = ("worker0", "worker1", "single")
ENV = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}


def worker_commands(tmp_path, logs_workaround=True):
    """The SCRIPT of each of two workers on localhost, by name."""
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    commands = {}
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        argv = [str(tmp_path / f"worker{index}"), "1", str(int(logs_workaround))]
        commands[f"worker{index}"] = (
            [sys.executable, "-c", SCRIPT, *argv],
            {**ENV, "TF_CONFIG": json.dumps(tf_config)},
        )
    return commands


@once_per_suite("tensorflow")
def test_two_workers_agree_with_each_other_and_with_one_process(tmp_path):
    commands = worker_commands(tmp_path)
    commands["single"] = (
        [sys.executable, "-c", SCRIPT, str(tmp_path / "single"), "0", "1"],
        ENV,
    )
    run_all(commands, tmp_path)

    assert_group_matches_single(tmp_path, NAMES[:2])

    # The logs (reduced over the workers' replicas) are the global-batch loss on every worker.
    first, second, single = (json.loads((tmp_path / f"{name}.json").read_text()) for name in NAMES)
    assert len(first["fit"]) == 2 and np.all(np.isfinite(first["fit"] + [first["evaluate"]]))
    assert first == second
    np.testing.assert_allclose(first["fit"], single["fit"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(first["evaluate"], single["evaluate"], rtol=0, atol=1e-5)


# A check on Keras, not on this package (two more worker processes): run with the slow tests
# when Keras is upgraded.
@pytest.mark.slow
@once_per_suite("tensorflow")
@fails_while_keras_needs(
    "logs", "Keras fails to reduce scalar logs across workers (tensorflow/tensorflow#72388)."
)
def test_keras_reduces_multi_worker_logs_without_the_workaround(tmp_path):
    run_all(worker_commands(tmp_path, logs_workaround=False), tmp_path)


@once_per_suite("tensorflow")
def test_recipe_on_two_workers(tmp_path):
    """`wmt14_base.py --distribution multi_worker` as two workers sharing one --output-dir
    (the second writes in its `worker-1` folder) runs to the end, export included, with the
    same checkpoints and outputs. That these equal one process is the test above's part."""
    write_recipe_data(tmp_path / "data")
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": ROOT}  # fmt: skip
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    commands = {}
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        commands[f"worker{index}"] = (
            recipe_command(tmp_path / "data", tmp_path / "run", "multi_worker"),
            {**env, "TF_CONFIG": json.dumps(tf_config)},
        )
    run_all(commands, tmp_path, timeout=900)

    first, second = tmp_path / "run", tmp_path / "run" / "worker-1"
    np.testing.assert_array_equal(checkpoint_weights(first, 6), checkpoint_weights(second, 6))
    assert np.abs(checkpoint_weights(first, 6) - checkpoint_weights(first, 3)).max() > 1e-2
    hypotheses = [output / "newstest2014.de.hyp" for output in (first, second)]
    assert hypotheses[0].read_text() == hypotheses[1].read_text()
    for output in (first, second):
        assert (output / "saved_model" / "saved_model.pb").is_file()
