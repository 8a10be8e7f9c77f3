"""int8 weights (`quantize_model`, `Translator(quantize="int8")`, `export --quantize int8`).

The int8 product is checked against exact integer arithmetic in NumPy; a quantized model's
logits against its float32 logits, with the bound that int8 rounding allows; its weights by
their dtypes; its translations, model file and SavedModel against the in-memory int8 model.
"""

import os
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, small_config, to_numpy

from keras_transformer import Seq2SeqTransformer, TransformerConfig
from keras_transformer.cli import main
from keras_transformer.decoding import Translator
from keras_transformer.decoding.translator import to_token_lists
from keras_transformer.export import export_saved_model
from keras_transformer.export.load_translation_model import load_translation_model
from keras_transformer.export.save_translation_model import save_translation_model
from keras_transformer.layers.kernel_matmul import int8_matmul
from keras_transformer.models.quantization import quantization_mode, quantize_model
from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import train_vocabulary

VOCABULARY_SIZE = 160
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def trained():
    """A one-layer model trained a few steps to copy sentences, its tokenizer, sentences."""
    english, german = generate_synthetic_pairs(300, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=VOCABULARY_SIZE)
    keras.utils.set_random_seed(7)
    model = Seq2SeqTransformer(small_config(VOCABULARY_SIZE, d_model=32, intermediate_dim=64))
    pieces = [p for p in to_token_lists(tokenizer(english[:300])) if len(p) < 16][:256]
    source, decoder, labels = (np.zeros((len(pieces), 16), "int32") for _ in range(3))
    for row, ids in enumerate(pieces):
        source[row, : len(ids) + 1] = [*ids, tokenizer.eos_id]
        decoder[row, : len(ids) + 1] = [tokenizer.bos_id, *ids]
        labels[row, : len(ids) + 1] = [*ids, tokenizer.eos_id]
    model.compile(optimizer=keras.optimizers.Adam(0.003), loss="sparse_categorical_crossentropy")
    inputs = {"encoder_token_ids": source, "decoder_token_ids": decoder}
    model.fit(inputs, labels, batch_size=32, epochs=3, verbose=0)
    sentences = [s[:40] for s in english[20:44]]
    return model, tokenizer, sentences


@pytest.fixture(scope="module")
def quantized(trained):
    """The trained model quantized (a copy), and its translations of the sentences."""
    model, tokenizer, sentences = trained
    float_weights = [w.copy() for w in model.get_weights()]
    translator = Translator(model, tokenizer, max_extra_length=8, quantize="int8")
    assert quantization_mode(model) is None  # the translator quantized a copy
    weights = zip(model.get_weights(), float_weights, strict=True)
    assert all(np.array_equal(a, b) for a, b in weights)
    return translator.model, translator.translate(sentences, verbose=0)


def test_int8_matmul_equals_integer_arithmetic():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5, 24)).astype("float32")
    w = rng.normal(size=(24, 7)).astype("float32")
    # Keras' scheme: quantized = round(value * scale), scale = 127 / max |value|.
    w_scale = 127 / np.abs(w).max(axis=0)
    w_int = np.round(w * w_scale).astype("int8")
    x_scale = 127 / np.abs(x).max(axis=-1, keepdims=True)
    x_int = np.round(x * x_scale).astype("int64")
    expected = (x_int @ w_int.astype("int64")) / (x_scale * w_scale)
    got = to_numpy(int8_matmul(keras.ops.convert_to_tensor(x), w_int, w_scale.astype("float32")))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # And int8 rounding, not a float product: off the float product by more than float error.
    assert np.abs(got - x @ w).max() > 1e-3


def test_quantized_logits_stay_close_to_float32_and_weights_are_int8():
    keras.utils.set_random_seed(3)
    config = TransformerConfig(
        vocabulary_size=64, num_layers=2, d_model=32, num_heads=4, intermediate_dim=64, dropout=0
    )
    model = Seq2SeqTransformer(config)
    model.build()
    rng = np.random.default_rng(1)
    inputs = {
        "encoder_token_ids": rng.integers(4, 64, (4, 9)).astype("int32"),
        "decoder_token_ids": rng.integers(4, 64, (4, 6)).astype("int32"),
    }
    expected = to_numpy(model(inputs))
    quantize_model(model, "int8")
    got = to_numpy(model(inputs))
    # Each int8 operand is off by at most half a step, 1/254 of its row's or column's largest
    # magnitude: about 0.4% per operand, 0.8% per product. About a dozen products (and the
    # layer normalizations between them) lie between the ids and a logit, and their errors
    # add up along the residual stream: a few percent of the logits' range at most. Reading
    # the int8 values without their scales, or a float path, fails one bound or the other.
    error = np.abs(got - expected).max()
    assert 1e-4 < error < 0.05 * np.abs(expected).max()
    assert (got.argmax(-1) == expected.argmax(-1)).mean() >= 0.9
    assert quantization_mode(model) == "int8"
    kernels = [w for w in model.weights if w.path.endswith(("/kernel", "/embeddings"))]
    assert len(kernels) == 2 * (4 + 2) + 2 * (4 + 4 + 2) + 1  # encoder, decoder, embedding
    assert {keras.backend.standardize_dtype(w.dtype) for w in kernels} == {"int8"}
    floats = sum(int(np.prod(w.shape)) for w in model.weights if w.dtype != "int8")
    assert floats < 0.15 * model.count_params()  # scales, biases, layer normalization


