"""Every private name the package reads (TensorFlow, Keras, torch, tensorflow-text, keras-hub).

Each function here reaches into a module or attribute that its library does
not document, because no public API gives the same thing. They are pinned by
the upper bound on `keras` in pyproject.toml, and `tests/test_compat.py`
checks each of them, so that a new Keras or TensorFlow that renames one fails
there with a message that names it, not deep inside a training step.
`tests/test_layering.py` checks that no other module reads such a name, and that
none but these and `keras_transformer/backend/` looks at the backend.

Keras 3.15's `tf.distribute` workarounds (`apply_distribute_workarounds`) are
here too, applied only for the Keras versions known to need them; tests that
reproduce each Keras problem without its workaround say when it can go.

The module imports nothing at load (each function imports what it reads), so
the checks that run before a backend loads can use `configured_backend`.
"""

import contextlib
import json
import os
import sys
import types

# The newest Keras release checked to need the `tf.distribute` workarounds. A newer one runs
# without them: if it still has the problems, the multi-worker tests fail and this moves on.
NEEDED_THROUGH = (3, 15)


def configured_backend():
    """The backend Keras will load, found as Keras finds it, without importing Keras.

    `KERAS_BACKEND` if set and not empty, else the `backend` of `keras.json` in
    `KERAS_HOME` (or `~/.keras`, or `/tmp/.keras` where the home is not
    writable: Keras' own undocumented fallback), else "tensorflow". Once Keras
    is loaded, its own answer.
    """
    if "keras" in sys.modules:
        return sys.modules["keras"].backend.backend()
    backend = "tensorflow"
    home = os.environ.get("KERAS_HOME")
    if home is None:
        base = os.path.expanduser("~")
        home = os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")
    try:
        with open(os.path.join(os.path.expanduser(home), "keras.json"), encoding="utf-8") as file:
            settings = json.load(file)
        if isinstance(settings, dict):
            backend = settings.get("backend", backend)
    except (OSError, ValueError):
        pass
    return os.environ.get("KERAS_BACKEND") or backend


def in_xla_context():
    """Whether the TensorFlow graph being traced is compiled by XLA (`jit_compile=True`).

    TensorFlow has no public way to ask. Without the private module, XLA is
    taken to be off, which only costs speed (the forms chosen for op-by-op
    TensorFlow are also exact under XLA).

    Returns:
        bool. False outside a graph (eager code).
    """
    import tensorflow as tf

    if tf.executing_eagerly():
        return False
    try:
        from tensorflow.python.ops import control_flow_util
    except ImportError:
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def adam_moments(optimizer, variable):
    """The first and second moment variables that Keras' `Adam` keeps for `variable`.

    Args:
        optimizer: a built `keras.optimizers.Adam`.
        variable: one of the variables it updates.

    Returns:
        `(momentum, velocity)`, two `keras.Variable`s of the shape of `variable`.
    """
    index = optimizer._get_variable_index(variable)
    return optimizer._momentums[index], optimizer._velocities[index]


def batch_counter(optimizer):
    """The optimizer's count of batches applied, which differs from `iterations` (updates).

    Under gradient accumulation Keras counts batches in `_iterations` and
    exposes updates as `iterations`; an optimizer without accumulation may
    lack the private counter, and then the two are the same.
    """
    return getattr(optimizer, "_iterations", optimizer.iterations)


def learning_rate_schedule(optimizer):
    """The `LearningRateSchedule` an optimizer was given, or None for a fixed rate.

    Keras' `optimizer.learning_rate` is the rate of the next update; the
    schedule itself (to ask for the rate of another step) is private.
    """
    import keras

    rate = optimizer._learning_rate
    return rate if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule) else None


