"""Mixed precision and XLA compilation of training, on both backends.

What stays float32 under `mixed_float16`/`mixed_bfloat16` (variables, attention
softmax, logits, loss), loss scaling for float16, XLA training equal to the
uncompiled step, and compilations bounded by the bucketed pipeline's shapes.
"""

import collections
import functools
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from conftest import random_token_ids, to_numpy

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer
from keras_transformer.data import TokenizedCorpus, make_translation_dataset
from keras_transformer.layers import multi_head_attention

BACKEND = keras.backend.backend()
POLICIES = ["mixed_bfloat16", "mixed_float16"]


def dtype_of(x):
    return keras.backend.standardize_dtype(x.dtype)


def make_batch(rng, config, batch=4, source_length=7, target_length=6):
    inputs = {
        "encoder_token_ids": random_token_ids(rng, batch, source_length, config.vocabulary_size),
        "decoder_token_ids": random_token_ids(rng, batch, target_length, config.vocabulary_size),
    }
    labels = random_token_ids(rng, batch, target_length, config.vocabulary_size)
    return inputs, labels


def run_once(function, *args):
    """`function(*args)`, traced and compiled as a whole on JAX.

    Eager JAX compiles every primitive at its first use (seconds for a model's
    forward pass); one `jax.jit` of the whole call is much cheaper.
    """
    if BACKEND == "jax":
        import jax

        return jax.jit(function)(*args)
    return function(*args)


def slow_off_tensorflow(test):
    """Slow outside TensorFlow, so kept out of CI there: un-jitted JAX runs op by op,
    compiling every primitive, and `jit_compile=True` on PyTorch is `torch.compile`, which
    took 5.6 minutes for this one-layer model on 2 CPU cores."""
    return pytest.mark.slow(test) if BACKEND != "tensorflow" else test


# --- Mixed precision -------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_mixed_precision_keeps_variables_softmax_and_logits_float32(
    tiny_config, policy, monkeypatch
):
    keras.config.set_dtype_policy(policy)
    compute_dtype = policy.split("_")[1]
    config = tiny_config.replace(num_layers=1)
    model = Seq2SeqTransformer(config)
    model.build()
    inputs, _ = make_batch(np.random.default_rng(0), config, batch=3)
    inputs["encoder_token_ids"][0, 3:] = 0  # padding, masked before the softmax

    softmax_inputs = []
    softmax = keras.ops.softmax

    def recording_softmax(x, axis=-1):
        softmax_inputs.append(dtype_of(x))
        return softmax(x, axis=axis)

    monkeypatch.setattr(multi_head_attention.ops, "softmax", recording_softmax)
    logits = run_once(model, inputs)
    monkeypatch.undo()
    encoded, weights = run_once(
        lambda x: (model.encode(x["encoder_token_ids"]), model.attention_weights(x)), inputs
    )

    # Every attention sublayer (encoder self, decoder self and cross) takes its
    # softmax over float32 scores, while the activations run in the compute dtype.
    assert softmax_inputs == ["float32"] * 3, softmax_inputs
    assert dtype_of(encoded) == compute_dtype
    assert dtype_of(logits) == "float32"
    assert np.all(np.isfinite(to_numpy(logits)))
    # Variables stay float32; only their use is cast.
    assert model.weights and {dtype_of(w) for w in model.weights} == {"float32"}
    for block in [*model.encoder_blocks, *model.decoder_blocks]:
        assert (block.compute_dtype, block.variable_dtype) == (compute_dtype, "float32")

    for name, per_layer in weights.items():
        for layer_weights in per_layer:
            assert dtype_of(layer_weights) == "float32", name
            sums = to_numpy(layer_weights).sum(-1)
            np.testing.assert_allclose(sums, 1.0, atol=2e-6, err_msg=name)
    cross = to_numpy(weights["decoder_cross_attention"][0])
    assert np.all(cross[0, :, :, 3:] == 0.0)
    # The tolerance tells float32 from the compute dtype: the same weights
    # rounded to it no longer sum to 1 that closely.
    rounded = keras.ops.cast(keras.ops.cast(cross, compute_dtype), "float32")
    assert np.abs(to_numpy(rounded).sum(-1) - 1.0).max() > 1e-4


