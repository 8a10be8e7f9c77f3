"""Keras' Adam, with TensorFlow's one-kernel update outside XLA (paper 5.3)."""

import keras

from keras_transformer import backend, compat


@keras.saving.register_keras_serializable(package="keras_transformer")
class FusedAdam(compat.TorchAdamUpdateAll, keras.optimizers.Adam):
    """`keras.optimizers.Adam` whose TensorFlow update is one kernel per variable.

    Paper 5.3 trains with Adam. Keras' `Adam.update_step` is written with
    `keras.ops`: on TensorFlow, in code that XLA does not compile (Keras'
    default on a CPU), that is about ten elementwise kernels per variable,
    each a pass over the weights, their moments or the gradient. This class
    runs TensorFlow's `ResourceApplyAdam` instead, which updates the weights
    and both moments in one pass with the same formula:

        m <- m + (g - m)(1 - beta_1),  v <- v + (g^2 - v)(1 - beta_2),
        w <- w - lr sqrt(1 - beta_2^t) / (1 - beta_1^t) m / (sqrt(v) + epsilon)

    `keras_transformer.backend` picks this update (`fused_adam`) for
    TensorFlow on a CPU outside XLA. Everything else is Keras' `Adam`: the
    arguments, the variables (so checkpoints load either way), weight decay,
    clipping, gradient accumulation, loss scaling and the distribution
    strategies, under which the update runs per replica as Keras' own does.
    On PyTorch the update is Keras' own for `Adam` there: all variables at
    once through `torch._foreach_*` kernels (`compat.TorchAdamUpdateAll`,
    since Keras gives it to `Adam` alone, not a subclass). On JAX, in XLA-compiled
    TensorFlow functions (XLA fuses Keras' ops), on a GPU or TPU, with
    `amsgrad`, and for sparse (`IndexedSlices`) gradients, Keras' update
    runs unchanged.

    Args:
        name: the optimizer's name; `"adam"`, as Keras' `Adam`, so that the
            variables are named as Keras' are.
        **kwargs: the other arguments of `keras.optimizers.Adam`.

    Example:

    >>> optimizer = FusedAdam(1e-3, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    """

    def __init__(self, *args, name="adam", **kwargs):
        super().__init__(*args, name=name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        if not self._runs_fused(gradient):
            return super().update_step(gradient, variable, learning_rate)
        import tensorflow as tf

        dtype = variable.dtype
        local_step = tf.cast(self.iterations + 1, dtype)
        momentum, velocity = compat.adam_moments(self, variable)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=momentum.value.handle,
            v=velocity.value.handle,
            beta1_power=tf.pow(tf.cast(self.beta_1, dtype), local_step),
            beta2_power=tf.pow(tf.cast(self.beta_2, dtype), local_step),
            lr=tf.cast(learning_rate, dtype),
            beta1=tf.cast(self.beta_1, dtype),
            beta2=tf.cast(self.beta_2, dtype),
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype),
        )

    def _runs_fused(self, gradient):
        if self.amsgrad or not backend.fast_forms().fused_adam:
            return False
        import tensorflow as tf

        return not isinstance(gradient, tf.IndexedSlices)
