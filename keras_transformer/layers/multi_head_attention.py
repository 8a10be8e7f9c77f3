"""Multi-head scaled dot-product attention (paper sections 3.2.1 and 3.2.2)."""

import contextlib
import math

import keras
import numpy as np
from keras import ops

from keras_transformer import backend
from keras_transformer.layers.adaptable_einsum_dense import AdaptableEinsumDense
from keras_transformer.layers.cached_attention import CachedAttention
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.kernel_matmul import add_bias, int8_matmul, is_int8
from keras_transformer.layers.masks import MASKED_SCORE, causal_attention_mask, merge_masks
from keras_transformer.layers.matrix_glorot_uniform import MatrixGlorotUniform
from keras_transformer.layers.utils import clone_initializer, current_thread_value, thread_value


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(CachedAttention):
    """Multi-head attention with a key/value cache for incremental decoding.

    Implements `MultiHead(Q, K, V) = Concat(head_1..head_h) W^O` with
    `head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)` and
    `Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V` (paper 3.2.1-3.2.2).
    The query/key size `d_k` and the value size `d_v` are independent, as
    Table 3 row (B) varies `d_k` alone.

    Scores, masking and the softmax are computed in float32 whatever the
    compute dtype, so masks are safe under `mixed_float16`/`mixed_bfloat16`.

    The weights live in per-head `EinsumDense` sublayers (`query_dense`,
    `key_dense`, `value_dense`: (d_model, h, d_k or d_v) kernels;
    `output_dense`: (h, d_v, d_model)), but `call` applies them as 2-D
    matmuls: self-attention projects Q, K and V with one matmul through the
    concatenated kernels, cross-attention K and V with another, and
    `1 / sqrt(d_k)` is folded into the query kernel. Projections quantized
    by `model.quantize("int8")` (Keras' int8 `EinsumDense`: per-output
    scales) are applied the same way, as int8 matmuls (`int8_matmul`).

    Its decoding cache keeps the contract of `CachedAttention` ("Cache
    contract"): `initial_cache` gives the growing self-attention
    `(key, value)` buffers, `compute_key_value` the fixed cross-attention
    keys and values.

    Args:
        num_heads: int. Number of heads `h`.
        key_dim: int. Size `d_k` of each query/key head.
        value_dim: int. Size `d_v` of each value head. Defaults to `key_dim`.
        output_dim: int. Size of the output. Defaults to the query's last
            dimension (`d_model`).
        dropout: float. Dropout on the attention weights. The paper uses none
            (0.0); it is an option.
        use_bias: bool. Whether the projections have biases. The paper's
            `W^Q`, `W^K`, `W^V`, `W^O` have none (default `False`).
        kernel_initializer: initializer for the projection kernels: a Keras
            initializer (`EinsumDense` gives `"glorot_uniform"` the fans of
            each projection's matrix), or `"xavier_fused_qkv"`: `W^Q`, `W^K`,
            `W^V` drawn as one (d_model, h * (2 d_k + d_v)) Xavier matrix, as
            fairseq does, and `W^O` Xavier.
        bias_initializer: initializer for the projection biases.
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        query: (batch, query_len, d_model) tensor.
        key_value: (batch, key_len, d_kv) tensor for keys and values. `None`
            means self-attention (`key_value = query`).
        attention_mask: boolean tensor broadcastable to
            (batch, query_len, key_len); `True` means "may attend".
        use_causal_mask: bool. Let query `i` attend only to key positions
            `<= i` (offset by `cache_index` when decoding with a cache).
        cache: optional `(key, value)` tuple of projected keys and values, of
            shapes (batch, num_heads, cache_len, key_dim) and
            (batch, num_heads, cache_len, value_dim): heads first, the layout
            the attention products read without a copy.
            With `cache_index=None` the cache is used as it is and `key_value`
            is ignored: cross-attention keys/values computed once per source
            by `compute_key_value`. Such a cache may have fewer rows than
            `query`, `batch / g`: then query rows `i * g ... i * g + g - 1`
            (the beams of source `i`) all attend to cache row `i`, and
            `attention_mask` has the cache's rows.
            With an integer `cache_index` (may be a scalar tensor) this is a
            self-attention cache that grows one step at a time: the keys and
            values of `query` are written at positions `cache_index, ...` and
            attention runs over the cache (future slots masked by the causal
            mask).
        cache_index: see `cache`.
        return_attention_scores: bool. Also return the attention weights,
            (batch, num_heads, query_len, key_len), float32.
        training: bool. Enables attention dropout.

    Returns:
        The output, (batch, query_len, output_dim); followed by the updated
        `(key, value)` cache when a growing cache (`cache_index` set) is given,
        and by the attention weights when `return_attention_scores=True`, in
        that order.

    Example:

    >>> attention = MultiHeadAttention(num_heads=8, key_dim=64)
    >>> x = keras.random.normal((2, 10, 512))
    >>> attention(x, use_causal_mask=True).shape
    (2, 10, 512)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        output_dim=None,
        dropout=0.0,
        use_bias=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("key_dim", key_dim)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
        if value_dim is not None and (not isinstance(value_dim, int) or value_dim <= 0):
            raise ValueError(
                f"`value_dim` must be a positive int. Received: value_dim={value_dim!r}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout!r}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim or key_dim
        self.output_dim = output_dim
        self.dropout = dropout
        self.use_bias = use_bias
        if kernel_initializer == "xavier_fused_qkv":
            self.kernel_initializer = kernel_initializer
        else:
            self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = False

    def _kernel_initializer(self, name):
        """A fresh initializer for the kernel of projection `name`."""
        if self.kernel_initializer == "xavier_fused_qkv":
            if name == "output":
                return keras.initializers.GlorotUniform()
            fused = self.num_heads * (2 * self.key_dim + self.value_dim)
            return MatrixGlorotUniform(input_axes=1, fan_out=fused)
        return clone_initializer(self.kernel_initializer)

    def _projection(self, equation, output_shape, bias_axes, name):
        return AdaptableEinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self.use_bias else None,
            kernel_initializer=self._kernel_initializer(name),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, query_shape, key_value_shape=None):
        key_value_shape = query_shape if key_value_shape is None else key_value_shape
        output_dim = self.output_dim or query_shape[-1]
        # W^Q, W^K: d_model -> h x d_k; W^V: d_model -> h x d_v; W^O: h x d_v -> d_model.
        self.query_dense = self._projection(
            "btd,dhk->bthk", (None, self.num_heads, self.key_dim), "hk", "query"
        )
        self.key_dense = self._projection(
            "btd,dhk->bthk", (None, self.num_heads, self.key_dim), "hk", "key"
        )
        self.value_dense = self._projection(
            "btd,dhk->bthk", (None, self.num_heads, self.value_dim), "hk", "value"
        )
        self.output_dense = self._projection("bthk,hkd->btd", (None, output_dim), "d", "output")
        self.query_dense.build(query_shape)
        self.key_dense.build(key_value_shape)
        self.value_dense.build(key_value_shape)
        self.output_dense.build((query_shape[0], query_shape[1], self.num_heads, self.value_dim))
        self.dropout_layer = Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def initial_cache(self, rows, max_length):
        """Empty self-attention `(key, value)` buffers (the growing cache).

        Returns (rows, num_heads, max_length, key_dim) and
        (rows, num_heads, max_length, value_dim) zeros in the compute dtype.
        """
        return tuple(
            ops.zeros((rows, self.num_heads, max_length, dim), dtype=self.compute_dtype)
            for dim in (self.key_dim, self.value_dim)
        )

    def compute_key_value(self, key_value):
        """Projects `key_value` once, for a static cross-attention cache (the fixed cache).

        Returns `(key, value)` of shapes (batch, num_heads, key_len, key_dim)
        and (batch, num_heads, key_len, value_dim).
        """
        key_heads, value_heads = self._project(key_value, (self.key_dense, self.value_dense))
        return key_heads, value_heads

    def call(
        self,
        query,
        key_value=None,
        attention_mask=None,
        use_causal_mask=False,
        cache=None,
        cache_index=None,
        return_attention_scores=False,
        training=None,
    ):
        query_rows = None
        if cache is not None and cache_index is None:
            key_heads, value_heads = cache  # static (cross-attention) cache
            # The cache may hold one row per source for `g` consecutive query rows
            # (the beams of that source): each source's beams are attended to as
            # g * query_len queries of one row, so its keys and values are read
            # once per step instead of once per beam.
            query_rows = ops.shape(query)[:2]  # (batch, query_len)
            query = ops.reshape(query, (ops.shape(key_heads)[0], -1, ops.shape(query)[-1]))
            (query_heads,) = self._project(query, (self.query_dense,))
        else:
            if key_value is None:
                # Self-attention: Q, K and V in one matmul.
                query_heads, key_heads, value_heads = self._project(
                    query, (self.query_dense, self.key_dense, self.value_dense)
                )  # (batch, heads, len, d_k), twice, and (batch, heads, len, d_v)
            else:
                (query_heads,) = self._project(query, (self.query_dense,))
                key_heads, value_heads = self._project(
                    key_value, (self.key_dense, self.value_dense)
                )  # (batch, heads, k_len, d_k), (batch, heads, k_len, d_v)
            if cache is not None:
                # Append this step's keys/values to the cache, or write them into a
                # fixed buffer where the compiler needs fixed shapes (JAX).
                key_cache, value_cache = cache
                key_heads = backend.update_cache(key_cache, key_heads, cache_index)
                value_heads = backend.update_cache(value_cache, value_heads, cache_index)
                cache = (key_heads, value_heads)

        mask = None
        if attention_mask is not None:
            mask = ops.expand_dims(ops.cast(attention_mask, "bool"), axis=1)  # heads axis
        if use_causal_mask:
            causal = causal_attention_mask(
                ops.shape(query_heads)[2],
                ops.shape(key_heads)[2],
                query_offset=0 if cache_index is None else cache_index,
            )
            mask = merge_masks(mask, causal[None, None])

        outputs, weights = self._attend(query_heads, key_heads, value_heads, mask, training)
        if query_rows is not None:
            outputs = ops.reshape(outputs, (*query_rows, ops.shape(outputs)[-1]))
            if return_attention_scores:
                weights = self._ungroup_weights(weights, query_rows)
        results = (outputs,)
        if cache is not None and cache_index is not None:
            results += (cache,)
        if return_attention_scores:
            results += (weights,)
        return results[0] if len(results) == 1 else results

    def _ungroup_weights(self, weights, query_rows):
        """(sources, h, g * q, t) weights of grouped queries -> (sources * g, h, q, t)."""
        sources, _, _, key_len = ops.shape(weights)
        grouped = ops.reshape(weights, (sources, self.num_heads, -1, query_rows[1], key_len))
        grouped = ops.transpose(grouped, (0, 2, 1, 3, 4))  # (sources, g, h, q, t)
        return ops.reshape(grouped, (query_rows[0], self.num_heads, query_rows[1], key_len))

    def _matrix(self, dense):
        """The kernel of `dense` as a matrix, its bias as a vector and its int8 scales.

        Input projections' (d_model, heads, head_dim) kernels become
        (d_model, heads * head_dim) and the output projection's
        (heads, d_v, output_dim) kernel (heads * d_v, output_dim): the same
        weights, applied with plain matmuls. One 2-D matmul (whose kernel
        gradient is one matmul too) is faster than a batched einsum that
        broadcasts the kernel over the batch and sums its gradient back.

        Returns `(kernel, bias, scale)`: the kernel in the compute dtype and
        `scale` None, or for an int8 `dense` its int8 kernel and the
        (columns,) scales that divide its products.
        """
        scale = None
        if is_int8(dense):
            kernel = ops.convert_to_tensor(dense.kernel)
            scale = ops.reshape(ops.convert_to_tensor(dense.kernel_scale), (-1,))
        else:
            kernel = ops.cast(dense.kernel, self.compute_dtype)
        if dense is self.output_dense:
            kernel = ops.reshape(kernel, (-1, kernel.shape[-1]))
        else:
            kernel = ops.reshape(kernel, (kernel.shape[0], -1))
        bias = None
        if self.use_bias:
            bias = ops.reshape(ops.cast(dense.bias, self.compute_dtype), (-1,))
        if dense is self.query_dense:
            # Q / sqrt(d_k) from scaled weights: one pass over the (small) kernel
            # instead of over every query, and float16 scores stay in range. Exact
            # when d_k is a power of 4 (a power-of-two scale), as in the paper's 64.
            factor = ops.cast(1.0 / math.sqrt(self.key_dim), self.compute_dtype)
            if scale is None:
                kernel = kernel * factor
            else:  # products are divided by the scale
                scale = scale / ops.cast(factor, scale.dtype)
            bias = None if bias is None else bias * factor
        return kernel, bias, scale

    def _matrices(self, denses):
        """The matrices of `denses` side by side: one (d_in, sum of widths) kernel, bias, scale.

        Inside `fixed_matrices` they come from its memo, computed once outside the
        decoding loop.
        """
        memo = current_thread_value(self)
        if memo is not None and denses in memo:
            return memo[denses]
        kernels, biases, scales = zip(*(self._matrix(dense) for dense in denses), strict=True)
        if any(scale is None for scale in scales) and any(s is not None for s in scales):
            raise ValueError(f"{self.name}: some projections are int8, others are not.")

        def joined(parts, axis=0):
            if parts[0] is None:
                return None
            return parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=axis)

        return joined(kernels, axis=-1), joined(biases), joined(scales)

    @contextlib.contextmanager
    def fixed_matrices(self):
        """Computes the projection matrices once, on entry, for the calls made inside.

        A decoding loop applies the same weights at every step. Built inside the
        loop, the reshaped, scaled and concatenated kernels of `_matrix` are
        recomputed at every step of a TensorFlow graph (XLA hoists them itself).
        Enter this in the same trace as the loop, before it; the values are the
        same either way. Only calls made in the thread that entered see them.
        """
        if not self.built:
            raise ValueError("`fixed_matrices` needs a built layer: call it once first.")
        q, k, v, o = self.query_dense, self.key_dense, self.value_dense, self.output_dense
        groups = ((q, k, v), (q,), (k, v), (o,))
        fixed = {denses: self._matrices(denses) for denses in groups}
        with thread_value(self, fixed):  # not an attribute: Keras would track it as state
            yield

    def _project(self, inputs, denses):
        """Projects `inputs` (batch, length, d_in) through `denses` with one matmul.

        Returns one (batch, num_heads, length, head_dim) tensor per dense;
        queries come out divided by sqrt(d_k). Heads come first so that the
        attention products, and a decoding cache that grows along `length`,
        need no transposed copy of the keys and values at each step.
        """
        kernel, bias, scale = self._matrices(tuple(denses))
        # Not from `dense.kernel`: with LoRA, Keras' property computes the merged kernel.
        sizes = [
            self.num_heads * (self.value_dim if dense is self.value_dense else self.key_dim)
            for dense in denses
        ]
        outputs = self._product(inputs, kernel, scale)  # (batch, length, sum of heads * head_dim)
        if bias is not None:
            outputs = add_bias(outputs, bias)
        parts = (
            [outputs]
            if len(sizes) == 1
            else ops.split(outputs, [int(i) for i in np.cumsum(sizes[:-1])], axis=-1)
        )
        leading = ops.shape(inputs)[:-1]  # (batch, length)
        return [
            ops.transpose(
                ops.reshape(part, (*leading, self.num_heads, size // self.num_heads)),
                (0, 2, 1, 3),
            )
            for part, size in zip(parts, sizes, strict=True)
        ]

    def _attend(self, query_heads, key_heads, value_heads, mask, training):
        # `query_heads` are already divided by sqrt(d_k) (see `_matrix`).
        scores = ops.einsum("bhqk,bhtk->bhqt", query_heads, key_heads)  # (batch, h, q, t)
        scores = ops.cast(scores, "float32")
        if mask is not None:
            scores = ops.where(mask, scores, MASKED_SCORE)
        # Over one key (a cached search's first step) the softmax is 1 even where masked
        # (MASKED_SCORE is finite), and Keras' softmax warns about a size-1 axis.
        single_key = scores.shape[-1] == 1
        weights = ops.ones_like(scores) if single_key else ops.softmax(scores, axis=-1)  # float32
        dropped = self.dropout_layer(ops.cast(weights, self.compute_dtype), training=training)
        context = ops.matmul(dropped, value_heads)  # (batch, h, q, d_v)
        context = ops.transpose(context, (0, 2, 1, 3))  # (batch, q, h, d_v)
        leading = ops.shape(context)[:2]  # (batch, q)
        context = ops.reshape(context, (*leading, self.num_heads * self.value_dim))
        kernel, bias, scale = self._matrices((self.output_dense,))  # (h * d_v, output_dim)
        outputs = self._product(context, kernel, scale)  # (batch, q, output_dim)
        return (outputs if bias is None else add_bias(outputs, bias)), weights

    @staticmethod
    def _product(inputs, kernel, scale):
        """`inputs @ kernel`; an int8 product where `scale` is given (see `_matrix`)."""
        return ops.matmul(inputs, kernel) if scale is None else int8_matmul(inputs, kernel, scale)

    def compute_output_shape(self, query_shape, key_value_shape=None):
        return (*query_shape[:-1], self.output_dim or query_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "output_dim": self.output_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": (
                    self.kernel_initializer
                    if isinstance(self.kernel_initializer, str)
                    else keras.initializers.serialize(self.kernel_initializer)
                ),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
