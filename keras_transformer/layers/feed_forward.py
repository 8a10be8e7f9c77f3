"""The position-wise feed-forward network of paper section 3.3."""

import keras

from keras_transformer.layers.adaptable_dense import AdaptableDense
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.kernel_matmul import dense_matmul
from keras_transformer.layers.utils import clone_initializer


@keras.saving.register_keras_serializable(package="keras_transformer")
class FeedForward(keras.layers.Layer):
    """`FFN(x) = max(0, x W_1 + b_1) W_2 + b_2`, applied at each position (3.3).

    Args:
        intermediate_dim: int. Inner size `d_ff`.
        activation: activation of the inner layer (paper: ReLU).
        activation_dropout: float. Dropout after the activation. Not in the
            paper (0.0); tensor2tensor calls it `relu_dropout`.
        kernel_initializer: initializer for both kernels.
        bias_initializer: initializer for both biases.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (batch, length, d_model) tensor.
        training: bool. Enables dropout.

    Returns:
        (batch, length, d_model) tensor.

    Example:

    >>> FeedForward(intermediate_dim=2048)(keras.random.normal((2, 5, 512))).shape
    (2, 5, 512)
    """

    def __init__(
        self,
        intermediate_dim,
        activation="relu",
        activation_dropout=0.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(intermediate_dim, int) or intermediate_dim <= 0:
            raise ValueError(
                "`intermediate_dim` must be a positive int. "
                f"Received: intermediate_dim={intermediate_dim!r}"
            )
        self.intermediate_dim = intermediate_dim
        self.activation = keras.activations.get(activation)
        self.activation_dropout = activation_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, inputs_shape):
        # Weight holders only: `call` applies them (and the activation) itself.
        def dense(units, name):
            return AdaptableDense(
                units,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name=name,
            )

        self.inner_dense = dense(self.intermediate_dim, "inner")
        self.output_dense = dense(inputs_shape[-1], "output")
        self.dropout_layer = Dropout(self.activation_dropout, dtype=self.dtype_policy)
        self.inner_dense.build(inputs_shape)
        self.output_dense.build((*inputs_shape[:-1], self.intermediate_dim))
        self.built = True

    def call(self, inputs, training=None):
        # `dense_matmul`: the faster kernel gradient on JAX's CPU backend. `inputs` are already
        # in the compute dtype (Keras casts a layer's inputs; dropout keeps the dtype).
        hidden = self.activation(dense_matmul(self.inner_dense, inputs))  # (batch, length, d_ff)
        hidden = self.dropout_layer(hidden, training=training)
        return dense_matmul(self.output_dense, hidden)  # (batch, length, d_model)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "activation": keras.activations.serialize(self.activation),
                "activation_dropout": self.activation_dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