class TorchAdamUpdateAll:
    """Mixin for a subclass of `keras.optimizers.Adam`: Keras' torch update of all variables.

    On torch Keras gives plain `Adam` one update of all variables through
    `torch._foreach_*` kernels, but a subclass the per-variable loop:
    `TorchOptimizer.__new__` (keras/src/backend/torch/optimizers/
    torch_optimizer.py, Keras 3.15.1) swaps in its parallel `torch_adam.Adam`
    (added by keras-team/keras-core#531) only when the class is `Adam`
    itself; no Keras issue asks for subclasses. Put before `Adam` in the
    bases, this mixin applies the parallel update to the optimizer's own
    variables; other backends keep Keras' update.
    """

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        import keras

        if keras.backend.backend() != "torch":
            super()._backend_update_step(grads, trainable_variables, learning_rate)
            return
        torch_adam_update_all(self, grads, trainable_variables, learning_rate)


def torch_adam_update_all(optimizer, grads, variables, learning_rate):
    """Keras' torch update of `Adam`, all variables at once through `torch._foreach_*`."""
    import torch
    from keras.src.backend.torch.optimizers import torch_adam

    with torch.no_grad():
        torch_adam.Adam._parallel_update_step(optimizer, grads, variables, learning_rate)


def in_safe_mode():
    """Whether Keras deserializes in safe mode (no file paths or lambdas from configs)."""
    from keras.src.saving import serialization_lib

    return bool(serialization_lib.in_safe_mode())


def lora_base_kernel(layer):
    """The stored kernel variable of a Keras `Dense` or `EinsumDense` (`layer.kernel` is a
    property that adds the LoRA delta once `enable_lora` ran): the frozen base weights."""
    return layer._kernel


@contextlib.contextmanager
def unlocked_tracking(layer):
    """Lets a built Keras layer take new variables (`add_weight`) inside the `with`.

    Keras locks a layer's variable tracker once it is built; its own
    `enable_lora` unlocks it the same way to add the factors.
    """
    tracker = layer._tracker
    locked = tracker.locked
    tracker.unlock()
    try:
        yield layer
    finally:
        if locked:
            tracker.lock()


def leaf_layers(model):
    """The layers of `model` that hold no sublayers, as Keras' `model.quantize` visits them."""
    return [layer for layer in model._flatten_layers() if len(list(layer._flatten_layers())) == 1]


def sentencepiece_resource_op(model, shared_name):
    """tensorflow-text's op making a SentencePiece model resource under `shared_name`.

    Its public tokenizer makes the resource with a name of its own, one per
    tokenizer object; a shared name lets every tokenizer of one model (and
    every `tf.data` function) use a single resource.
    """
    from tensorflow_text.python.ops import sentencepiece_tokenizer

    return sentencepiece_tokenizer.gen_sentencepiece_tokenizer.sentencepiece_op(
        model=model, shared_name=shared_name
    )


def share_sentencepiece_resource(tokenizer, resource):
    """Makes tensorflow-text's `SentencepieceTokenizer` use `resource` (a shared one)."""
    tokenizer._model_resource = resource


def keras_hub_preprocessing():
    """keras-hub's `(convert_to_ragged_batch, preprocessing_function)`.

    The helpers its own tokenizers use to take strings, lists or tensors,
    batched or not, on any backend; keras-hub exports them under no public name.
    """
    from keras_hub.src.utils import tensor_utils

    return tensor_utils.convert_to_ragged_batch, tensor_utils.preprocessing_function


def keras_needs_workarounds(version=None):
    """Whether Keras `version` (default: the installed one) is known to need the workarounds.

    Args:
        version: str such as `"3.15.1"`, or None for `keras.version()`.

    Returns:
        bool.
    """
    if version is None:
        import keras

        version = keras.version()
    major, minor = (int(part) for part in version.split(".")[:2])
    return (major, minor) <= NEEDED_THROUGH


