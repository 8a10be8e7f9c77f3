"""LoRA adapters on the package's models: Keras' own `enable_lora` on its projections.

Checked on every backend: the adapters train while every base weight stays bit-identical;
with B = 0 the model computes the base model's output; the merged model computes what the
unmerged adapters do, and both what a plain model with `W + (alpha / r) A B` written into
its kernels by numpy computes (a second path); checkpoints keep the factors apart from the
base, and an adapter file applies to its base model only.
"""

import math

import h5py
import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, small_config, to_numpy

from keras_transformer import Seq2SeqTransformer
from keras_transformer.compat import lora_base_kernel
from keras_transformer.export import apply_adapter, save_adapter, weights_fingerprint
from keras_transformer.export.lora_adapter import read_adapter_settings
from keras_transformer.layers import AdaptableEinsumDense
from keras_transformer.models.lora import lora_layers
from keras_transformer.models.lora_targets import lora_rank_limit
from keras_transformer.training import LabelSmoothedCrossEntropy

CONFIG = small_config(vocabulary_size=40, d_model=16, num_heads=2, intermediate_dim=24)


def batch(seed=0, rows=3, length=6):
    rng = np.random.default_rng(seed)
    inputs = {
        "encoder_token_ids": rng.integers(3, 40, size=(rows, length)).astype("int32"),
        "decoder_token_ids": rng.integers(3, 40, size=(rows, length)).astype("int32"),
    }
    return inputs, rng.integers(3, 40, size=(rows, length)).astype("int32")


def base_model(seed=1):
    keras.utils.set_random_seed(seed)
    model = Seq2SeqTransformer(CONFIG)
    model.build()
    return model


def logits(model, inputs):
    return to_numpy(model(inputs, training=False))


def randomize_factors(model, seed=2):
    rng = np.random.default_rng(seed)
    for _, layer in lora_layers(model, model.lora_settings["targets"]):
        for variable in (layer.lora_kernel_a, layer.lora_kernel_b):
            variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))


@pytest.mark.parametrize(
    "equation, output_shape, input_shape",
    [
        ("btd,dhk->bthk", (None, 3, 4), (2, 5, 6)),  # W^Q: d_model 6 -> 3 heads x 4
        ("bthk,hkd->btd", (None, 6), (2, 5, 3, 4)),  # W^O: 3 heads x 4 -> d_model 6
    ],
)
def test_a_projections_lora_is_a_rank_r_change_of_the_whole_matrix(
    equation, output_shape, input_shape
):
    bias_axes = equation.split("->")[1][2:]  # a bias per output value
    layer = AdaptableEinsumDense(equation, output_shape=output_shape, bias_axes=bias_axes)
    layer.build(input_shape)
    layer.enable_lora(2, lora_alpha=5)
    rng = np.random.default_rng(8)
    for variable in (layer.bias, layer.lora_kernel_a, layer.lora_kernel_b):
        variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    inputs = rng.normal(0, 1, input_shape).astype("float32")
    # numpy: the kernel as its (d_in, d_out) matrix W, y = x W' + b, W' = W + (5 / 2) A B.
    base = to_numpy(lora_base_kernel(layer))
    d_in = 6 if equation.startswith("btd") else 12
    a = to_numpy(layer.lora_kernel_a).reshape(d_in, 2)
    b = to_numpy(layer.lora_kernel_b).reshape(2, -1)
    assert a.shape[0] + b.shape[1] == 18 and b.shape[1] == base.size // d_in
    assert np.linalg.matrix_rank(a @ b) == 2  # rank 2 of the whole 6 x 12 (or 12 x 6) matrix
    adapted = base.reshape(d_in, -1) + 2.5 * a @ b
    expected = inputs.reshape(10, d_in) @ adapted + to_numpy(layer.bias).reshape(-1)
    outputs = to_numpy(layer(inputs)).reshape(10, -1)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_numpy(layer.kernel), adapted.reshape(base.shape), atol=1e-6)
    assert [v.name for v in layer.trainable_weights] == ["bias", "lora_kernel_a", "lora_kernel_b"]
    assert layer.lora_rank == 2 and layer.lora_alpha == 5 and not layer.weights[0].trainable


