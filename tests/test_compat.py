"""The private TensorFlow and Keras names of `keras_transformer.compat` still exist and behave.

Each test fails with a message naming the private thing, so that a new Keras or TensorFlow
that changes one shows where to look (and the `keras` upper bound in pyproject.toml is
raised only once these pass).
"""

import importlib

import keras
import numpy as np
import pytest

from keras_transformer import compat


def private(condition, name):
    assert condition, (
        f"{name} changed or disappeared in this Keras/TensorFlow "
        f"(keras {keras.__version__}); update keras_transformer/compat.py."
    )


def test_tensorflows_xla_context_check():
    tf = pytest.importorskip("tensorflow")
    try:
        module = importlib.import_module("tensorflow.python.ops.control_flow_util")
    except ImportError:
        module = None
    private(
        module is not None and callable(getattr(module, "GraphOrParentsInXlaContext", None)),
        "tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext",
    )
    seen = {}
    for jit_compile in (False, True):
        tf.function(
            lambda jit_compile=jit_compile: seen.setdefault(jit_compile, compat.in_xla_context()),
            jit_compile=jit_compile,
        )()
    private(seen == {False: False, True: True}, "GraphOrParentsInXlaContext's answer")
    assert not compat.in_xla_context()  # eager


def test_adams_moment_variables():
    optimizer = keras.optimizers.Adam(learning_rate=0.5)
    weights = [keras.Variable(np.ones((2, 3), "float32")), keras.Variable(np.ones(4, "float32"))]
    optimizer.build(weights)
    for name in ("_momentums", "_velocities", "_get_variable_index"):
        private(hasattr(optimizer, name), f"keras.optimizers.Adam.{name}")
    optimizer.apply([keras.ops.full((2, 3), 2.0), keras.ops.full((4,), 3.0)], weights)
    momentum, velocity = compat.adam_moments(optimizer, weights[1])
    # One step from zero: m = (1 - beta_1) g, v = (1 - beta_2) g^2.
    private(
        np.allclose(keras.ops.convert_to_numpy(momentum), 0.1 * 3.0)
        and np.allclose(keras.ops.convert_to_numpy(velocity), 0.001 * 9.0, rtol=1e-5),
        "Adam._momentums / _velocities (order or meaning)",
    )


def test_the_batch_counter_under_gradient_accumulation():
    optimizer = keras.optimizers.SGD(learning_rate=0.1, gradient_accumulation_steps=2)
    weights = keras.Variable(np.ones(3, "float32"))
    optimizer.build([weights])
    private(hasattr(optimizer, "_iterations"), "keras.optimizers.Optimizer._iterations")
    for _ in range(3):
        optimizer.apply([keras.ops.ones((3,))], [weights])
    batches = int(keras.ops.convert_to_numpy(compat.batch_counter(optimizer)))
    updates = int(keras.ops.convert_to_numpy(optimizer.iterations))
    private((batches, updates) == (3, 1), "Optimizer._iterations (counts batches)")


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="Keras' torch optimizers")
def test_kerass_torch_adam_update_of_all_variables():
    module = importlib.import_module("keras.src.backend.torch.optimizers.torch_adam")
    private(
        callable(getattr(getattr(module, "Adam", None), "_parallel_update_step", None)),
        "keras.src.backend.torch.optimizers.torch_adam.Adam._parallel_update_step",
    )


def test_kerass_safe_mode_flag():
    module = importlib.import_module("keras.src.saving.serialization_lib")
    private(
        callable(getattr(module, "in_safe_mode", None)),
        "keras.src.saving.serialization_lib.in_safe_mode",
    )
    with module.SafeModeScope(True):
        private(compat.in_safe_mode() is True, "serialization_lib.in_safe_mode (inside a scope)")
    with module.SafeModeScope(False):
        private(compat.in_safe_mode() is False, "serialization_lib.in_safe_mode (unsafe scope)")


def test_the_base_kernel_under_keras_lora():
    for layer in (keras.layers.Dense(3), keras.layers.EinsumDense("ab,bc->ac", (3,))):
        layer.build((None, 4))
        layer.enable_lora(2)
        layer.lora_kernel_b.assign(keras.ops.ones((2, 3)))
        base = compat.lora_base_kernel(layer)
        private(base is layer.weights[0], f"{type(layer).__name__}._kernel")
        assert not base.trainable
        delta = keras.ops.matmul(layer.lora_kernel_a, layer.lora_kernel_b)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(layer.kernel), keras.ops.convert_to_numpy(base + delta)
        )


