"""Data-parallel training equals one device: MirroredStrategy (TF) and DataParallel (JAX).

Each case runs in a subprocess, since the number of CPU devices is fixed when the
backend starts. One SGD step on a global batch whose halves hold different numbers of
target tokens must give the same weights (to 1e-5) on two devices as on one.
"""

import os
import textwrap

import numpy as np
from process_group import fails_while_keras_needs, once_per_suite, run_saving_script
from split_batch_loss import TOKEN_MEAN_PER_HALF

COMMON = textwrap.dedent(
    """
    import numpy as np
    import keras
    from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, TransformerConfig
    from keras_transformer.compat import apply_distribute_workarounds

    config = TransformerConfig(vocabulary_size=23, num_layers=1, d_model=16, num_heads=2,
                               intermediate_dim=32, dropout=0.0)
    rng = np.random.default_rng(0)
    encoder = rng.integers(1, 23, size=(4, 7)).astype("int32")
    decoder = rng.integers(1, 23, size=(4, 9)).astype("int32")
    decoder[2:, 2:] = 0  # the second replica's half holds far fewer target tokens
    inputs = {"encoder_token_ids": encoder, "decoder_token_ids": decoder}

    def batches():
        # tf.data keeps the int dtype (Keras' array adapter casts arrays to float under
        # MirroredStrategy) and the strategy splits the global batch of 4 into 2 + 2.
        import tensorflow as tf
        return tf.data.Dataset.from_tensors((inputs, decoder))

    def one_step(initial_weights, loss, workarounds=True):
        model = Seq2SeqTransformer(config)
        if workarounds:
            apply_distribute_workarounds(model)
        model.build()
        if initial_weights is not None:
            model.set_weights(initial_weights)
        start = [np.array(w) for w in model.get_weights()]
        model.compile(optimizer=keras.optimizers.SGD(1.0), loss=loss)
        model.fit(batches(), epochs=1, verbose=0)
        return start, model.get_weights()

    class PerReplicaMean(LabelSmoothedCrossEntropy):
        # What a hand-written sum(loss * mask) / sum(mask) per replica gives.
        def __call__(self, y_true, y_pred, sample_weight=None):
            mask = keras.ops.cast(keras.ops.not_equal(y_true, 0), "float32")
            total = keras.ops.sum(self.call(y_true, y_pred) * mask)
            return total / keras.ops.sum(mask)
    """
)

TWO_TENSORFLOW_CPUS = textwrap.dedent(
    """
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    """
)

TENSORFLOW = (
    TWO_TENSORFLOW_CPUS
    + COMMON
    + textwrap.dedent(
        """
        keras.utils.set_random_seed(1)
        start, single = one_step(None, LabelSmoothedCrossEntropy())
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        assert strategy.num_replicas_in_sync == 2
        with strategy.scope():
            _, mirrored = one_step(start, LabelSmoothedCrossEntropy())
            _, naive = one_step(start, PerReplicaMean())
        np.savez(OUT, single=np.concatenate([w.ravel() for w in single]),
                 parallel=np.concatenate([w.ravel() for w in mirrored]),
                 naive=np.concatenate([w.ravel() for w in naive]))
        """
    )
)

JAX = (
    COMMON
    + TOKEN_MEAN_PER_HALF
    + textwrap.dedent(
        """
    import jax
    assert len(jax.devices()) == 2

    class RecordsTargetSharding(LabelSmoothedCrossEntropy):
        # How the targets reaching the loss inside the jitted step lie on the devices.
        shardings = []

        def __call__(self, y_true, y_pred, sample_weight=None):
            jax.debug.inspect_array_sharding(y_true, callback=self.shardings.append)
            return super().__call__(y_true, y_pred, sample_weight)

    keras.utils.set_random_seed(1)
    start, single = one_step(None, LabelSmoothedCrossEntropy())
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
    loss = RecordsTargetSharding()
    model = Seq2SeqTransformer(config)
    model.build()
    model.set_weights(start)
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss=loss)
    model.fit(batches(), epochs=1, verbose=0)
    parallel = model.get_weights()
    target = loss.shardings[-1]
    _, naive = one_step(start, TokenMeanPerHalf())  # DataParallel: rows 0-1, 2-3 per device
    np.savez(OUT, start=np.concatenate([np.ravel(w) for w in start]),
             single=np.concatenate([np.ravel(w) for w in single]),
             parallel=np.concatenate([np.ravel(w) for w in parallel]),
             naive=np.concatenate([np.ravel(w) for w in naive]),
             target_devices=len(target.device_set),
             target_shard_shape=target.shard_shape(tuple(decoder.shape)),
             variable_devices=[len(v.value.sharding.device_set) for v in model.weights],
             variable_replicated=[v.value.sharding.is_fully_replicated for v in model.weights])
    """
    )
)


@once_per_suite("tensorflow")
def test_mirrored_strategy_step_equals_one_device(tmp_path):
    weights = run_saving_script(TENSORFLOW, "tensorflow", tmp_path)
    np.testing.assert_allclose(weights["parallel"], weights["single"], atol=1e-5)
    # A per-replica token mean is measurably wrong on this batch: the test can fail.
    assert np.abs(weights["naive"] - weights["single"]).max() > 1e-3


# Keras' build from `strategy.reduce("MEAN", batch)` (apply_distribute_workarounds, 1).
WITHOUT_BUILD_WORKAROUND = (
    TWO_TENSORFLOW_CPUS
    + COMMON
    + textwrap.dedent(
        """
        with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
            _, weights = one_step(None, LabelSmoothedCrossEntropy(), workarounds=False)
        np.savez(OUT, weights=np.concatenate([w.ravel() for w in weights]))
        """
    )
)


@once_per_suite("tensorflow")
@fails_while_keras_needs(
    "symbolic-build", "Keras builds a distributed model from a float mean of the int batch."
)
def test_keras_builds_a_mirrored_model_without_the_workaround(tmp_path):
    run_saving_script(WITHOUT_BUILD_WORKAROUND, "tensorflow", tmp_path)


@once_per_suite("jax")
def test_jax_data_parallel_step_equals_one_device(tmp_path):
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    weights = run_saving_script(JAX, "jax", tmp_path, {"XLA_FLAGS": flags.strip()})
    # DataParallel was applied: every weight is replicated on both devices and the global
    # batch of 4 reaches the loss split 2 + 2 over them.
    assert weights["variable_devices"].min() == 2 and weights["variable_replicated"].all()
    assert weights["target_devices"] == 2
    assert tuple(weights["target_shard_shape"]) == (2, 9)
    np.testing.assert_allclose(weights["parallel"], weights["single"], atol=1e-5)
    # The step moved the weights far beyond the tolerance, and a per-device token mean is
    # measurably wrong on this batch: the comparison can fail.
    assert np.abs(weights["single"] - weights["start"]).max() > 1e-2
    assert np.abs(weights["naive"] - weights["single"]).max() > 1e-3
