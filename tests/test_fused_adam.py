"""FusedAdam: the same updates as Keras' Adam, through TensorFlow's one-kernel update."""

import textwrap

import keras
import numpy as np
import pytest
from conftest import CPU_FORMS
from process_group import once_per_suite, run_saving_script

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, paper_optimizer
from keras_transformer.training import FusedAdam

TENSORFLOW_ONLY = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="TensorFlow's ResourceApplyAdam"
)
ARGUMENTS = {"learning_rate": 3e-2, "beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9}
# Three steps of 3e-2 each: 1e-5 is a few ten-thousandths of one step, far below any error in
# the update's formula, and above the float32 rounding that the two programs' gradients
# (oneDNN's thread-dependent sums) leave on some CPUs (1.6e-6 seen on an AMD EPYC).
ATOL = 1e-5


def trained_weights(one_layer_config, optimizer, jit_compile, steps=3):
    """Weights after `steps` fit() steps of a tiny model (token embeddings get sparse gradients)."""
    keras.utils.set_random_seed(7)
    model = Seq2SeqTransformer(one_layer_config)
    model.build()
    rng = np.random.default_rng(0)
    inputs = {
        "encoder_token_ids": rng.integers(1, 31, size=(4, 6)).astype("int32"),
        "decoder_token_ids": rng.integers(1, 31, size=(4, 5)).astype("int32"),
    }
    labels = rng.integers(1, 31, size=(4, 5)).astype("int32")
    model.compile(optimizer=optimizer, loss=LabelSmoothedCrossEntropy(), jit_compile=jit_compile)
    for _ in range(steps):
        model.train_on_batch(inputs, labels)
    return model.get_weights()


@TENSORFLOW_ONLY  # elsewhere (JAX, XLA) FusedAdam runs Keras' update itself
def test_updates_equal_keras_adam(one_layer_config):
    fused = trained_weights(one_layer_config, FusedAdam(**ARGUMENTS), jit_compile=False)
    reference = trained_weights(
        one_layer_config, keras.optimizers.Adam(**ARGUMENTS), jit_compile=False
    )
    start = trained_weights(one_layer_config, keras.optimizers.Adam(**ARGUMENTS), False, steps=0)
    moved = 0
    for got, expected, initial in zip(fused, reference, start, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=ATOL)
        moved += int(np.abs(expected - initial).max() > 1e-3)
    assert moved == len(start)  # every weight was updated by the learning rate's order


@CPU_FORMS
@TENSORFLOW_ONLY
@pytest.mark.parametrize("jit_compile", [False, True])
def test_the_one_kernel_update_runs_exactly_outside_xla(jit_compile):
    import tensorflow as tf

    weights = keras.Variable(np.ones((3, 4), "float32"))
    optimizer = FusedAdam(**ARGUMENTS)
    optimizer.build([weights])
    step = tf.function(lambda g: optimizer.apply([g], [weights]), jit_compile=jit_compile)
    gradient = tf.constant(np.full((3, 4), 0.5, "float32"))
    graph = step.get_concrete_function(gradient).graph
    kernels = [op.type for op in graph.get_operations()]
    assert ("ResourceApplyAdam" in kernels) == (not jit_compile)
    step(gradient)
    # One step from zero moments moves every weight by the learning rate (Adam's first step).
    np.testing.assert_allclose(weights.numpy(), 1 - ARGUMENTS["learning_rate"], rtol=1e-6)


@TENSORFLOW_ONLY
def test_under_loss_scaling_equals_keras_adam(one_layer_config):
    def weights(inner):
        optimizer = keras.optimizers.LossScaleOptimizer(inner, initial_scale=2.0**10)
        return trained_weights(one_layer_config, optimizer, jit_compile=False)

    for got, expected in zip(
        weights(FusedAdam(**ARGUMENTS)), weights(keras.optimizers.Adam(**ARGUMENTS)), strict=True
    ):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=ATOL)


def test_updates_follow_adams_closed_form():
    """Three updates of two variables against Adam's formula in numpy, on every backend.

    On torch this is the update of all variables at once (`torch._foreach_*`).
    """
    rng = np.random.default_rng(3)
    initial = [rng.normal(size=(3, 4)).astype("float32"), rng.normal(size=(5,)).astype("float32")]
    gradients = [[rng.normal(size=w.shape).astype("float32") for w in initial] for _ in range(3)]
    variables = [keras.Variable(w) for w in initial]
    optimizer = FusedAdam(**ARGUMENTS)
    optimizer.build(variables)
    lr, b1, b2, eps = (ARGUMENTS[k] for k in ("learning_rate", "beta_1", "beta_2", "epsilon"))
    expected = [w.astype("float64") for w in initial]
    m = [np.zeros_like(w) for w in expected]
    v = [np.zeros_like(w) for w in expected]
    for t, step_gradients in enumerate(gradients, start=1):
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in step_gradients], variables)
        for i, g in enumerate(step_gradients):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g.astype("float64") ** 2
            alpha = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
            expected[i] = expected[i] - alpha * m[i] / (np.sqrt(v[i]) + eps)
    for variable, want, start in zip(variables, expected, initial, strict=True):
        got = keras.ops.convert_to_numpy(variable)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert np.abs(got - start).min() > 1e-3  # every element moved


def test_paper_optimizer_is_fused_and_round_trips_its_config():
    optimizer = paper_optimizer(512)
    assert isinstance(optimizer, FusedAdam)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is FusedAdam
    assert (restored.beta_1, restored.beta_2, restored.epsilon) == (0.9, 0.98, 1e-9)


MIRRORED = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, TransformerConfig
    from keras_transformer.compat import apply_distribute_workarounds
    from keras_transformer.training import FusedAdam

    config = TransformerConfig(vocabulary_size=23, num_layers=1, d_model=16, num_heads=2,
                               intermediate_dim=32, dropout=0.0)
    rng = np.random.default_rng(0)
    encoder = rng.integers(1, 23, size=(4, 7)).astype("int32")
    decoder = rng.integers(1, 23, size=(4, 9)).astype("int32")
    data = tf.data.Dataset.from_tensors(
        ({"encoder_token_ids": encoder, "decoder_token_ids": decoder}, decoder)).repeat(3)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    results = {}
    for name, optimizer_class in [("fused", FusedAdam), ("keras", keras.optimizers.Adam)]:
        keras.utils.set_random_seed(1)
        with strategy.scope():
            model = apply_distribute_workarounds(Seq2SeqTransformer(config))
            model.compile(optimizer=optimizer_class(3e-2, beta_2=0.98, epsilon=1e-9),
                          loss=LabelSmoothedCrossEntropy(), jit_compile=False)
            model.fit(data, epochs=1, verbose=0)
        results[name] = np.concatenate([np.ravel(w) for w in model.get_weights()])
    np.savez(OUT, **results)
    """
)


@TENSORFLOW_ONLY
@once_per_suite("tensorflow")
def test_mirrored_strategy_updates_equal_keras_adam(tmp_path):
    weights = run_saving_script(MIRRORED, "tensorflow", tmp_path)
    np.testing.assert_allclose(weights["fused"], weights["keras"], rtol=1e-5, atol=1e-6)
