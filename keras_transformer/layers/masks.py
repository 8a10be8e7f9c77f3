"""Boolean attention masks shared by the attention layer and the blocks.

Convention used throughout the package: a mask is boolean and `True` means
"may attend". Masks are applied to float32 scores with `ops.where`, never by
adding a large negative number in the compute dtype, so they are safe under
`mixed_float16` and `mixed_bfloat16` (-1e9 overflows float16).
"""

from keras import ops

# Added to masked float32 scores before the softmax. Finite, so a row whose
# keys are all masked (an empty source) gives a uniform distribution, not NaN.
MASKED_SCORE = -1e9


def padding_mask(token_ids, pad_id=0):
    """Returns `True` where `token_ids` is a real token. Shape of `token_ids`."""
    return ops.not_equal(token_ids, pad_id)


def key_padding_attention_mask(key_padding_mask):
    """(batch, key_len) padding mask -> (batch, 1, key_len) attention mask."""
    return ops.expand_dims(ops.cast(key_padding_mask, "bool"), axis=1)


def causal_attention_mask(query_length, key_length, query_offset=0):
    """Lower-triangular mask of shape (query_length, key_length).

    Query `i` sits at absolute position `query_offset + i` and may attend to
    keys at positions `<= query_offset + i`. `query_offset` may be a scalar
    tensor (the decoding step inside a compiled loop).
    """
    query_positions = ops.arange(query_length, dtype="int32") + ops.cast(query_offset, "int32")
    key_positions = ops.arange(key_length, dtype="int32")
    return ops.greater_equal(query_positions[:, None], key_positions[None, :])


def merge_masks(*masks):
    """Logical AND of the masks that are not `None` (broadcasting)."""
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged
