"""One encoder layer of paper section 3.1."""

import keras

from keras_transformer.layers.masks import key_padding_attention_mask
from keras_transformer.layers.residual_block import ResidualBlock


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerEncoderBlock(ResidualBlock):
    """Self-attention then a feed-forward network, each in a residual sublayer.

    Paper 3.1: "Each layer has two sub-layers. The first is a multi-head
    self-attention mechanism, and the second is a simple, position-wise fully
    connected feed-forward network", each wrapped as
    `LayerNorm(x + Dropout(Sublayer(x)))` (5.4). Pre-LN is an option.

    Args:
        num_heads: int. Number of attention heads `h`.
        key_dim: int. Query/key size per head `d_k`.
        intermediate_dim: int. Feed-forward inner size `d_ff`.
        value_dim: int. Value size per head `d_v`; defaults to `key_dim`.
        dropout: float. Residual dropout `P_drop` (paper: 0.1 base).
        attention_dropout: float. Dropout on attention weights (paper: 0).
        activation_dropout: float. Dropout inside the FFN (paper: 0).
        activation: str. The FFN's activation: "relu" (paper), "swish" or
            "gelu" (any name `keras.activations.get` takes).
        attention_bias: bool. Biases in the attention projections (paper's
            equations have none: `False`).
        normalize_first: bool. Pre-LN instead of the paper's post-LN.
        layer_norm_epsilon: float. LayerNorm epsilon.
        kernel_initializer: initializer for all kernels.
        bias_initializer: initializer for all biases.
        attention_initializer: str or None. Kernel initializer of the
            attention projections instead of `kernel_initializer`, a name
            `MultiHeadAttention` takes (e.g. `"xavier_fused_qkv"`).
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        sequence: (batch, length, d_model) tensor.
        padding_mask: optional boolean (batch, length), `True` at real tokens.
        return_attention_scores: bool. Also return the self-attention weights
            (batch, heads, length, length).
        training: bool. Enables dropout.

    Returns:
        (batch, length, d_model) tensor, and the attention weights when asked.

    Example:

    >>> block = TransformerEncoderBlock(num_heads=8, key_dim=64, intermediate_dim=2048)
    >>> block(keras.random.normal((2, 7, 512))).shape
    (2, 7, 512)
    """

    def build(self, sequence_shape):
        self.self_attention = self._attention("self_attention")
        self.self_attention.build(sequence_shape)
        self.self_attention_norm, self.self_attention_dropout = self._norm_and_dropout(
            "self_attention", sequence_shape
        )
        self.feed_forward = self._feed_forward()
        self.feed_forward.build(sequence_shape)
        self.feed_forward_norm, self.feed_forward_dropout = self._norm_and_dropout(
            "feed_forward", sequence_shape
        )
        self.built = True

    def call(self, sequence, padding_mask=None, return_attention_scores=False, training=None):
        attention_mask = None
        if padding_mask is not None:
            attention_mask = key_padding_attention_mask(padding_mask)  # (batch, 1, length)
        attended, weights = self.self_attention(
            self._sublayer_input(sequence, self.self_attention_norm),
            attention_mask=attention_mask,
            return_attention_scores=True,
            training=training,
        )
        sequence = self._residual(
            sequence, attended, self.self_attention_norm, self.self_attention_dropout, training
        )
        transformed = self.feed_forward(
            self._sublayer_input(sequence, self.feed_forward_norm), training=training
        )
        sequence = self._residual(
            sequence, transformed, self.feed_forward_norm, self.feed_forward_dropout, training
        )
        return (sequence, weights) if return_attention_scores else sequence