def test_factors_of_another_shape_are_refused_when_loading():
    layer = AdaptableEinsumDense("btd,dhk->bthk", output_shape=(None, 3, 4))
    layer.build((None, None, 6))
    layer.enable_lora(2)
    store = {"0": np.ones((6, 3, 4), "float32"), "lora_kernel_b": np.ones((2, 4), "float32")}
    store["lora_kernel_a"] = np.ones((6, 3, 2), "float32")  # an earlier version's, per head
    with pytest.raises(ValueError, match=r"has shape \(6, 3, 2\), this version's is \(6, 2\)"):
        layer.load_own_variables(store)


@BACKEND_INDEPENDENT
def test_an_adapter_of_the_earlier_per_head_format_is_refused(tmp_path):
    path = tmp_path / "old.lora"
    with h5py.File(path, "w") as file:
        file.attrs.update(format="keras_transformer.lora_adapter", format_version=1)
        file.attrs["settings"] = '{"rank": 8, "alpha": 8, "targets": "attention"}'
        file.attrs["base_fingerprint"] = "0" * 64
    with pytest.raises(ValueError, match=r"^--adapter .*old.lora: adapter format 1, this "):
        read_adapter_settings(str(path))


def test_the_default_query_value_adapts_w_q_and_w_v_only():
    from keras_transformer.experiment.settings.adaptation_config import AdaptationConfig

    model = base_model()
    model.enable_lora(4)  # the default targets: the LoRA paper's W^Q and W^V
    assert model.lora_settings["targets"] == "query+value" == AdaptationConfig().lora_targets
    paths = [v.path for v in model.trainable_weights]
    assert len(paths) == 2 * 2 * 3  # A and B of W^Q and W^V in 3 attention layers
    assert all(("/query/" in p or "/value/" in p) and "lora_kernel" in p for p in paths), paths
    # 4 x (16 + 16) per projection: the standard LoRA count, r (d_in + d_out).
    assert sum(math.prod(v.shape) for v in model.trainable_weights) == 6 * 4 * 32
    explicit = base_model()
    explicit.enable_lora(4, targets="query+value")
    assert [v.path for v in explicit.trainable_weights] == paths


def test_the_adapters_train_and_the_base_weights_stay_bit_identical():
    model = base_model()
    before = [np.array(value) for value in model.get_weights()]
    model.enable_lora(4, targets="attention+ffn", alpha=8)
    factors = [v for v in model.trainable_weights]
    # Two factors per projection: 4 per attention layer (3 of them) and 2 per feed-forward.
    assert len(factors) == 2 * (4 * 3 + 2 * 2)
    assert all("lora_kernel" in v.path for v in factors)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LabelSmoothedCrossEntropy(pad_id=0))
    inputs, labels = batch()
    start = logits(model, inputs)
    model.fit(inputs, labels, epochs=3, batch_size=3, verbose=0)
    factors_b = [to_numpy(layer.lora_kernel_b) for _, layer in lora_layers(model, "attention")]
    assert all(np.abs(b).max() > 0 for b in factors_b)  # B left zero: trained
    assert np.abs(logits(model, inputs) - start).max() > 1e-3
    # The base: every weight that is not a factor, the frozen kernels included, unchanged.
    kept = [to_numpy(v) for v in model.weights if "lora_kernel" not in v.path]
    assert len(kept) == len(before)
    for old, new in zip(before, kept, strict=True):
        np.testing.assert_array_equal(old, new)


def test_with_b_zero_the_adapted_model_computes_the_base_models_output():
    model = base_model()
    inputs, _ = batch(seed=3)
    expected = logits(model, inputs)
    model.enable_lora(2, targets="attention+ffn")
    np.testing.assert_allclose(logits(model, inputs), expected, rtol=0, atol=1e-6)