def apply_distribute_workarounds(model, symbolic_build=True, logs=True):
    """Patches `model` (created in a `tf.distribute` scope) for Keras' trainer; returns it.

    Two problems of Keras' TensorFlow trainer (`keras/src/backend/tensorflow/
    trainer.py`, checked through Keras 3.15.1) stop `fit`/`evaluate` of a model
    created in a `tf.distribute` strategy's scope:

    1. `TensorFlowTrainer._maybe_symbolic_build` builds the model before the
       first step from `strategy.reduce("MEAN", first_batch, axis=None)`: that
       turns int token ids into floats (which the model refuses), and
       MultiWorkerMirroredStrategy rejects the nested dict outright. Reported
       to Keras for dict inputs under MultiWorkerMirroredStrategy as
       keras-team/keras#20329 and for non-float inputs as keras-team/keras#21172.
       The workaround builds from one replica's share of the batch, which has
       the right dtypes and shapes, all the build needs.
    2. Keras reduces a step's logs with `reduce_per_replica(...,
       reduction="auto")`, hard-coded (`Model.distribute_reduction_method` is
       not read), which under MultiWorkerMirroredStrategy with 2+ workers
       becomes `strategy.reduce("MEAN", value, axis=0)`; that raises on every
       scalar log ("Invalid reduction dimension 0 for input with 0
       dimensions": tensorflow/tensorflow#72388, keras-team/keras#20585).
       Giving each replica's scalar a leading axis of length 1 makes that
       call the plain mean over replicas.

    Only this model instance is patched (its class, and so the name saved in
    `.keras` files, stays the same). Nothing changes on other backends,
    outside a strategy's scope, or with a Keras release that
    `keras_needs_workarounds` says is fixed. `tests/test_multi_worker.py` and
    `tests/test_distributed.py` reproduce each problem without its workaround
    and expect it to fail: when a Keras release fixes one, they say so.

    Args:
        model: a `keras.Model`, created in the strategy's scope.
        symbolic_build: apply workaround 1 (the build from one replica's batch).
        logs: apply workaround 2 (multi-worker scalar logs). Both default to on; the
            tests turn one off to check whether Keras still needs it.

    Returns:
        `model`.

    Example:

    >>> with tf.distribute.MirroredStrategy().scope():
    ...     model = apply_distribute_workarounds(Seq2SeqTransformer(config))
    """
    import keras

    if keras.backend.backend() != "tensorflow" or not keras_needs_workarounds():
        return model
    # Keras keeps the strategy whose scope the model was created in (None outside one).
    strategy = getattr(model, "_distribute_strategy", None)
    if strategy is None:
        return model
    if symbolic_build:
        model._maybe_symbolic_build = types.MethodType(_build_from_one_replica, model)
    if logs and _in_multi_worker_mode(strategy):
        train_step, test_step = model.train_step, model.test_step
        model.train_step = lambda *args, **kwargs: _reducible(train_step(*args, **kwargs))
        model.test_step = lambda *args, **kwargs: _reducible(test_step(*args, **kwargs))
    return model


def _build_from_one_replica(model, iterator=None, data_batch=None):
    """`TensorFlowTrainer._maybe_symbolic_build` from one replica's share of the first batch."""
    if iterator is None:
        return type(model)._maybe_symbolic_build(model, data_batch=data_batch)
    import keras
    import tensorflow as tf

    strategy = model.distribute_strategy

    def local(value):
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    for _, _, batches in iterator:
        data_batch = keras.tree.map_structure(local, next(batches))
        break
    with strategy.scope():
        model._symbolic_build(data_batch=data_batch)


def _in_multi_worker_mode(strategy):
    # The condition of keras/src/backend/tensorflow/trainer.py,
    # `_collective_all_reduce_multi_worker`: only then does Keras reduce with `axis=0`.
    import tensorflow as tf

    return (
        isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        and strategy.extended._in_multi_worker_mode()
    )


def _reducible(logs):
    """One replica's step logs with every scalar tensor made `(1,)`."""
    import keras
    import tensorflow as tf

    def expand(value):
        if isinstance(value, (tf.Tensor, tf.Variable)) and value.shape.rank == 0:
            return tf.expand_dims(value, 0)
        return value

    return keras.tree.map_structure(expand, logs)
