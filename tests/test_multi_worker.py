"""Two worker processes on localhost train under MultiWorkerMirroredStrategy and agree.

Each worker runs the same script with its own `TF_CONFIG`; after a few steps both must
hold the same weights, equal to one process training on the same global batches.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tensorflow as tf
    import keras
    from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, TransformerConfig

    out, distributed = sys.argv[1], sys.argv[2] == "1"
    strategy = (tf.distribute.MultiWorkerMirroredStrategy() if distributed
                else tf.distribute.get_strategy())
    config = TransformerConfig(vocabulary_size=23, num_layers=1, d_model=16, num_heads=2,
                               intermediate_dim=32, dropout=0.0)
    rng = np.random.default_rng(0)
    encoder = rng.integers(1, 23, size=(12, 7)).astype("int32")
    decoder = rng.integers(1, 23, size=(12, 9)).astype("int32")
    decoder[::2, 3:] = 0  # uneven token counts between the workers' halves
    dataset = tf.data.Dataset.from_tensor_slices(
        ({"encoder_token_ids": encoder, "decoder_token_ids": decoder}, decoder)).batch(4)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options)
    keras.utils.set_random_seed(3)
    with strategy.scope():
        model = Seq2SeqTransformer(config)
        model.build()
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss=LabelSmoothedCrossEntropy())
    model.fit(dataset, epochs=1, verbose=0)
    np.save(out, np.concatenate([np.ravel(w) for w in model.get_weights()]))
    """
)


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_two_workers_agree_with_each_other_and_with_one_process(tmp_path):
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    processes = []
    try:
        for index in range(2):
            tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", SCRIPT, str(tmp_path / f"worker{index}.npy"), "1"],
                    env={**env, "TF_CONFIG": json.dumps(tf_config)},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        single = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "single.npy"), "0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        for process in processes:
            _, stderr = process.communicate(timeout=300)
            assert process.returncode == 0, stderr[-4000:]
        assert single.returncode == 0, single.stderr[-4000:]
    finally:
        for process in processes:  # never leave a worker behind
            if process.poll() is None:
                process.kill()
                process.wait()
    first, second = (np.load(tmp_path / f"worker{i}.npy") for i in range(2))
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, np.load(tmp_path / "single.npy"), atol=1e-5)
    assert not np.allclose(first, 0.0)


# Kept out of CI until issue 5 works around it: Keras 3.15 reduces the scalar logs of a
# multi-worker step with `strategy.reduce("MEAN", value, axis=0)`
# (keras/src/backend/tensorflow/trainer.py, `reduce_per_replica`), which fails on scalars
# with 2+ workers (reported upstream as tensorflow/tensorflow#72388; the step hard-codes
# reduction="auto", so `distribute_reduction_method` does not help). Strict: this starts
# failing as soon as fit works across workers.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xfail(strict=True, reason="Keras 3.15 multi-worker log reduction on scalars"),
]