def test_a_built_layer_takes_new_variables_inside_unlocked_tracking():
    layer = keras.layers.Dense(3)
    layer.build((None, 4))
    with pytest.raises(ValueError):
        layer.extra = layer.add_weight(name="extra", shape=(2,))
    with compat.unlocked_tracking(layer):
        layer.extra = layer.add_weight(name="extra", shape=(2,))
    private(layer._tracker.locked, "Layer._tracker.locked (locked again)")
    assert [v.name for v in layer.weights] == ["kernel", "bias", "extra"]


def test_the_learning_rate_schedule_an_optimizer_holds():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.5, decay_steps=10, decay_rate=0.5)
    scheduled = keras.optimizers.Adam(learning_rate=schedule)
    private(hasattr(scheduled, "_learning_rate"), "keras.optimizers.Optimizer._learning_rate")
    private(compat.learning_rate_schedule(scheduled) is schedule, "Optimizer._learning_rate")
    assert compat.learning_rate_schedule(keras.optimizers.Adam(learning_rate=0.5)) is None


def test_the_adam_mixin_updates_as_kerass_adam():
    private(
        callable(getattr(keras.optimizers.Adam, "_backend_update_step", None)),
        "keras.optimizers.Optimizer._backend_update_step",
    )

    class MixedAdam(compat.TorchAdamUpdateAll, keras.optimizers.Adam):
        pass

    results = []
    for optimizer in (keras.optimizers.Adam(0.1), MixedAdam(0.1)):
        weights = [keras.Variable(np.ones(shape, "float32")) for shape in ((2, 3), (4,))]
        for step in range(2):
            grads = [keras.ops.full((2, 3), 2.0 + step), keras.ops.full((4,), -3.0)]
            optimizer.apply(grads, weights)
        results.append([keras.ops.convert_to_numpy(w) for w in weights])
    for stock, mixed in zip(*results, strict=True):
        np.testing.assert_allclose(mixed, stock, rtol=1e-6)
    assert not np.allclose(results[0][0], 1.0)  # the weights moved


def test_the_keras_version_check_of_the_distribute_workarounds():
    assert compat.keras_needs_workarounds("3.15.1")
    assert not compat.keras_needs_workarounds("3.16.0")
    assert not compat.keras_needs_workarounds("4.0.0")


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="Keras' TensorFlow trainer")
def test_kerass_tensorflow_trainer_names_of_the_distribute_workarounds():
    tf = pytest.importorskip("tensorflow")
    for name in ("_maybe_symbolic_build", "_symbolic_build"):
        private(callable(getattr(keras.Model, name, None)), f"TensorFlowTrainer.{name}")
    private(keras.Sequential()._distribute_strategy is None, "Trainer._distribute_strategy")
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = keras.Sequential()
    private(model._distribute_strategy is strategy, "Trainer._distribute_strategy (in a scope)")
    module = importlib.import_module("tensorflow.python.distribute.collective_all_reduce_strategy")
    private(
        callable(getattr(module.CollectiveAllReduceExtended, "_in_multi_worker_mode", None)),
        "CollectiveAllReduceExtended._in_multi_worker_mode",
    )
    # Outside a multi-worker strategy the model is patched for the build only.
    compat.apply_distribute_workarounds(model)
    assert "_maybe_symbolic_build" in vars(model) and "train_step" not in vars(model)


def _sentencepiece_proto():
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    words = ["the cat sat", "a dog ran", "the dog sat on a mat", "cats and dogs"] * 20
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(words), model_writer=model, vocab_size=20, model_type="char"
    )
    return model.getvalue()


def test_tensorflow_texts_shared_sentencepiece_resource():
    import tensorflow as tf
    import tensorflow_text as tf_text

    proto = _sentencepiece_proto()

    class Shared(tf.saved_model.experimental.TrackableResource):
        def _create_resource(self):
            return compat.sentencepiece_resource_op(proto, "compat_test_sentencepiece")

    own = tf_text.SentencepieceTokenizer(model=proto, out_type=tf.string)
    shared = tf_text.SentencepieceTokenizer(model=proto, out_type=tf.string)
    resource = Shared()
    compat.share_sentencepiece_resource(shared, resource)
    private(
        shared._model_resource is resource, "tensorflow_text SentencepieceTokenizer._model_resource"
    )
    texts = tf.constant(["the cat sat on a mat"])
    assert shared.tokenize(texts).to_list() == own.tokenize(texts).to_list()


def test_keras_hubs_preprocessing_helpers():
    convert_to_ragged_batch, preprocessing_function = compat.keras_hub_preprocessing()
    batch, unbatched, _ = convert_to_ragged_batch(keras.ops.convert_to_tensor([[1, 2], [3, 4]]))
    private(not unbatched and batch.shape[0] == 2, "keras_hub.src.utils.tensor_utils")
    private(callable(preprocessing_function(lambda self, x: x)), "preprocessing_function")
