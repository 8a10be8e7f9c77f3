"""Token embeddings scaled by sqrt(d_model), reusable as the pre-softmax projection (3.4)."""

import contextlib
import math

import keras
from keras import ops, quantizers

from keras_transformer import backend
from keras_transformer.compat import unlocked_tracking
from keras_transformer.layers.kernel_matmul import int8_matmul, is_int8, kernel_matmul
from keras_transformer.layers.utils import current_thread_value, thread_value


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenEmbedding(keras.layers.Layer):
    """A token embedding matrix used in both directions.

    Paper 3.4: the two embedding layers and the pre-softmax linear
    transformation share one weight matrix, and the embedding outputs are
    multiplied by `sqrt(d_model)`. Called with `reverse=False` it maps ids to
    vectors (scaled); with `reverse=True` it maps decoder states to logits
    with the transpose of the same matrix (unscaled), returned in float32.

    Weights start from `N(0, d_model^-0.5)` so that the scaled embeddings
    have unit variance, the usual choice for a tied matrix.

    `quantize("int8")` (called by `model.quantize`) stores the matrix as
    int8 with one scale per row (per token), which serves both directions:
    looked-up rows are dequantized, and the logits are an int8 product
    (`int8_matmul`) whose output columns are the rows.

    Args:
        vocabulary_size: int. Number of token ids.
        embedding_dim: int. `d_model`.
        scale: bool. Multiply looked-up embeddings by `sqrt(d_model)` (paper:
            `True`).
        embeddings_initializer: initializer of the matrix; defaults to
            `RandomNormal(stddev=embedding_dim ** -0.5)`.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: int token ids (batch, length), or with `reverse=True`
            states (batch, length, embedding_dim).
        reverse: bool. Project states to vocabulary logits.

    Returns:
        (batch, length, embedding_dim) embeddings in the compute dtype, or
        (batch, length, vocabulary_size) float32 logits with `reverse=True`.

    Example:

    >>> embedding = TokenEmbedding(vocabulary_size=100, embedding_dim=16)
    >>> states = embedding(keras.ops.array([[5, 7, 0]]))
    >>> embedding(states, reverse=True).shape
    (1, 3, 100)
    """

    def __init__(
        self, vocabulary_size, embedding_dim, scale=True, embeddings_initializer=None, **kwargs
    ):
        super().__init__(**kwargs)
        for name, value in (("vocabulary_size", vocabulary_size), ("embedding_dim", embedding_dim)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
        self.vocabulary_size = vocabulary_size
        self.embedding_dim = embedding_dim
        self.scale = scale
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=embedding_dim**-0.5)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, inputs_shape=None):
        self.embeddings = self.add_weight(
            shape=(self.vocabulary_size, self.embedding_dim),
            initializer=self.embeddings_initializer,
            name="embeddings",
        )
        self.built = True

    def quantize(self, mode=None, type_check=True, config=None):
        """Stores the matrix as int8 with per-row scales (Keras' `Layer.quantize`).

        Args:
            mode: "int8", the one mode built.
            type_check: unused (Keras' argument).
            config: unused: the weights are quantized with Keras' default
                (abs-max) quantizer, per row.

        Raises:
            NotImplementedError: another mode.
        """
        if mode != "int8":
            raise NotImplementedError(
                f"{self.name}: TokenEmbedding quantizes to int8 only. Received: mode={mode!r}"
            )
        self._check_quantize_args(mode, self.compute_dtype)
        values, scale = quantizers.abs_max_quantize(self.embeddings, axis=-1, to_numpy=True)
        del self.embeddings
        with unlocked_tracking(self):
            self.embeddings = self.add_weight(
                shape=(self.vocabulary_size, self.embedding_dim),
                initializer="zeros",
                dtype="int8",
                trainable=False,
                name="embeddings",
            )
            self.embeddings_scale = self.add_weight(
                shape=(self.vocabulary_size,), initializer="ones", trainable=False, name="scale"
            )
        self.embeddings.assign(values)
        self.embeddings_scale.assign(ops.squeeze(scale, axis=-1))
        self._is_quantized = True
        self.dtype_policy = keras.dtype_policies.get(f"int8_from_{self.dtype_policy.name}")

    @contextlib.contextmanager
    def fixed_output_matrix(self):
        """Transposes the matrix once, on entry, for the `reverse=True` calls made inside.

        A decoding loop projects to logits at every step. Built inside the
        loop, TensorFlow's graph multiplies by the transposed matrix at every
        step, and its CPU matmul runs about half as fast with the second
        operand transposed. Enter this in the same trace as the loop, before
        it; the values are the same either way. Only calls made in the thread
        that entered see the transposed matrix.
        """
        if not self.built:
            raise ValueError("`fixed_output_matrix` needs a built layer: call it once first.")
        if is_int8(self):
            transposed = ops.transpose(ops.convert_to_tensor(self.embeddings))
        else:
            transposed = ops.transpose(ops.cast(self.embeddings, self.compute_dtype))
        with thread_value(self, transposed):  # (embedding_dim, vocabulary)
            yield

    def call(self, inputs, reverse=False):
        if reverse and is_int8(self):
            fixed = current_thread_value(self)
            kernel = ops.transpose(self.embeddings) if fixed is None else fixed
            return ops.cast(int8_matmul(inputs, kernel, self.embeddings_scale), "float32")
        if reverse:
            fixed = current_thread_value(self)
            if fixed is not None and fixed.dtype == inputs.dtype:
                return ops.cast(ops.matmul(inputs, fixed), "float32")
            kernel = ops.cast(self.embeddings, inputs.dtype)
            # `kernel_matmul`: a faster embedding gradient on JAX's CPU backend.
            logits = kernel_matmul(inputs, kernel, transpose_kernel=True)
            return ops.cast(logits, "float32")
        ids = ops.cast(inputs, "int32")
        if is_int8(self):  # no gradient to shape: a plain gather of int8 rows and their scales
            embedded = ops.cast(ops.take(self.embeddings, ids, axis=0), self.compute_dtype)
            scale = ops.take(self.embeddings_scale, ids, axis=0)[..., None]
            embedded = embedded / ops.cast(scale, self.compute_dtype)
        else:
            embedded = ops.cast(backend.gather_rows(self.embeddings, ids), self.compute_dtype)
        if self.scale:
            embedded = embedded * ops.cast(math.sqrt(self.embedding_dim), self.compute_dtype)
        return embedded

    def _int8_call(self, inputs, reverse=False):
        # Keras' `Layer.__call__` sends a quantized layer's calls here; `call` has both paths.
        return self.call(inputs, reverse=reverse)

    def compute_output_shape(self, inputs_shape, reverse=False):
        if reverse:
            return (*inputs_shape[:-1], self.vocabulary_size)
        return (*inputs_shape, self.embedding_dim)

    def compute_output_spec(self, inputs, reverse=False):
        shape = self.compute_output_shape(inputs.shape, reverse=reverse)
        dtype = "float32" if reverse else self.compute_dtype
        return keras.KerasTensor(shape, dtype=dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "embedding_dim": self.embedding_dim,
                "scale": self.scale,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
