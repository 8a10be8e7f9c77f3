"""Inverted dropout with masks from a counter-based integer hash under XLA (paper 5.4)."""

import keras
from keras import ops

MASK_GENERATORS = ("auto", "hash", "keras")

# Odd 32-bit constants of MurmurHash3's finalizer and the golden ratio.
_GOLDEN = 0x9E3779B9
_MIX_1 = 0x85EBCA6B
_MIX_2 = 0xC2B2AE35


def _mix(h):
    """MurmurHash3's 32-bit finalizer: a bijection of uint32 with full avalanche."""
    h = ops.bitwise_xor(h, ops.right_shift(h, 16))
    h = ops.multiply(h, ops.convert_to_tensor(_MIX_1, "uint32"))
    h = ops.bitwise_xor(h, ops.right_shift(h, 13))
    h = ops.multiply(h, ops.convert_to_tensor(_MIX_2, "uint32"))
    return ops.bitwise_xor(h, ops.right_shift(h, 16))


def hash_bits(shape, seed):
    """Pseudo-random uint32 of `shape`: element `i` is `mix(mix(i ^ k0) + k1)`.

    `k0` and `k1` are hashed from the two words of `seed`, so seeds that differ
    by one (a `SeedGenerator` advances by one per call) give unrelated keys.
    Each element costs a handful of integer ops that XLA fuses into the
    surrounding elementwise code.

    Args:
        shape: tuple of ints or scalar tensors.
        seed: (2,) integer tensor.

    Returns:
        uint32 tensor of `shape`.
    """
    seed = ops.cast(seed, "uint32")
    k0 = _mix(ops.bitwise_xor(seed[0], ops.convert_to_tensor(_GOLDEN, "uint32")))
    k1 = _mix(ops.add(seed[1], k0))
    size = 1
    for dim in shape:
        size = size * dim
    # int32 positions (TensorFlow has no uint32 range); 2**31 elements is plenty.
    index = ops.cast(ops.reshape(ops.arange(size, dtype="int32"), shape), "uint32")
    return _mix(ops.add(_mix(ops.bitwise_xor(index, k0)), k1))


def _tensorflow_compiles_with_xla():
    """Whether TensorFlow is tracing a function that XLA compiles (`jit_compile=True`)."""
    import tensorflow as tf

    if tf.executing_eagerly():
        return False
    try:  # a private TensorFlow module; without it, Keras' masks are used
        from tensorflow.python.ops import control_flow_util
    except ImportError:
        return False
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


@keras.saving.register_keras_serializable(package="keras_transformer")
class Dropout(keras.layers.Layer):
    """Inverted dropout (Srivastava et al., 2014) with a cheap mask under XLA.

    Paper 5.4: "We apply dropout to the output of each sub-layer, before it is
    added to the sub-layer input and normalized. In addition, we apply dropout
    to the sums of the embeddings and the positional encodings". The function
    is Keras' `Dropout`: each element is zeroed with probability `rate` and the
    others are scaled by `1 / (1 - rate)`. Only the source of the random mask
    differs. JAX's default generator (threefry) costs about 40 ms of a 500 ms
    training step of a 2+2-layer d_model 512 model on 2 CPU cores
    (`benchmarks/training_throughput.py`), because XLA cannot fuse its twenty
    rounds into the surrounding code; `mask_generator="hash"` keeps element
    `i` when a keyed integer hash of `i` (MurmurHash3's finalizer, twice) is
    at least `rate * 2**32`, which XLA fuses: the step's masks then cost
    about 1 ms (docs/benchmarks.md). TensorFlow's Philox masks cost about as
    much inside XLA-compiled functions (`jit_compile=True`), so the default
    uses the hash there too.
    Seeds come from a `keras.random.SeedGenerator`, as in Keras' layer, so
    they are saved, restored and advanced the same way.

    Args:
        rate: float in [0, 1). Fraction of the inputs to drop.
        seed: int or None. Seed of the layer's `SeedGenerator`.
        mask_generator: `"auto"` (default: `"hash"` on JAX and in TensorFlow
            functions compiled by XLA, `"keras"` in other TensorFlow code,
            where the stateless Philox kernel is as fast as the hash and has
            GPU kernels, which TensorFlow's uint32 arithmetic may lack),
            `"hash"`, or `"keras"` (`keras.random.dropout`).
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: tensor of any shape.
        training: bool. Drops only when True.

    Returns:
        A tensor of the shape and dtype of `inputs`.

    Example:

    >>> layer = Dropout(0.1, seed=0)
    >>> outputs = layer(keras.ops.ones((2, 5, 8)), training=True)
    """

    def __init__(self, rate, seed=None, mask_generator="auto", **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"`rate` must be in [0, 1). Received: rate={rate!r}")
        if mask_generator not in MASK_GENERATORS:
            raise ValueError(
                f"`mask_generator` must be one of {MASK_GENERATORS}. "
                f"Received: mask_generator={mask_generator!r}"
            )
        self.rate = float(rate)
        self.seed = seed
        self.mask_generator = mask_generator
        if self.rate > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True
        self.built = True

    def _uses_hash(self):
        if self.mask_generator != "auto":
            return self.mask_generator == "hash"
        if keras.backend.backend() == "tensorflow":
            return _tensorflow_compiles_with_xla()
        return True

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        if not self._uses_hash():
            return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)
        threshold = ops.convert_to_tensor(round(self.rate * 2**32), "uint32")
        bits = hash_bits(ops.shape(inputs), self.seed_generator.next())
        keep = ops.greater_equal(bits, threshold)
        scaled = inputs / ops.cast(1.0 - self.rate, inputs.dtype)
        return ops.where(keep, scaled, ops.zeros_like(inputs))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed, "mask_generator": self.mask_generator})
        return config