def test_quantize_refuses_what_it_cannot_quantize(tiny_config, monkeypatch):
    from keras_transformer.models import quantization

    model = Seq2SeqTransformer(tiny_config)
    model.build()
    with pytest.raises(ValueError, match="must be one of"):
        quantize_model(model, "int4")
    # A layer with weights that is neither quantized nor known to stay float is named.
    monkeypatch.setattr(quantization, "FLOAT_LAYERS", ())
    with pytest.raises(ValueError, match=r"_norm: a LayerNormalization cannot be quantized"):
        quantize_model(model, "int8")
    monkeypatch.undo()
    assert quantization_mode(model) is None  # refused before anything changed
    model.encoder_blocks[0].self_attention.query_dense.enable_lora(2)
    with pytest.raises(ValueError, match="LoRA factors are not merged"):
        quantize_model(model, "int8")


def test_int8_translations_mostly_equal_float32(trained, quantized):
    model, tokenizer, sentences = trained
    expected = Translator(model, tokenizer, max_extra_length=8).translate(sentences, verbose=0)
    int8_model, translations = quantized
    assert quantization_mode(int8_model) == "int8"
    assert quantization_mode(model) is None  # the Translator quantized its own copy only
    same = sum(a == b for a, b in zip(translations, expected, strict=True))
    assert same >= 0.75 * len(sentences), list(zip(translations, expected, strict=True))
    assert len(set(translations)) > len(sentences) // 2  # a model that translates


def weights_size(path):
    with zipfile.ZipFile(path) as archive:
        return archive.getinfo("model.weights.h5").file_size


def test_an_int8_keras_file_translates_as_the_model(trained, quantized, tmp_path):
    model, tokenizer, sentences = trained
    source = save_translation_model(model, tokenizer, str(tmp_path / "float.keras"))
    int8_path = str(tmp_path / "int8.keras")
    status = main(["export", "--model", source, "--format", "keras", "--quantize", "int8",
                   "--output", int8_path])  # fmt: skip
    assert status == 0
    loaded, loaded_tokenizer = load_translation_model(int8_path, compile=False)
    assert quantization_mode(loaded) == "int8"
    translations = Translator(loaded, loaded_tokenizer, max_extra_length=8).translate(
        sentences, verbose=0
    )
    assert translations == quantized[1]


# The file's sizes do not depend on the backend (the int8 values and scales are the same).
@BACKEND_INDEPENDENT
def test_an_int8_keras_file_is_a_quarter_of_the_float_one(trained, tmp_path):
    tokenizer = trained[1]
    # A base-sized vocabulary and width, so that the file's fixed overhead is small.
    keras.utils.set_random_seed(5)
    big = Seq2SeqTransformer(small_config(4000, d_model=128, intermediate_dim=512))
    big.build()
    float_path = save_translation_model(big, tokenizer, str(tmp_path / "big.keras"))
    quantize_model(big, "int8")
    small_path = save_translation_model(big, tokenizer, str(tmp_path / "big-int8.keras"))
    ratio = weights_size(float_path) / weights_size(small_path)
    assert 3.5 < ratio <= 4.0, ratio  # int8 values, plus float32 scales, biases and norms
    assert os.path.getsize(float_path) / os.path.getsize(small_path) > 3.0


def test_saved_model_serves_the_int8_translations(trained, quantized, tmp_path):
    import tensorflow as tf

    model, tokenizer, sentences = trained
    path = export_saved_model(
        model, tokenizer, tmp_path / "int8" / "1", max_extra_length=8, quantize="int8"
    )
    assert quantization_mode(model) is None  # the export quantized a copy
    loaded = tf.saved_model.load(path)
    assert "int8" in {variable.dtype.name for variable in loaded.model_variables}
    outputs = loaded.signatures["serving_default"](sentences=tf.constant(sentences))
    served = [text.decode("utf-8") for text in outputs["translations"].numpy()]
    expected = quantized[1]
    if keras.backend.backend() == "tensorflow":
        assert served == expected
    else:  # another backend's float rounding may move an int8 activation by one step
        same = sum(a == b for a, b in zip(served, expected, strict=True))
        assert same >= 0.9 * len(sentences)


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "argv, message",
    [
        (["translate", "--quantize", "int4", "--model", "{model}"], "invalid choice: 'int4'"),
        (["export", "--format", "ctranslate2", "--quantize", "int8", "--model", "{model}",
          "--output", "{out}"], "--quantize goes with --format saved_model or keras"),
        (["export", "--format", "keras", "--quantize", "int8", "--model", "{model}",
          "--output", "{out}"], "--format keras writes a .keras file"),
    ],
)  # fmt: skip
def test_bad_quantize_flags_are_one_line_before_keras_loads(trained, tmp_path, argv, message):
    model, tokenizer, _ = trained
    path = save_translation_model(model, tokenizer, str(tmp_path / "model.keras"))
    argv = [a.format(model=path, out=tmp_path / "out") for a in argv]
    # Keras made unimportable: an error after it loads would be a traceback, not exit 2.
    code = "import sys; sys.modules['keras'] = None; from keras_transformer.cli import main; "
    code += "sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    process = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                             text=True, env=env, timeout=300)  # fmt: skip
    assert process.returncode == 2 and process.stdout == "", process.stderr
    assert len(process.stderr.splitlines()) == 1 and message in process.stderr
    assert not (tmp_path / "out").exists()
