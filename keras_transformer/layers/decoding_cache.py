"""The decoding cache, split by how its entries change from one step to the next."""

from typing import Any, NamedTuple

import keras
from keras import ops


class DecodingCache(NamedTuple):
    """What a decoder carries from one decoding step to the next.

    The entries are grouped by how they change, as the attention layers
    declare them (`keras_transformer.layers.CachedAttention`, "Cache
    contract"); a search reads that grouping, never entry names:

    - `growing`: the self-attention caches, from each layer's
      `initial_cache`. One row per target row (the beams of a source
      consecutive), positions on axis 2 of every (rows, heads, positions,
      head_dim) tensor. Each step writes its position; beam search reorders
      the rows to follow each beam's parent.
    - `fixed`: entries computed once per source before the loop (from the
      encoder output: each layer's `compute_key_value`, the source padding
      mask) and never changed. One row per source.

    A `NamedTuple`, so it is a loop variable of `keras.ops.while_loop` and
    `tf.while_loop` on every backend, and passes through `jax.jit` and
    `tf.function` as it is.

    Attributes:
        growing: nested tuples (or dicts) of tensors that grow with the step.
        fixed: nested dicts (or tuples) of tensors fixed for the whole search.

    Example:

    >>> cache = model.initialize_cache(encoder_outputs, source_ids, max_length=0)
    >>> logits, cache = model.decode(step_ids, cache, index)
    >>> cache = cache.follow_rows(parents)  # beams moved to their parents' rows
    """

    growing: Any
    fixed: Any

    def follow_rows(self, rows):
        """The cache with growing row `i` taken from row `rows[i]` (beams to their parents).

        Fixed entries are shared by a source's rows, so they stay as they are.
        """
        growing = keras.tree.map_structure(lambda t: ops.take(t, rows, axis=0), self.growing)
        return DecodingCache(growing, self.fixed)

    def keep_sources(self, sources, rows):
        """The cache of some sources only: growing rows `rows`, fixed rows `sources`.

        Args:
            sources: int (kept sources,) indices of the sources kept.
            rows: int (kept rows,) indices of their target rows (beams).
        """
        return DecodingCache(
            keras.tree.map_structure(lambda t: ops.take(t, rows, axis=0), self.growing),
            keras.tree.map_structure(lambda t: ops.take(t, sources, axis=0), self.fixed),
        )

    def extend(self, positions):
        """The cache with `positions` empty positions appended to every growing buffer.

        For fixed-length buffers (JAX, `keras_transformer.backend.growing_cache`)
        filled in stages: the next stage's steps write into the new positions.
        """
        padding = [[0, 0], [0, 0], [0, positions], [0, 0]]  # on the positions axis
        growing = keras.tree.map_structure(lambda t: ops.pad(t, padding), self.growing)
        return DecodingCache(growing, self.fixed)
