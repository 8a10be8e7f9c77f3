"""What the encoder and decoder blocks share: arguments, sublayer factories, residuals."""

import keras

from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.utils import clone_initializer


class ResidualBlock(keras.layers.Layer):
    """Base of `TransformerEncoderBlock` and `TransformerDecoderBlock`.

    Every sublayer is wrapped as in paper 3.1 and 5.4: post-LN
    `LayerNorm(x + Dropout(Sublayer(x)))` by default, or pre-LN
    `x + Dropout(Sublayer(LayerNorm(x)))` with `normalize_first=True` (then
    the stack needs a final LayerNorm, which `Seq2SeqTransformer` adds).
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        intermediate_dim,
        value_dim=None,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        activation="relu",
        attention_bias=False,
        normalize_first=False,
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        attention_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, rate in (
            ("dropout", dropout),
            ("attention_dropout", attention_dropout),
            ("activation_dropout", activation_dropout),
        ):
            if not 0.0 <= rate < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={rate!r}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim or key_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.activation = activation
        self.attention_bias = attention_bias
        self.normalize_first = normalize_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.attention_initializer = attention_initializer

    def _attention(self, name, layer_class=MultiHeadAttention):
        return layer_class(
            num_heads=self.num_heads,
            key_dim=self.key_dim,
            value_dim=self.value_dim,
            dropout=self.attention_dropout,
            use_bias=self.attention_bias,
            kernel_initializer=(
                self.attention_initializer or clone_initializer(self.kernel_initializer)
            ),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def _feed_forward(self):
        return FeedForward(
            self.intermediate_dim,
            activation=self.activation,
            activation_dropout=self.activation_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="feed_forward",
        )

    def _norm_and_dropout(self, name, sequence_shape):
        norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=f"{name}_norm"
        )
        norm.build(sequence_shape)
        dropout = Dropout(self.dropout, dtype=self.dtype_policy)
        return norm, dropout

    def _sublayer_input(self, inputs, norm):
        return norm(inputs) if self.normalize_first else inputs

    def _residual(self, inputs, sublayer_output, norm, dropout, training):
        outputs = inputs + dropout(sublayer_output, training=training)
        return outputs if self.normalize_first else norm(outputs)

    def compute_output_shape(self, sequence_shape, *args, **kwargs):
        return sequence_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "activation": self.activation,
                "attention_bias": self.attention_bias,
                "normalize_first": self.normalize_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "attention_initializer": self.attention_initializer,
            }
        )
        return config
