"""Inverted dropout with masks that cost little on each backend (paper 5.4)."""

import functools

import keras
from keras import ops

from keras_transformer import backend

MASK_GENERATORS = ("auto", "hash", "torch_generator", "keras")

# Odd 32-bit constants of MurmurHash3's finalizer and the golden ratio.
_GOLDEN = 0x9E3779B9
_MIX_1 = 0x85EBCA6B
_MIX_2 = 0xC2B2AE35
_UINT32 = 0xFFFFFFFF


def _mix(h):
    """MurmurHash3's 32-bit finalizer: a bijection of uint32 with full avalanche."""
    h = ops.bitwise_xor(h, ops.right_shift(h, 16))
    h = backend.wrap_uint32(ops.multiply(h, ops.convert_to_tensor(_MIX_1, "uint32")))
    h = ops.bitwise_xor(h, ops.right_shift(h, 13))
    h = backend.wrap_uint32(ops.multiply(h, ops.convert_to_tensor(_MIX_2, "uint32")))
    return ops.bitwise_xor(h, ops.right_shift(h, 16))


def _keys(seed):
    """The two uint32 keys hashed from the two words of a (2,) integer seed."""
    seed = backend.wrap_uint32(ops.cast(seed, "uint32"))
    k0 = _mix(ops.bitwise_xor(seed[0], ops.convert_to_tensor(_GOLDEN, "uint32")))
    return k0, _mix(backend.wrap_uint32(ops.add(seed[1], k0)))


def _mix_int(h):
    """`_mix` of a Python int in [0, 2**32)."""
    h ^= h >> 16
    h = (h * _MIX_1) & _UINT32
    h ^= h >> 13
    h = (h * _MIX_2) & _UINT32
    return h ^ (h >> 16)