@pytest.mark.parametrize("policy", POLICIES)
def test_loss_of_low_precision_logits_is_float32(policy):
    compute_dtype = policy.split("_")[1]
    rng = np.random.default_rng(1)
    labels = random_token_ids(rng, 3, 8, 31)
    logits = keras.ops.cast(rng.normal(scale=4.0, size=(3, 8, 31)), compute_dtype)
    exact = to_numpy(keras.ops.cast(logits, "float32")).astype("float64")
    log_normalizer = np.log(np.exp(exact).sum(-1))
    nll = log_normalizer - np.take_along_axis(exact, labels[..., None], -1)[..., 0]
    expected = 0.9 * nll + 0.1 * (log_normalizer - exact.mean(-1))
    expected = np.where(labels != 0, expected, 0.0)

    per_token = LabelSmoothedCrossEntropy(0.1, reduction="none")(labels, logits)
    assert dtype_of(per_token) == "float32"
    # float32 arithmetic: 100x tighter than float16 (and 800x than bfloat16) rounding.
    np.testing.assert_allclose(to_numpy(per_token), expected, rtol=1e-5, atol=1e-5)
    mean = LabelSmoothedCrossEntropy(0.1)(labels, logits)
    assert dtype_of(mean) == "float32"
    np.testing.assert_allclose(float(mean), expected.sum() / (labels != 0).sum(), rtol=1e-5)


@pytest.mark.parametrize(
    "global_policy, model_dtype, loss_scaled",
    [
        ("mixed_float16", None, True),
        ("float32", "mixed_float16", True),  # the model's own policy decides
        ("mixed_bfloat16", None, False),  # bfloat16 has float32's range: no scaling
        ("float32", None, False),
    ],
)
def test_compile_wraps_the_optimizer_in_loss_scaling_only_for_float16(
    tiny_config, global_policy, model_dtype, loss_scaled
):
    # Keras' `compile` does the wrapping; this pins the contract docs/training.md states, and
    # that the model hands its own dtype policy to its blocks (which Keras' choice reads).
    keras.config.set_dtype_policy(global_policy)
    model = Seq2SeqTransformer(tiny_config, dtype=model_dtype)
    adam = keras.optimizers.Adam(1e-3)
    model.compile(optimizer=adam, loss=LabelSmoothedCrossEntropy())
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer) == loss_scaled
    if loss_scaled:
        assert model.optimizer.inner_optimizer is adam
        assert model.encoder_blocks[0].compute_dtype == "float16"
    else:
        assert model.optimizer is adam


def test_float16_steps_with_overflowing_gradients_are_skipped(tiny_config):
    """A loss scale too large for float16 gives inf gradients: no update, half the scale."""
    keras.config.set_dtype_policy("mixed_float16")
    config = tiny_config.replace(num_layers=1)
    model = Seq2SeqTransformer(config)
    inputs, labels = make_batch(np.random.default_rng(2), config)
    model.build()
    initial = [to_numpy(w) for w in model.weights]
    initial_scale = 2.0**32  # the gradients of the float16 activations overflow (max 65504)
    optimizer = keras.optimizers.LossScaleOptimizer(
        keras.optimizers.Adam(1e-3), initial_scale=initial_scale
    )
    model.compile(optimizer=optimizer, loss=LabelSmoothedCrossEntropy())

    loss = model.train_on_batch(inputs, labels)
    assert np.isfinite(loss)  # the reported loss is unscaled and finite
    assert int(optimizer.iterations) == 0
    assert float(optimizer.dynamic_scale) == initial_scale / 2
    for before, after in zip(initial, model.weights, strict=True):
        np.testing.assert_array_equal(to_numpy(after), before)

    steps = 30
    for _ in range(steps - 1):
        model.train_on_batch(inputs, labels)
    applied = int(optimizer.iterations)
    skipped = steps - applied
    assert 1 <= applied < steps - 1, applied
    # Every skipped step halved the scale; none doubled it (dynamic_growth_steps=2000).
    assert float(optimizer.dynamic_scale) == initial_scale / 2**skipped
    assert not np.array_equal(to_numpy(model.weights[0]), initial[0])
    # Weights, Adam moments and the scale itself stay float32.
    float_variables = [
        v for v in [*model.weights, *optimizer.variables] if "int" not in dtype_of(v)
    ]
    assert {dtype_of(v) for v in float_variables} == {"float32"}


# --- XLA ----------------------------------------------------------------------------------


def train_few_steps(config, initial_weights, jit_compile, inputs, labels):
    model = Seq2SeqTransformer(config)
    model(inputs)
    model.set_weights(initial_weights)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=LabelSmoothedCrossEntropy(),
        jit_compile=jit_compile,
    )
    assert model.jit_compile is jit_compile
    history = model.fit(inputs, labels, batch_size=4, epochs=1, shuffle=False, verbose=0)
    return [to_numpy(w) for w in model.weights], history.history["loss"][0]


