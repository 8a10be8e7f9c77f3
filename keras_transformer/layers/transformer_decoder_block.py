"""One decoder layer of paper section 3.1, with a key/value cache for decoding."""

import keras

from keras_transformer.layers.cached_attention import CachedAttention
from keras_transformer.layers.masks import key_padding_attention_mask
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.residual_block import ResidualBlock


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerDecoderBlock(ResidualBlock):
    """Masked self-attention, encoder-decoder attention, then a feed-forward network.

    Paper 3.1: the decoder "inserts a third sub-layer, which performs
    multi-head attention over the output of the encoder stack", and masks its
    self-attention so that position `i` depends only on positions `< i`
    (here: `<= i` of the right-shifted input). Each sublayer is wrapped as
    `LayerNorm(x + Dropout(Sublayer(x)))` (5.4); pre-LN is an option.

    No decoder padding mask is needed: padding is at the end, and the causal
    mask already keeps real positions from attending to it.

    Its constructor takes the arguments of `TransformerEncoderBlock`, and:

    Args:
        self_attention: the class of the masked self-attention layer, or its
            registered name (`keras.saving.get_registered_name`): a
            `CachedAttention` subclass, built with `MultiHeadAttention`'s
            arguments (`num_heads`, `key_dim`, `value_dim`, `dropout`,
            `use_bias`, `kernel_initializer`, `bias_initializer`, `dtype`,
            `name`) and keeping its cache contract. `None` (default): the
            paper's `MultiHeadAttention`.

    Call arguments:
        sequence: (batch, length, d_model) decoder input.
        encoder_sequence: (batch, source_length, d_model) encoder output.
            May be `None` when `cross_attention_cache` is given.
        encoder_padding_mask: optional boolean (batch, source_length), `True`
            at real source tokens.
        self_attention_cache: optional growing cache of the self-attention
            (its `initial_cache`, or the one a previous call returned), filled
            up to `cache_index`: for `MultiHeadAttention`, `(key, value)`
            buffers of shapes (batch, heads, max_length, key_dim) and
            (batch, heads, max_length, value_dim).
        cross_attention_cache: optional `(key, value)` of the encoder output,
            from `cross_attention.compute_key_value(encoder_sequence)`. It
            (and `encoder_padding_mask`) may have one row per `g` consecutive
            rows of `sequence`, the beams of one source.
        cache_index: int or scalar int tensor. Position of the first token of
            `sequence`; required with `self_attention_cache`.
        return_attention_scores: bool. Also return a dict with the
            `"self_attention"` and `"cross_attention"` weights.
        training: bool. Enables dropout.

    Returns:
        (batch, length, d_model) tensor; followed by the updated self-attention
        cache when one was given, and by the weights dict when asked.

    Example:

    >>> block = TransformerDecoderBlock(num_heads=8, key_dim=64, intermediate_dim=2048)
    >>> target = keras.random.normal((2, 5, 512))
    >>> source = keras.random.normal((2, 7, 512))
    >>> block(target, source).shape
    (2, 5, 512)
    """

    def __init__(self, *args, self_attention=None, **kwargs):
        super().__init__(*args, **kwargs)
        if isinstance(self_attention, str):
            name = self_attention
            self_attention = keras.saving.get_registered_object(name)
            if self_attention is None:
                raise ValueError(
                    f"`self_attention` names no registered Keras class. Received: {name!r}"
                )
        if self_attention is not None and not (
            isinstance(self_attention, type) and issubclass(self_attention, CachedAttention)
        ):
            raise TypeError(
                f"`self_attention` must be a CachedAttention subclass. Received: {self_attention!r}"
            )
        self.self_attention_class = self_attention or MultiHeadAttention

    def build(self, sequence_shape, encoder_sequence_shape=None):
        encoder_sequence_shape = encoder_sequence_shape or sequence_shape
        self.self_attention = self._attention("self_attention", self.self_attention_class)
        self.self_attention.build(sequence_shape)
        self.self_attention_norm, self.self_attention_dropout = self._norm_and_dropout(
            "self_attention", sequence_shape
        )
        self.cross_attention = self._attention("cross_attention")
        self.cross_attention.build(sequence_shape, encoder_sequence_shape)
        self.cross_attention_norm, self.cross_attention_dropout = self._norm_and_dropout(
            "cross_attention", sequence_shape
        )
        self.feed_forward = self._feed_forward()
        self.feed_forward.build(sequence_shape)
        self.feed_forward_norm, self.feed_forward_dropout = self._norm_and_dropout(
            "feed_forward", sequence_shape
        )
        self.built = True

    def call(
        self,
        sequence,
        encoder_sequence=None,
        encoder_padding_mask=None,
        self_attention_cache=None,
        cross_attention_cache=None,
        cache_index=None,
        return_attention_scores=False,
        training=None,
    ):
        if self_attention_cache is not None and cache_index is None:
            raise ValueError("`cache_index` is required with `self_attention_cache`.")
        if encoder_sequence is None and cross_attention_cache is None:
            raise ValueError("Pass `encoder_sequence` or `cross_attention_cache`.")

        attended = self.self_attention(
            self._sublayer_input(sequence, self.self_attention_norm),
            use_causal_mask=True,
            cache=self_attention_cache,
            cache_index=cache_index,
            return_attention_scores=True,
            training=training,
        )
        if self_attention_cache is not None:
            attended, self_attention_cache, self_weights = attended
        else:
            attended, self_weights = attended
        sequence = self._residual(
            sequence, attended, self.self_attention_norm, self.self_attention_dropout, training
        )

        attention_mask = None
        if encoder_padding_mask is not None:
            attention_mask = key_padding_attention_mask(encoder_padding_mask)
        attended, cross_weights = self.cross_attention(
            self._sublayer_input(sequence, self.cross_attention_norm),
            encoder_sequence,
            attention_mask=attention_mask,
            cache=cross_attention_cache,
            return_attention_scores=True,
            training=training,
        )
        sequence = self._residual(
            sequence, attended, self.cross_attention_norm, self.cross_attention_dropout, training
        )

        transformed = self.feed_forward(
            self._sublayer_input(sequence, self.feed_forward_norm), training=training
        )
        sequence = self._residual(
            sequence, transformed, self.feed_forward_norm, self.feed_forward_dropout, training
        )

        results = (sequence,)
        if self_attention_cache is not None:
            results += (self_attention_cache,)
        if return_attention_scores:
            results += ({"self_attention": self_weights, "cross_attention": cross_weights},)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        if self.self_attention_class is not MultiHeadAttention:
            config["self_attention"] = keras.saving.get_registered_name(self.self_attention_class)
        return config