def generator_seed(seed):
    """The 32-bit seed of a `torch_generator` mask: `hash_bits`' key `k1` of `seed`.

    Computed in Python from the seed's two words, as `_keys` computes it with
    tensor operations (about twenty tiny ones): a seed held on the CPU costs
    no device operation and no wait for one.

    Args:
        seed: (2,) integer array or tensor, on the CPU.

    Returns:
        int in [0, 2**32).
    """
    first, second = (int(word) & _UINT32 for word in ops.convert_to_numpy(seed))
    return _mix_int((second + _mix_int(first ^ _GOLDEN)) & _UINT32)


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
        uint32 tensor of `shape` (int64 holding uint32 values on torch).
    """
    size = 1
    for dim in shape:
        size = size * dim
    # int32 positions (TensorFlow has no uint32 range); 2**31 elements is plenty.
    index = ops.cast(ops.reshape(ops.arange(size, dtype="int32"), shape), "uint32")
    return keyed_hash(index, seed)


def keyed_hash(values, seed):
    """`mix(mix(v ^ k0) + k1)` of each element `v` of `values`: `hash_bits` of given values.

    The same values and seed give the same bits on every backend.

    Args:
        values: uint32 tensor (int64 holding uint32 values on torch), any shape.
        seed: (2,) integer tensor, hashed into the keys `k0`, `k1`.

    Returns:
        uint32 tensor of the shape of `values`.
    """
    k0, k1 = _keys(seed)
    return _mix(backend.wrap_uint32(ops.add(_mix(ops.bitwise_xor(values, k0)), k1)))


def torch_generator_dropout(inputs, rate, seed):
    """PyTorch dropout whose mask comes from a generator seeded by `seed`.

    Keras' torch dropout draws from torch's global generator when the layer
    has no fixed seed; that state is shared with everything else in the
    process and cannot be put back exactly when a run resumes. Here each call
    seeds its own generator from `seed` (the layer's `SeedGenerator`, saved
    in checkpoints), draws one Bernoulli mask already scaled by
    `1 / (1 - rate)`, and multiplies: the same passes as torch's own dropout.

    Args:
        inputs: float torch tensor.
        rate: float in (0, 1).
        seed: (2,) integer tensor; its two words are mixed into one 32-bit seed.

    Returns:
        A tensor of the shape and dtype of `inputs`.
    """
    import torch

    generator = _seeded_generator()(seed, inputs.device)
    keep = 1.0 - rate
    mask = torch.empty_like(inputs).bernoulli_(keep, generator=generator).div_(keep)
    return inputs * mask


@functools.cache
def _seeded_generator():
    """`(seed, device) -> torch.Generator`, kept out of `torch.compile`'s tracing.

    A generator cannot be traced by torch.compile (as in Keras' own torch
    random ops); the wrapped function is made once, not at every call.
    """
    import torch

    def seeded(seed, device):
        return torch.Generator(device=device).manual_seed(generator_seed(seed))

    return torch.compiler.disable(seeded)


@keras.saving.register_keras_serializable(package="keras_transformer")
class Dropout(keras.layers.Layer):
    """Inverted dropout (Srivastava et al., 2014) with masks that cost little.

    Paper 5.4: "We apply dropout to the output of each sub-layer, before it is
    added to the sub-layer input and normalized. In addition, we apply dropout
    to the sums of the embeddings and the positional encodings". The function
    is Keras' `Dropout`: each element is zeroed with probability `rate` and the
    others are scaled by `1 / (1 - rate)`. Only the source of the random mask
    differs, chosen by `keras_transformer.backend` for a CPU. JAX's default
    generator (threefry) cannot be fused by XLA into the surrounding code;
    `mask_generator="hash"` keeps element `i` when a keyed integer hash of `i`
    (MurmurHash3's finalizer, twice) is at least `rate * 2**32`, a handful of
    integer ops that XLA fuses (JAX, and TensorFlow functions compiled by XLA).
    TensorFlow code that XLA does not compile runs one kernel per op, where
    the hash costs more than Keras' Philox draws. On torch, Keras' dropout draws from the
    process's global generator, which a resumed run cannot restore; there
    `"torch_generator"` (`torch_generator_dropout`) seeds a generator per call.
    Seeds come from a `keras.random.SeedGenerator`, as in Keras' layer, so
    they are saved, restored and advanced the same way.

    Args:
        rate: float in [0, 1). Fraction of the inputs to drop.
        seed: int or None. Seed of the layer's `SeedGenerator`.
        mask_generator: `"auto"` (default: the form `backend.fast_forms()`
            picks: on a CPU `"hash"` on JAX and in TensorFlow functions
            compiled by XLA; `"torch_generator"` on torch; `"keras"` in
            other TensorFlow code and on a GPU or TPU), `"hash"` (any
            backend), `"torch_generator"` (torch only), or `"keras"`
            (`keras.random.dropout`, any backend).
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: tensor of any shape.
        training: bool. Drops only when True.

    Returns:
        A tensor of the shape and dtype of `inputs`: `inputs` itself when the
        layer is off (`training=False` or rate 0) and `inputs` is already in
        the compute dtype.

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
        if mask_generator == "torch_generator":
            backend.require_torch('mask_generator="torch_generator"')
        self.rate = float(rate)
        self.seed = seed
        self.mask_generator = mask_generator
        if self.rate > 0:
            with backend.host_seed_scope():
                self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True
        self.built = True

    def __call__(self, inputs, training=None, **kwargs):
        # With the mode known (`training` given, or rate 0) and the inputs in the compute
        # dtype, Keras' work per call has nothing to do: `call` runs directly. That work is
        # Python run at every call, which torch's eager steps pay for dozens of dropouts per
        # step. `training=None` is resolved by Keras from the enclosing call, and an input
        # in another dtype is cast to the compute dtype there.
        if (
            not kwargs
            and (ops.is_tensor(inputs) or keras.utils.is_keras_tensor(inputs))
            and keras.backend.standardize_dtype(inputs.dtype) == self.compute_dtype
        ):
            if training is False or self.rate == 0:  # off: the inputs themselves
                return inputs
            if training is not None and ops.is_tensor(inputs):  # not a symbolic call
                return self.call(inputs, training=training)
        if training is not None:  # an explicit None would hide the enclosing call's value
            kwargs["training"] = training
        return super().__call__(inputs, **kwargs)

    def _resolved_generator(self):
        """The generator this call uses: `mask_generator`, with `"auto"` resolved."""
        if self.mask_generator != "auto":
            return self.mask_generator
        return backend.fast_forms().dropout

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        generator = self._resolved_generator()
        if generator == "keras":
            return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)
        if generator == "torch_generator":
            with backend.host_seed_scope():
                seed = self.seed_generator.next()
            return torch_generator_dropout(inputs, self.rate, seed)
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