@slow_off_tensorflow
def test_xla_training_matches_the_uncompiled_step(tiny_config):
    config = tiny_config.replace(num_layers=1)
    inputs, labels = make_batch(np.random.default_rng(3), config, batch=12)  # 3 steps
    reference = Seq2SeqTransformer(config)
    reference(inputs)
    initial = reference.get_weights()

    compiled, compiled_loss = train_few_steps(config, initial, True, inputs, labels)
    eager, eager_loss = train_few_steps(config, initial, False, inputs, labels)
    np.testing.assert_allclose(compiled_loss, eager_loss, rtol=1e-5)
    flat_compiled, flat_eager, flat_initial = (
        np.concatenate([w.ravel() for w in ws]) for ws in (compiled, eager, initial)
    )
    moved = np.linalg.norm(flat_eager - flat_initial) / np.linalg.norm(flat_initial)
    assert moved > 1e-3  # the steps changed the weights well beyond the tolerance
    assert np.linalg.norm(flat_compiled - flat_eager) <= 1e-5 * np.linalg.norm(flat_eager)
    # Each weight against how far it moved, not against its size: Adam divides by sqrt(v),
    # so an element whose gradient sits at rounding level still moves by about the learning
    # rate, and two correct summation orders (XLA's and TensorFlow's kernels) can move it
    # differently. Measured on two CPUs: at most 4e-5 of the update (2e-5 of a zero-initialized
    # bias on an AMD EPYC, where 1e-5 of the weight failed). A wrong step differs by O(1).
    for a, b, start, w in zip(compiled, eager, initial, reference.weights, strict=True):
        assert np.linalg.norm(a - b) <= 1e-3 * np.linalg.norm(b - start), w.path


def test_jit_compile_auto_resolves_per_backend(tiny_config):
    # Keras resolves "auto", not this package: a contract docs/training.md relies on (the
    # CPU TensorFlow default without XLA), so a Keras change shows here first.
    model = Seq2SeqTransformer(tiny_config)
    model.compile(optimizer="adam", loss=LabelSmoothedCrossEntropy())
    if BACKEND == "jax":
        assert model.jit_compile is True  # JAX always compiles the step with XLA
    else:
        import tensorflow as tf

        # Keras turns XLA off on CPU-only TensorFlow; an accelerator turns it on.
        accelerators = [d for d in tf.config.list_physical_devices() if d.device_type != "CPU"]
        assert model.jit_compile is bool(accelerators)


# --- Compilations bounded by bucket shapes ---------------------------------------------


def bucketed_dataset():
    """A token-budget pipeline over random ids, with several batch shapes per epoch."""
    rng = np.random.default_rng(4)
    # Pair length (special tokens included) ~3, ~6 and ~10: buckets 4, 7 and 12.
    sources, targets = [], []
    for count, low, high in ((20, 1, 3), (12, 4, 6), (8, 7, 11)):
        for _ in range(count):
            sources.append(rng.integers(4, 31, size=rng.integers(low, high + 1)).tolist())
            targets.append(rng.integers(4, 31, size=rng.integers(low, high + 1)).tolist())
    corpus = TokenizedCorpus.from_ids(sources, targets)
    train = make_translation_dataset(
        corpus, token_budget=64, max_length=16, min_bucket_length=4, bucket_growth=1.6
    )
    steps = train.steps_per_epoch
    shapes = collections.Counter(
        tuple(labels.shape) for _, labels in train.dataset.take(steps).as_numpy_iterator()
    )
    return train, shapes


class CountAtEpochEnd(keras.callbacks.Callback):
    def __init__(self, count):
        super().__init__()
        self.count = count
        self.counts = []

    def on_epoch_end(self, epoch, logs=None):
        self.counts.append(self.count(self.model))


def fit_two_epochs(config, train, count, jit_compile="auto"):
    model = Seq2SeqTransformer(config)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=LabelSmoothedCrossEntropy(),
        jit_compile=jit_compile,
    )
    counter = CountAtEpochEnd(count)
    history = model.fit(
        train.dataset, steps_per_epoch=train.steps_per_epoch, epochs=2, shuffle=False,
        callbacks=[counter], verbose=0,
    )  # fmt: skip
    assert np.all(np.isfinite(history.history["loss"]))
    return counter.counts


