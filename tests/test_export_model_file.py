"""`.keras` files of a model and its tokenizer, and the export command's front end."""

import ast
import json
import os
import pathlib
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import random_token_ids, to_numpy

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, export
from keras_transformer.commands import export as command
from keras_transformer.decoding import Translator
from keras_transformer.decoding.translator import to_token_lists
from keras_transformer.export import load_translation_model, save_translation_model
from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import SubwordTokenizer, train_vocabulary


@pytest.fixture(scope="module")
def tokenizer():
    english, german = generate_synthetic_pairs(200, seed=1)
    return train_vocabulary(english + german, vocabulary_size=120)


@pytest.fixture
def compiled_model(tiny_config):
    model = Seq2SeqTransformer(tiny_config.replace(vocabulary_size=120, num_layers=1))
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=LabelSmoothedCrossEntropy())
    return model


def batch(seed):
    rng = np.random.default_rng(seed)
    inputs = {
        "encoder_token_ids": random_token_ids(rng, 4, 7, 120),
        "decoder_token_ids": random_token_ids(rng, 4, 6, 120),
    }
    return inputs, random_token_ids(rng, 4, 6, 120)


def test_round_trip_restores_the_training_state(compiled_model, tokenizer, tmp_path):
    model = compiled_model
    model.fit(*batch(0), epochs=1, verbose=0)
    path = save_translation_model(model, tokenizer, tmp_path / "translator.keras")
    loaded, loaded_tokenizer = load_translation_model(path)  # safe_mode on

    assert isinstance(loaded_tokenizer, SubwordTokenizer)
    assert loaded_tokenizer.proto == tokenizer.proto
    sentences = ["Zwei Hunde laufen.", "A dog ✓"]
    assert to_token_lists(loaded_tokenizer(sentences)) == to_token_lists(tokenizer(sentences))
    assert loaded.config == model.config
    for original, restored in zip(model.weights, loaded.weights, strict=True):
        np.testing.assert_array_equal(to_numpy(original), to_numpy(restored))
    # The same optimizer state (step count, Adam moments) and loss: training continues
    # exactly where it stopped.
    assert isinstance(loaded.loss, LabelSmoothedCrossEntropy)
    assert int(to_numpy(loaded.optimizer.iterations)) == 1
    for original, restored in zip(
        model.optimizer.variables, loaded.optimizer.variables, strict=True
    ):
        np.testing.assert_array_equal(to_numpy(original), to_numpy(restored))
    # Still an ordinary `.keras` model file.
    assert isinstance(keras.saving.load_model(path, compile=False), Seq2SeqTransformer)


def test_a_fresh_process_loads_a_model_compiled_with_the_paper_optimizer(
    tiny_config, tokenizer, tmp_path
):
    # The package's modules load on first use: loading a compiled model must still find the
    # optimizer, schedule and loss classes its file names, with nothing imported beforehand.
    from keras_transformer.training import paper_optimizer

    model = Seq2SeqTransformer(tiny_config.replace(vocabulary_size=120, num_layers=1))
    model.compile(optimizer=paper_optimizer(model.config.d_model), loss=LabelSmoothedCrossEntropy())
    model.fit(*batch(0), epochs=1, verbose=0)
    path = save_translation_model(model, tokenizer, tmp_path / "translator.keras")
    script = (
        "import sys; from keras_transformer.export import load_translation_model; "
        "load_translation_model(sys.argv[1], compile=False); "
        "assert 'keras_transformer.training' not in sys.modules, 'decoding loads training'; "
        "model, _ = load_translation_model(sys.argv[1]); "
        "schedule = model.optimizer.get_config()['learning_rate']['class_name']; "
        "print(type(model.optimizer).__name__, schedule, "
        "int(model.optimizer.iterations), type(model.loss).__name__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [
        "FusedAdam",
        "TransformerSchedule",
        "1",
        "LabelSmoothedCrossEntropy",
    ]