def test_the_merged_model_computes_what_the_unmerged_adapters_do():
    model = base_model()
    model.enable_lora(3, targets="attention+ffn", alpha=6)
    randomize_factors(model)
    inputs, _ = batch(seed=4)
    adapted = logits(model, inputs)
    merged = model.merged_model()
    assert merged.lora_settings is None and not any("lora" in v.path for v in merged.weights)
    np.testing.assert_allclose(logits(merged, inputs), adapted, rtol=0, atol=1e-5)
    # Second path: a plain model whose kernels numpy sets to W + (alpha / r) A B.
    plain = base_model()
    for (_, adapted_layer), (_, layer) in zip(
        lora_layers(model, "attention+ffn"), lora_layers(plain, "attention+ffn"), strict=True
    ):
        a, b = to_numpy(adapted_layer.lora_kernel_a), to_numpy(adapted_layer.lora_kernel_b)
        base = to_numpy(lora_base_kernel(adapted_layer))
        delta = a.reshape(-1, 3) @ b.reshape(3, -1)  # the projection's (d_in, d_out) matrices
        layer.kernel.assign(base + 2.0 * delta.reshape(base.shape))
    np.testing.assert_allclose(logits(plain, inputs), adapted, rtol=0, atol=1e-4)
    assert np.abs(adapted - logits(base_model(), inputs)).max() > 1e-2  # the factors count


def test_a_checkpoint_keeps_the_factors_and_the_base_apart(tmp_path):
    model = base_model()
    model.enable_lora(2)
    randomize_factors(model)
    path = str(tmp_path / "ckpt.weights.h5")
    model.save_weights(path)
    restored = keras.models.clone_model(model)  # enable_lora from the model's config
    restored.build()
    restored.load_weights(path)
    assert restored.lora_settings == model.lora_settings
    for saved, loaded in zip(model.weights, restored.weights, strict=True):
        np.testing.assert_array_equal(to_numpy(saved), to_numpy(loaded))


def test_an_adapter_file_applies_to_its_base_model_only(tmp_path):
    model = base_model()
    fingerprint = weights_fingerprint(model)
    model.enable_lora(2, targets="attention")
    randomize_factors(model)
    assert weights_fingerprint(model) == fingerprint  # the frozen base's
    path = save_adapter(model, str(tmp_path / "adapter.lora"))
    inputs, _ = batch(seed=5)
    applied = apply_adapter(base_model(), path)
    np.testing.assert_array_equal(logits(applied, inputs), logits(model, inputs))
    with pytest.raises(ValueError, match=r"^--adapter .*: made for another base model"):
        apply_adapter(base_model(seed=7), path)


@BACKEND_INDEPENDENT
def test_ranks_and_targets_are_checked():
    model = base_model()
    assert lora_rank_limit(CONFIG, "attention") == 16  # d_model = heads x head size
    assert lora_rank_limit(CONFIG, "query+value") == 16
    assert lora_rank_limit(CONFIG.replace(intermediate_dim=4), "attention+ffn") == 4
    assert lora_rank_limit(CONFIG.replace(key_dim=4), "attention") == 8  # 2 heads x 4
    with pytest.raises(ValueError, match="must be a positive int"):
        model.enable_lora(0)
    with pytest.raises(ValueError, match="above the width"):
        model.enable_lora(17)
    with pytest.raises(ValueError, match="`targets` must be one of"):
        model.enable_lora(2, targets="embeddings")
    model.enable_lora(16)
    with pytest.raises(ValueError, match="already enabled"):
        model.enable_lora(2)


def test_freeze_keeps_the_chosen_parts_and_trains_the_rest():
    from keras_transformer.experiment.adaptation import adapt_model, part_weights
    from keras_transformer.experiment.settings.adaptation_config import AdaptationConfig

    model = adapt_model(base_model(), AdaptationConfig(freeze=("embeddings", "encoder")), 0)
    frozen = {id(v) for part in ("embeddings", "encoder") for v in part_weights(model, part)}
    before = {id(v): to_numpy(v) for v in model.weights}
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LabelSmoothedCrossEntropy(pad_id=0))
    inputs, labels = batch(seed=6)
    model.fit(inputs, labels, epochs=2, batch_size=3, verbose=0)
    for variable in model.weights:
        same = np.array_equal(before[id(variable)], to_numpy(variable))
        assert same == (id(variable) in frozen), variable.path
