import keras
import numpy as np
import pytest
from conftest import CPU_FORMS, to_numpy

from keras_transformer.layers import Dropout
from keras_transformer.layers.dropout import generator_seed, hash_bits


def numpy_mix(h):
    h = h.astype(np.uint64)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def numpy_hash_bits(size, seed):
    """The documented hash, in 64-bit numpy arithmetic reduced mod 2**32."""
    k0 = numpy_mix(np.array(seed[0] ^ 0x9E3779B9, np.uint64))
    k1 = numpy_mix((np.uint64(seed[1]) + k0) & 0xFFFFFFFF)
    index = np.arange(size, dtype=np.uint64)
    return numpy_mix((numpy_mix(index ^ k0) + k1) & 0xFFFFFFFF)


@pytest.mark.parametrize("seed", [(0, 0), (7, 1), (2**32 - 1, 123456789)])
def test_hash_bits_match_an_independent_numpy_computation(seed):
    bits = to_numpy(hash_bits((3, 5, 7), np.array(seed, dtype="uint32")))
    # Keras holds "uint32" as int64 on torch, which lacks uint32 shifts.
    assert bits.dtype == (np.int64 if keras.backend.backend() == "torch" else np.uint32)
    np.testing.assert_array_equal(bits.reshape(-1), numpy_hash_bits(105, seed))


@pytest.mark.skipif(
    keras.backend.backend() == "torch", reason="decoding and training run eagerly on torch"
)
def test_hash_bits_under_a_traced_function_with_unknown_shape():
    seed = np.array([3, 4], dtype="uint32")
    expected = numpy_hash_bits(6 * 11, (3, 4)).reshape(6, 11)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        traced = tf.function(
            lambda x: hash_bits(tf.shape(x), seed),
            input_signature=[tf.TensorSpec((None, None), tf.float32)],
        )
    else:
        import jax

        traced = jax.jit(lambda x: hash_bits(x.shape, seed))
    np.testing.assert_array_equal(to_numpy(traced(np.zeros((6, 11), "float32"))), expected)


TORCH_ONLY = pytest.mark.skipif(keras.backend.backend() != "torch", reason="a torch.Generator")
TORCH_GENERATOR = pytest.param("torch_generator", marks=TORCH_ONLY)
GENERATORS = ["hash", "keras", TORCH_GENERATOR]


@pytest.mark.parametrize("mask_generator", GENERATORS)
def test_drops_the_rate_and_scales_the_rest(mask_generator):
    rate, shape = 0.1, (40, 50, 100)
    layer = Dropout(rate, seed=1, mask_generator=mask_generator)
    outputs = to_numpy(layer(np.full(shape, 2.0, "float32"), training=True))
    kept = outputs != 0
    n = kept.size
    # Binomial(n, 0.9): 5 standard deviations.
    assert abs(kept.mean() - (1 - rate)) < 5 * np.sqrt(rate * (1 - rate) / n)
    np.testing.assert_allclose(outputs[kept], 2.0 / (1 - rate), rtol=1e-6)


@pytest.mark.parametrize("mask_generator", ["hash", TORCH_GENERATOR])
def test_masks_have_no_visible_correlation(mask_generator):
    layer = Dropout(0.5, seed=3, mask_generator=mask_generator)
    x = np.ones((200, 1000), "float32")
    first = to_numpy(layer(x, training=True)) != 0
    second = to_numpy(layer(x, training=True)) != 0  # the seed generator has advanced
    bound = 5 / np.sqrt(first.size)

    def correlation(a, b):
        return np.corrcoef(a.reshape(-1), b.reshape(-1))[0, 1]

    assert abs(correlation(first, second)) < bound  # consecutive calls
    # neighbours in a row
    assert abs(correlation(first[:, 1:], first[:, :-1])) < bound
    assert abs(correlation(first[1:], first[:-1])) < bound  # neighbours in a column
    # A different layer seed gives an unrelated mask.
    other = Dropout(0.5, seed=4, mask_generator=mask_generator)(x, training=True)
    other = to_numpy(other) != 0
    assert abs(correlation(first, other)) < bound


def test_same_seed_same_mask_and_inference_is_identity():
    x = np.random.default_rng(0).normal(size=(4, 9, 16)).astype("float32")
    first = to_numpy(Dropout(0.3, seed=5, mask_generator="hash")(x, training=True))
    again = to_numpy(Dropout(0.3, seed=5, mask_generator="hash")(x, training=True))
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(to_numpy(Dropout(0.3, seed=5)(x, training=False)), x)
    np.testing.assert_array_equal(to_numpy(Dropout(0.0)(x, training=True)), x)


def test_off_returns_the_tensor_itself_and_casts_other_dtypes_as_keras_does():
    x = keras.ops.ones((2, 3, 8))
    assert Dropout(0.3, seed=1)(x, training=False) is x
    assert Dropout(0.0)(x, training=True) is x
    # Another dtype goes through Keras' `__call__`, which casts it to the compute dtype.
    cast = Dropout(0.3, dtype="mixed_bfloat16")(x, training=False)
    assert keras.backend.standardize_dtype(cast.dtype) == "bfloat16"
    np.testing.assert_array_equal(to_numpy(keras.ops.cast(cast, "float32")), to_numpy(x))
    # `training=None` is left to Keras, which resolves it from the enclosing call.

    class Outer(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.inner = Dropout(0.5, seed=2, mask_generator="hash")

        def call(self, inputs, training=None):
            return self.inner(inputs)  # no `training`: inherited from `Outer`'s call

    dropped = to_numpy(Outer()(x, training=True))
    assert 0 < np.mean(dropped == 0) < 1


@pytest.mark.parametrize("mask_generator", GENERATORS)
def test_a_given_training_flag_gives_what_keras_layer_call_gives(mask_generator):
    x = np.random.default_rng(1).normal(size=(3, 5, 8)).astype("float32")
    direct, through_keras = (Dropout(0.4, seed=9, mask_generator=mask_generator) for _ in "ab")
    for _ in range(2):  # the second call draws from the advanced seed state
        np.testing.assert_array_equal(
            to_numpy(direct(keras.ops.convert_to_tensor(x), training=True)),
            to_numpy(keras.layers.Layer.__call__(through_keras, x, training=True)),
        )
    np.testing.assert_array_equal(
        to_numpy(direct.seed_generator.state), to_numpy(through_keras.seed_generator.state)
    )


@pytest.mark.parametrize("seed", [(0, 0), (11, 0), (7, 2**32 - 1), (2**32 - 1, 123456789)])
def test_generator_seed_is_the_documented_hash_of_both_words(seed):
    expected = numpy_mix((numpy_mix(np.uint64(seed[0] ^ 0x9E3779B9)) + seed[1]) & 0xFFFFFFFF)
    assert generator_seed(np.array(seed, dtype="int64")) == int(expected)


@TORCH_ONLY
def test_torch_seed_state_stays_on_the_cpu_whatever_the_default_device():
    # "meta" stands in for an accelerator: were the seed read from the default device, no
    # value could be read, as none can from a GPU without waiting for it.
    x = keras.ops.ones((4, 6))
    with keras.device("meta"):
        layer = Dropout(0.5, seed=4)
        outputs = layer(x, training=True)
    assert layer.seed_generator.state.value.device.type == "cpu"
    np.testing.assert_array_equal(to_numpy(layer.seed_generator.state), [4, 1])
    assert 0 < np.mean(to_numpy(outputs) == 0) < 1


def test_mask_of_a_bfloat16_input_keeps_the_dtype():
    x = keras.ops.ones((8, 16), dtype="bfloat16")
    layer = Dropout(0.25, seed=0, mask_generator="hash", dtype="mixed_bfloat16")
    outputs = layer(x, training=True)
    assert keras.backend.standardize_dtype(outputs.dtype) == "bfloat16"
    values = np.unique(to_numpy(keras.ops.cast(outputs, "float32")))
    np.testing.assert_allclose(values, [0.0, 1 / 0.75], rtol=1e-2)


def test_config_round_trip_and_bad_arguments():
    layer = Dropout(0.2, seed=3, mask_generator="hash", name="drop")
    clone = Dropout.from_config(layer.get_config())
    assert (clone.rate, clone.seed, clone.mask_generator, clone.name) == (0.2, 3, "hash", "drop")
    with pytest.raises(ValueError, match=r"rate.*Received: rate=1\.0"):
        Dropout(1.0)
    with pytest.raises(ValueError, match=r"mask_generator.*Received: mask_generator='philox'"):
        Dropout(0.1, mask_generator="philox")
    if keras.backend.backend() != "torch":
        backend = keras.backend.backend()
        with pytest.raises(ValueError, match=rf"torch_generator.*PyTorch.*backend \"{backend}\""):
            Dropout(0.1, mask_generator="torch_generator")


@CPU_FORMS
@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow's XLA switch")
def test_auto_uses_the_hash_under_xla_and_keras_elsewhere_on_tensorflow():
    import tensorflow as tf

    x = np.ones((64, 129), "float32")

    def masks(jit_compile):
        layer = Dropout(0.5, seed=9)  # mask_generator="auto"
        seed = layer.seed_generator.state.numpy()  # the seed of the first call
        kept = tf.function(lambda v: layer(v, training=True), jit_compile=jit_compile)(x)
        hashed = numpy_hash_bits(x.size, seed.astype("uint32")).reshape(x.shape) >= 2**31
        stock = keras.random.dropout(x, 0.5, seed=keras.random.SeedGenerator(9))
        return kept.numpy() != 0, hashed, to_numpy(stock) != 0

    kept, hashed, _ = masks(jit_compile=True)
    np.testing.assert_array_equal(kept, hashed)
    kept, hashed, stock = masks(jit_compile=False)
    np.testing.assert_array_equal(kept, stock)
    assert abs(np.corrcoef(kept.reshape(-1), hashed.reshape(-1))[0, 1]) < 5 / np.sqrt(x.size)
    eager = to_numpy(Dropout(0.5, seed=9)(x, training=True)) != 0
    np.testing.assert_array_equal(eager, kept)  # eager TensorFlow: the same masks


@CPU_FORMS
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the JAX default")
@pytest.mark.parametrize("jit", [False, True])
def test_auto_uses_the_hash_on_jax(jit):
    import jax

    rate, x = 0.3, np.full((64, 128), 2.0, "float32")
    layer = Dropout(rate, seed=9)  # mask_generator="auto"
    seed = to_numpy(layer.seed_generator.state).astype("uint32")  # the seed of the first call
    if jit:  # the seed generator's state goes in as an argument, as in a training step
        call = jax.jit(lambda t, n, v: layer.stateless_call(t, n, v, training=True)[0])
        values = [
            [v.value for v in vs]
            for vs in (layer.trainable_variables, layer.non_trainable_variables)
        ]
        outputs = call(*values, x)
    else:
        outputs = layer(x, training=True)
    kept = numpy_hash_bits(x.size, seed).reshape(x.shape) >= round(rate * 2**32)
    np.testing.assert_array_equal(
        to_numpy(outputs), np.where(kept, np.float32(2.0) / np.float32(1 - rate), np.float32(0))
    )


@TORCH_ONLY
def test_auto_on_torch_seeds_a_generator_from_the_saved_seed_state():
    import torch

    rate = 0.3
    x = torch.tensor(np.random.default_rng(0).normal(size=(6, 7, 9)), dtype=torch.float32)
    x.requires_grad_(True)
    layer = Dropout(rate, seed=11)  # mask_generator="auto"
    masks = []
    for _ in range(2):
        seed = to_numpy(layer.seed_generator.state).astype(np.uint64)  # this call's seed
        # The documented seed: the two words mixed by MurmurHash3's finalizer.
        mixed = numpy_mix((numpy_mix(seed[0] ^ np.uint64(0x9E3779B9)) + seed[1]) & 0xFFFFFFFF)
        generator = torch.Generator().manual_seed(int(mixed))
        keep = torch.empty_like(x).bernoulli_(1 - rate, generator=generator).numpy() != 0
        outputs = layer(x, training=True)
        scale = np.float32(1.0) / np.float32(1 - rate)
        np.testing.assert_allclose(
            to_numpy(outputs), np.where(keep, x.detach().numpy() * scale, 0), rtol=1e-6
        )
        (gradient,) = torch.autograd.grad(outputs.sum(), x)
        np.testing.assert_allclose(gradient.numpy(), np.where(keep, scale, 0), rtol=1e-6)
        masks.append(keep)
    assert not np.array_equal(*masks)  # the seed state advanced
    # Unaffected by the global generator a resumed run cannot restore.
    torch.manual_seed(123)
    again = Dropout(rate, seed=11)
    np.testing.assert_array_equal(to_numpy(again(x, training=True)) != 0, masks[0])
