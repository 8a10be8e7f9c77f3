"""Keras layers of the Transformer (paper section 3)."""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "AdaptableDense": "adaptable_dense",
        "AdaptableEinsumDense": "adaptable_einsum_dense",
        "CachedAttention": "cached_attention",
        "DecodingCache": "decoding_cache",
        "Dropout": "dropout",
        "FeedForward": "feed_forward",
        "LayerNormalization": "layer_normalization",
        "LearnedPositionEmbedding": "learned_position_embedding",
        "MultiHeadAttention": "multi_head_attention",
        "SinusoidalPositionEmbedding": "sinusoidal_position_embedding",
        "TokenEmbedding": "token_embedding",
        "TransformerDecoderBlock": "transformer_decoder_block",
        "TransformerEncoderBlock": "transformer_encoder_block",
    },
)