def tf_function_traces(function, traces=None, seen=None):
    """Tracing counts of the `tf.function`s reachable from `function`'s closures."""
    traces = {} if traces is None else traces
    seen = set() if seen is None else seen
    for cell in getattr(function, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        if hasattr(value, "experimental_get_tracing_count"):
            traces[value.python_function.__name__] = value.experimental_get_tracing_count()
            tf_function_traces(value.python_function, traces, seen)
        elif callable(value) and hasattr(value, "__closure__"):
            tf_function_traces(value, traces, seen)
    return traces


@pytest.fixture(scope="module")
def buckets():
    train, shapes = bucketed_dataset()
    assert len(shapes) >= 3 and min(shapes.values()) >= 2, shapes  # every shape seen twice
    assert len(shapes) == train.summary.num_shapes
    return train, shapes


@pytest.mark.skipif(BACKEND != "jax", reason="counts JAX compilations")
def test_jax_compiles_the_train_step_once_per_bucket_shape(tiny_config, buckets):
    import jax

    train, shapes = buckets
    events = collections.Counter()

    def record(event, duration, **kwargs):
        if "train_step" in str(kwargs.get("fun_name", "")):
            events[event] += 1

    jax.monitoring.register_event_duration_secs_listener(record)
    try:
        counts = fit_two_epochs(
            tiny_config.replace(num_layers=1), train, lambda model: dict(events), jit_compile=True
        )
    finally:
        jax.monitoring.unregister_event_duration_listener(record)
    first, second = counts
    compiles = first["/jax/core/compile/backend_compile_duration"]
    # One XLA executable per (batch, length) shape, so at most one per bucket.
    assert 1 <= compiles == len(shapes) <= len(train.buckets)
    assert first["/jax/core/compile/jaxpr_trace_duration"] == len(shapes)
    assert second == first  # the second epoch reuses them all


@pytest.mark.skipif(BACKEND != "tensorflow", reason="counts tf.function traces")
def test_tf_traces_one_train_graph_for_all_bucket_shapes(tiny_config, buckets):
    train, shapes = buckets
    # The pipeline's static shapes are unknown: one graph serves every bucket.
    assert all(
        spec.shape.as_list() == [None, None]
        for spec in keras.tree.flatten(train.dataset.element_spec)
    )
    counts = fit_two_epochs(
        tiny_config.replace(num_layers=1),
        train,
        lambda model: tf_function_traces(model.train_function),
        jit_compile=False,
    )
    first, second = counts
    assert first, "no tf.function found behind model.train_function"
    # Fewer traces than shapes: the loop over the iterator and the step, once each (the
    # model is built before the first trace: see the next test).
    assert set(first.values()) == {1} and len(shapes) > 1, first
    assert second == first  # no retrace in the second epoch


@pytest.mark.skipif(BACKEND != "tensorflow", reason="counts tf.function traces")
def test_tf_traces_a_fresh_models_step_once_and_trains_as_keras_own_build(tiny_config):
    # Keras' own path builds the model and the optimizer inside the step's first trace,
    # and tf.function traces a step that made variables a second time.
    inputs, labels = make_batch(np.random.default_rng(0), tiny_config, batch=8)

    def train(keras_own_build):
        keras.utils.set_random_seed(0)
        model = Seq2SeqTransformer(tiny_config)
        if keras_own_build:
            model.make_train_function = functools.partial(keras.Model.make_train_function, model)
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LabelSmoothedCrossEntropy())
        model.fit(inputs, labels, batch_size=4, epochs=2, shuffle=False, verbose=0)
        return tf_function_traces(model.train_function), [to_numpy(w) for w in model.weights]

    traces, weights = train(keras_own_build=False)
    keras_traces, keras_weights = train(keras_own_build=True)
    assert set(traces.values()) == {1}, traces
    assert keras_traces["one_step_on_data"] == 2, keras_traces  # fixed in Keras: say so here
    assert len(weights) == len(keras_weights)
    for ours, theirs in zip(weights, keras_weights, strict=True):
        np.testing.assert_array_equal(ours, theirs)


XLA_COUNT_SCRIPT = textwrap.dedent(
    """
    import glob, json, sys
    import keras
    sys.path.insert(0, sys.argv[2])
    import test_precision_and_compilation as t
    from keras_transformer import TransformerConfig

    train, shapes = t.bucketed_dataset()
    config = TransformerConfig(vocabulary_size=31, num_layers=1, d_model=16, num_heads=4,
                               intermediate_dim=32, dropout=0.0)
    def modules(model):
        return len(glob.glob(sys.argv[1] + "/*before_optimizations.txt"))
    counts = t.fit_two_epochs(config, train, modules, jit_compile=True)
    print(json.dumps({"counts": counts, "shapes": len(shapes)}))
    """
)


@pytest.mark.slow
@pytest.mark.skipif(BACKEND != "tensorflow", reason="counts TensorFlow XLA compilations")
def test_tf_xla_compiles_once_per_bucket_shape(tmp_path):
    """With jit_compile=True the one traced graph is compiled by XLA per concrete shape.

    TensorFlow exposes no compilation count in-process, so a subprocess dumps
    every XLA module (one per compilation) and the dump is counted.
    """
    env = {
        **os.environ,
        "XLA_FLAGS": f"--xla_dump_to={tmp_path}",
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    result = subprocess.run(
        [sys.executable, "-c", XLA_COUNT_SCRIPT, str(tmp_path), os.path.dirname(__file__)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    first, second = report["counts"]
    assert first == report["shapes"]  # one XLA compilation per bucket shape
    assert second == first  # none in the second epoch
