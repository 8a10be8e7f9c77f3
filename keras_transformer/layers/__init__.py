"""Keras layers of the Transformer (paper section 3)."""

from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.layers.learned_position_embedding import LearnedPositionEmbedding
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.sinusoidal_position_embedding import SinusoidalPositionEmbedding
from keras_transformer.layers.token_embedding import TokenEmbedding
from keras_transformer.layers.transformer_decoder_block import TransformerDecoderBlock
from keras_transformer.layers.transformer_encoder_block import TransformerEncoderBlock

__all__ = [
    "Dropout",
    "FeedForward",
    "LayerNormalization",
    "LearnedPositionEmbedding",
    "MultiHeadAttention",
    "SinusoidalPositionEmbedding",
    "TokenEmbedding",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
]