def test_failed_save_leaves_the_old_file(compiled_model, tokenizer, tmp_path, monkeypatch):
    path = tmp_path / "translator.keras"
    save_translation_model(compiled_model, tokenizer, path)
    before = path.read_bytes()

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(zipfile.ZipFile, "writestr", fail)
    with pytest.raises(OSError, match="disk full"):
        save_translation_model(compiled_model, tokenizer, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["translator.keras"]  # no temporary file left
    with pytest.raises(ValueError, match=r"`\.keras`"):
        save_translation_model(compiled_model, tokenizer, tmp_path / "model.h5")


def test_a_plain_keras_file_is_rejected_clearly(compiled_model, tmp_path):
    compiled_model.build()
    compiled_model.save(tmp_path / "plain.keras")
    with pytest.raises(ValueError, match="holds no tokenizer"):
        load_translation_model(tmp_path / "plain.keras")


def test_command_reports_bad_invocations_in_one_line(tmp_path, capsys):
    for argv, status, message in [
        (["--output", "out"], 2, "one of the arguments --model --run-dir --weights is required"),
        (["--weights", "w.weights.h5", "--output", "out"], 2, "--weights needs --tokenizer"),
        (["--model", str(tmp_path / "missing.keras"), "--output", "out"], 2, "no such file"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            command.main(argv)
        assert exit_info.value.code == status
        error = capsys.readouterr().err.strip()
        assert message in error and len(error.splitlines()) == 1


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the same export in a subprocess; test_export.py covers the JAX route",
)
def test_command_exports_averaged_weights(tiny_config, tokenizer, tmp_path):
    """`--weights` + `--config` + `--tokenizer`, e.g. after checkpoint averaging."""
    # A field that changes the outputs but not the weights' shapes: the export must take
    # it from --config.
    config = tiny_config.replace(vocabulary_size=120, scale_embeddings=False)
    model = Seq2SeqTransformer(config)
    model.build()
    # Weights no initialization gives, large enough that each sentence translates differently.
    rng = np.random.default_rng(0)
    model.set_weights([w + rng.normal(0, 0.3, w.shape) for w in model.get_weights()])
    model.save_weights(tmp_path / "averaged.weights.h5")
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    tokenizer.save_to_file(tmp_path / "vocabulary.model")
    output = tmp_path / "serving" / "1"
    status = command.main(
        [
            "--weights",
            str(tmp_path / "averaged.weights.h5"),
            "--config",
            str(tmp_path / "config.json"),
            "--tokenizer",
            str(tmp_path / "vocabulary.model"),
            "--output",
            str(output),
            "--beam-size",
            "2",
            "--max-extra-length",
            "3",
        ]
    )
    assert status == 0
    serve = tf.saved_model.load(str(output)).signatures["serving_default"]
    sentences = ["Zwei Hunde laufen.", "A dog", "The baker has a bag."]
    translations = serve(sentences=tf.constant(sentences))["translations"].numpy()
    expected = Translator(model, tokenizer, beam_size=2, max_extra_length=3).translate(sentences)
    assert len(set(expected) - {""}) == len(sentences)  # outputs that depend on the input
    assert [t.decode("utf-8") for t in translations] == expected


def test_export_folder_imports_no_training_code():
    # Every import, in functions too: a compiled model file's training classes are imported
    # from the modules the file names (the fresh-process test above checks that a decoding
    # load leaves the training package unloaded, and a compiled load finds them).
    for path in pathlib.Path(export.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
                if node.module == "keras_transformer":
                    modules = [f"keras_transformer.{alias.name}" for alias in node.names]
            else:
                continue
            assert not any(m.startswith("keras_transformer.training") for m in modules), path


def test_command_exports_through_a_tensorflow_spec_from_another_backend(tmp_path, monkeypatch):
    from keras_transformer.decoding.decoding_config import DecodingConfig
    from keras_transformer.export.tensorflow_export import TensorFlowExport

    with zipfile.ZipFile(tmp_path / "translator.keras", "w") as archive:  # passes the path checks
        archive.writestr("keras_transformer_tokenizer.json", "{}")
    argv = ["--model", str(tmp_path / "translator.keras"), "--output", str(tmp_path / "1")]
    specs = []

    def run(self, capture_stderr=False):  # writes and reads the spec file as the subprocess would
        path = tmp_path / "spec.json"
        path.write_text(json.dumps(self.to_dict()))
        specs.append(TensorFlowExport.from_file(path))
        return subprocess.CompletedProcess([], 0)

    # The command imports the backend once its arguments are checked: patched at source.
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    monkeypatch.setattr(TensorFlowExport, "run", run)
    assert command.main([*argv, "--beam-size", "5", "--alpha", "0.7"]) == 0
    # The decoding travels as data, each DecodingConfig field by name; no command line.
    decoding = DecodingConfig(beam_size=5, alpha=0.7).to_dict()
    assert specs == [
        TensorFlowExport(
            str(tmp_path / "1"),
            json.loads(json.dumps(decoding)),
            model=str(tmp_path / "translator.keras"),
            prog="keras-transformer export",
        )
    ]
    assert DecodingConfig.from_dict(specs[0].decoding) == DecodingConfig(beam_size=5, alpha=0.7)


def test_the_tensorflow_export_process_reports_a_bad_model_file_in_one_line(tmp_path, capsys):
    from keras_transformer.export.tensorflow_export import TensorFlowExport, main

    (tmp_path / "bad.keras").write_text("not a zip archive")
    spec = TensorFlowExport(
        str(tmp_path / "1"), {}, model=str(tmp_path / "bad.keras"), prog="keras-transformer export"
    )
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_dict()))
    assert main([str(path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("keras-transformer export: error: ") and error.count("\n") == 1
    assert "bad.keras" in error and not (tmp_path / "1").exists()
