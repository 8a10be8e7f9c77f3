"""The cache contract: what an attention layer provides for cached (incremental) decoding."""

import contextlib

import keras


class CachedAttention(keras.layers.Layer):
    """Base of the attention layers a decoder can run one step at a time.

    `MultiHeadAttention` (paper 3.2) is one; another attention layer (a
    relative position bias, a different score) plugs into
    `TransformerDecoderBlock` (argument `self_attention`) and
    `Seq2SeqTransformer` (argument `decoder_self_attention`) by subclassing
    this class and keeping its contract. Greedy and beam search, the
    translator and the SavedModel export then decode with it unchanged.

    Cache contract:
        A layer's cache is a tuple of tensors, of one of two kinds:

        - **Growing** (self-attention). `initial_cache(rows, max_length)`
          returns it before the first step: (rows, heads, max_length, dim)
          tensors, positions on axis 2, one row per target row (a source's
          beams consecutive), in the compute dtype. `max_length` is 0 where
          the cache grows (`keras_transformer.backend.growing_cache`:
          TensorFlow, torch) and the buffer length on JAX. A call with
          `cache` and `cache_index` writes the entries of its queries at
          positions `cache_index, ...` with
          `keras_transformer.backend.update_cache` (it appends, or writes
          into the fixed buffer on JAX), attends over the cache with the
          causal mask offset by `cache_index` (positions not written yet are
          masked) and returns the new cache after the output. Searches
          reorder its rows to follow beams (`DecodingCache.follow_rows`), drop
          the rows of settled sources and, on JAX, append empty positions on
          axis 2 between stages: they need no more than this layout.
        - **Fixed** (cross-attention). `compute_key_value(key_value)` returns
          it, computed once from the encoder output, one row per source; a
          call with `cache` and `cache_index=None` reads it as it is and
          ignores `key_value`. Its rows may be fewer than the query's:
          `batch / g`, when `g` consecutive query rows (the beams of a source)
          share one source.

        Call signature used by the decoder block: `layer(query,
        key_value=None, attention_mask=None, use_causal_mask=False,
        cache=None, cache_index=None, return_attention_scores=False,
        training=None)`, returning the output (batch, query_len, d_model),
        then the updated cache (growing cache given), then the attention
        weights (batch, heads, query_len, key_len) when asked. Without a cache
        the call computes the same outputs over the whole sequence: cached
        decoding must equal that full recomputation.

        `fixed_matrices()` is a context manager entered once before a
        decoding loop; a layer may prepare per-call weight products in it.
        The default prepares nothing.

    `Seq2SeqTransformer.initialize_cache` collects the layers' caches into a
    `DecodingCache`: the self-attention caches as its `growing` part, the
    cross-attention caches and the source mask as its `fixed` part.
    """

    def initial_cache(self, rows, max_length):
        """The growing (self-attention) cache before the first step.

        Args:
            rows: int or scalar int tensor. Target rows decoded (batch * beams).
            max_length: int. Positions allocated: 0 where the cache grows.

        Returns:
            A tuple of (rows, heads, max_length, dim) tensors.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement `initial_cache` for cached decoding."
        )

    def compute_key_value(self, key_value):
        """The fixed (cross-attention) cache of `key_value` (batch, key_len, d_kv).

        Returns:
            A tuple of (batch, heads, key_len, dim) tensors.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement `compute_key_value` for cached decoding."
        )

    @contextlib.contextmanager
    def fixed_matrices(self):
        """Prepares weights once for the calls made inside (a decoding loop). Default: nothing."""
        yield
