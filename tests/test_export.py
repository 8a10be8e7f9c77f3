"""The SavedModel for TF Serving translates like `Translator`, without Keras, this package or XLA.

The model is trained for a few steps on the backend under test; under JAX or torch it is exported
through the TensorFlow-backend subprocess (`TensorFlowExport`), as a user
on JAX or torch would.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import small_config
from saved_model_audit import REGISTERED_OPS_FUNCTION, audit_saved_model

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer
from keras_transformer.decoding import Translator
from keras_transformer.decoding.translator import to_token_lists
from keras_transformer.export import SETTINGS_FILE, default_max_source_length, export_saved_model
from keras_transformer.export.translation_module import TranslationModule
from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import train_vocabulary

DECODING = {"beam_size": 4, "alpha": 0.6, "max_extra_length": 4, "max_source_length": 24}
# Table 3 row E with max_position 16: decoder positions run to the source length plus
# max_extra_length, so sources keep 16 - 3 - 1 ids by default.
LEARNED_DECODING = {"beam_size": 4, "alpha": 0.6, "max_extra_length": 3}
LEARNED_MAX_SOURCE_LENGTH = 12
# Both signatures as documented: (signature, inputs or outputs, name, dtype, shape).
SIGNATURE_SPECS = [
    ("serving_default", "inputs", "sentences", tf.string, (None,)),
    ("serving_default", "outputs", "translations", tf.string, (None,)),
    ("serving_default", "outputs", "scores", tf.float32, (None,)),
    ("serving_default", "outputs", "truncated", tf.bool, (None,)),
    ("translate_ids", "inputs", "token_ids", tf.int32, (None, None)),
    ("translate_ids", "outputs", "token_ids", tf.int32, (None, None)),
    ("translate_ids", "outputs", "scores", tf.float32, (None,)),
    ("translate_ids", "outputs", "truncated", tf.bool, (None,)),
]
# tensorflow-text imports Keras for its own layers: keep that Keras off JAX and torch.
SUBPROCESS_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"}

FRESH_PROCESS_SCRIPT = (
    textwrap.dedent(
        """
        import json, sys

        # This package, keras-hub and JAX must not be needed: importing them fails.
        for name in ("keras_transformer", "keras_hub", "jax", "torch"):
            sys.modules[name] = None
        import tensorflow as tf
        """
    )
    + REGISTERED_OPS_FUNCTION
    + textwrap.dedent(
        """
        tensorflow_ops = registered_ops()
        import tensorflow_text  # registers its ops (and imports keras for its own layers)
        text_ops = registered_ops() - tensorflow_ops

        with open(sys.argv[1], encoding="utf-8") as file:
            request = json.load(file)
        serve = tf.saved_model.load(request["path"]).signatures["serving_default"]
        outputs = serve(sentences=tf.constant(request["sentences"]))
        result = {
            "translations": [t.decode("utf-8") for t in outputs["translations"].numpy()],
            "scores": outputs["scores"].numpy().tolist(),
            "truncated": outputs["truncated"].numpy().tolist(),
            "tensorflow_ops": sorted(tensorflow_ops),
            "text_ops": sorted(text_ops),
            "package_imported": any(
                sys.modules.get(name) is not None for name in ("keras_transformer", "keras_hub")
            ),
        }
        with open(sys.argv[2], "w", encoding="utf-8") as file:
            json.dump(result, file)
        """
    )
)

# A one-layer width-16 model over a 160-piece vocabulary: seconds to train and export.
VOCABULARY_SIZE = 160


@pytest.fixture(scope="module")
def trained():
    """A tiny model trained for a few steps to copy sentences, its tokenizer and sentences."""
    english, german = generate_synthetic_pairs(300, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=160)
    keras.utils.set_random_seed(7)
    model = Seq2SeqTransformer(small_config(VOCABULARY_SIZE))
    pieces = [p for p in to_token_lists(tokenizer(english[:300])) if len(p) < 16][:256]
    source, decoder, labels = (np.zeros((len(pieces), 16), "int32") for _ in range(3))
    for row, ids in enumerate(pieces):
        source[row, : len(ids) + 1] = [*ids, tokenizer.eos_id]
        decoder[row, : len(ids) + 1] = [tokenizer.bos_id, *ids]
        labels[row, : len(ids) + 1] = [*ids, tokenizer.eos_id]
    # A few small steps: trained, yet its outputs still differ from sentence to sentence.
    model.compile(optimizer=keras.optimizers.Adam(0.001), loss=LabelSmoothedCrossEntropy())
    inputs = {"encoder_token_ids": source, "decoder_token_ids": decoder}
    model.fit(inputs, labels, batch_size=32, epochs=1, verbose=0)
    sentences = [
        english[0],
        "",
        english[1][:10],
        english[2] + " " + english[3],  # longer than max_source_length: cut
        "   ",
        english[4],
        "Zwei Hunde ✓ — Ünïcödé 🙂",
        english[5][:3],
        *english[10:13],
        english[13][:20],
    ]
    translator = Translator(model, tokenizer, **DECODING)
    return model, tokenizer, english, sentences, translator


@pytest.fixture(scope="module")
def expected(trained):
    _, _, _, sentences, translator = trained
    return translator.translate(sentences, return_scores=True)


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    model, tokenizer, *_ = trained
    path = tmp_path_factory.mktemp("serving") / "translator" / "1"
    return export_saved_model(model, tokenizer, path, **DECODING)


@pytest.fixture(scope="module")
def fresh_process(trained, exported, tmp_path_factory):
    """Runs the SavedModel in a new process that imports only TensorFlow and tensorflow-text."""
    sentences = trained[3]
    directory = tmp_path_factory.mktemp("fresh")
    request, result = directory / "request.json", directory / "result.json"
    request.write_text(json.dumps({"path": exported, "sentences": sentences}), encoding="utf-8")
    process = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS_SCRIPT, str(request), str(result)],
        env=SUBPROCESS_ENV,
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(result.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def loaded(exported):
    return tf.saved_model.load(exported)


@pytest.fixture(scope="module")
def serve(loaded):
    return loaded.signatures["serving_default"], loaded.signatures["translate_ids"]


@pytest.fixture(scope="module")
def learned(trained):
    """An untrained learned-position model (max_position 16) that never ends a translation early."""
    tokenizer = trained[1]
    keras.utils.set_random_seed(11)
    model = Seq2SeqTransformer(
        small_config(VOCABULARY_SIZE, position_embedding="learned", max_position=16)
    )
    model.build()
    # The decoder's last LayerNorm pins feature 0 of its output to 5, and the tied embedding
    # puts -10 there for the special ids and 0 for all others: their logits drop by 50, so every
    # hypothesis runs to the length limit and reaches the last decoder position.
    norm = model.decoder_blocks[-1].feed_forward_norm
    gamma, beta = (keras.ops.convert_to_numpy(w).copy() for w in (norm.gamma, norm.beta))
    gamma[0], beta[0] = 0.0, 5.0
    norm.gamma.assign(gamma)
    norm.beta.assign(beta)
    embeddings = keras.ops.convert_to_numpy(model.target_embedding.embeddings).copy()
    embeddings[:, 0] = 0.0
    special = [tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id]
    embeddings[special, 0] = -10.0
    model.target_embedding.embeddings.assign(embeddings)
    translator = Translator(
        model, tokenizer, **LEARNED_DECODING, max_source_length=LEARNED_MAX_SOURCE_LENGTH
    )
    return model, translator


@pytest.fixture(scope="module")
def learned_exported(learned, trained, exported, tmp_path_factory):
    """`learned` exported with its default max_source_length and overwrite=True over a copy of
    `exported` (the first export, of other weights)."""
    path = tmp_path_factory.mktemp("overwrite") / "translator" / "1"
    shutil.copytree(exported, path)
    return export_saved_model(learned[0], trained[1], path, **LEARNED_DECODING, overwrite=True)


def test_fresh_process_translates_like_translate(fresh_process, expected, trained):
    translations, scores = expected
    _, tokenizer, _, sentences, _ = trained
    assert not fresh_process["package_imported"]
    assert fresh_process["translations"] == translations
    assert translations[1] == translations[4] == ""
    assert len(set(translations) - {""}) >= 3  # the sentences do not all translate alike
    lengths = [len(ids) + 1 for ids in to_token_lists(tokenizer(sentences))]  # EOS included
    too_long = [
        bool(s.strip()) and n > DECODING["max_source_length"]
        for s, n in zip(sentences, lengths, strict=True)
    ]
    assert fresh_process["truncated"] == too_long and too_long[3]
    np.testing.assert_allclose(fresh_process["scores"], scores, atol=1e-4)


def test_graph_uses_only_tensorflow_and_tensorflow_text_ops(fresh_process, exported):
    tensorflow_ops, text_ops = set(fresh_process["tensorflow_ops"]), set(fresh_process["text_ops"])
    assert "SentencepieceOp" in text_ops and "XlaCallModule" in tensorflow_ops
    ops, problems = audit_saved_model(exported, tensorflow_ops | text_ops)
    assert problems == []
    assert ops & text_ops == {
        "SentencepieceOp",
        "SentencepieceTokenizeOp",
        "SentencepieceDetokenizeOp",
    }
    assert {"While", "TopKV2", "UnicodeTranscode"} <= ops


def test_audit_flags_xla_and_unknown_ops(tmp_path):
    from tensorflow.compiler.tf2xla.python.xla import dynamic_update_slice

    module = tf.Module()
    module.update = tf.function(
        lambda x: dynamic_update_slice(x, x[:1], [0]),
        input_signature=[tf.TensorSpec([None], tf.float32)],
        jit_compile=True,
    )
    tf.saved_model.save(module, str(tmp_path), signatures=module.update.get_concrete_function())
    ops, problems = audit_saved_model(str(tmp_path), allowed_ops={"Placeholder"})
    assert "XlaDynamicUpdateSlice" in ops
    assert any("XLA op XlaDynamicUpdateSlice" in p for p in problems)
    assert any("must-compile" in p for p in problems)
    assert any("op StridedSlice" in p and "not in TensorFlow" in p for p in problems)


def test_loaded_signatures_have_the_documented_inputs_and_outputs(loaded):
    assert set(loaded.signatures) == {"serving_default", "translate_ids"}
    for signature in ("serving_default", "translate_ids"):
        specs = {
            kind: {
                name: tf.TensorSpec(shape, dtype, name=name)
                for s, k, name, dtype, shape in SIGNATURE_SPECS
                if (s, k) == (signature, kind)
            }
            for kind in ("inputs", "outputs")
        }
        function = loaded.signatures[signature]
        assert function.structured_input_signature == ((), specs["inputs"])
        assert function.structured_outputs == specs["outputs"]


def test_saved_model_cli_lists_both_signatures(exported):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    if not os.path.exists(cli):
        # test_loaded_signatures_have_the_documented_inputs_and_outputs checks the same specs.
        pytest.skip("saved_model_cli is not installed next to the interpreter")
    result = subprocess.run(
        [cli, "show", "--dir", exported, "--all"],
        env=SUBPROCESS_ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    text = " ".join(result.stdout.split())
    dtypes = {
        tf.string: "DT_STRING",
        tf.float32: "DT_FLOAT",
        tf.bool: "DT_BOOL",
        tf.int32: "DT_INT32",
    }
    for signature, kind, name, dtype, shape in SIGNATURE_SPECS:
        section = text.split(f"signature_def['{signature}']")[1].split("signature_def[")[0]
        dims = ", ".join("-1" for _ in shape)
        assert f"{kind}['{name}'] tensor_info: dtype: {dtypes[dtype]} shape: ({dims})" in section
    assert "Method name is: tensorflow/serving/predict" in text


def test_settings_asset_records_the_decoding(exported):
    with open(os.path.join(exported, "assets", SETTINGS_FILE), encoding="utf-8") as file:
        settings = json.load(file)
    assert settings["decoding"] == {
        "search": "beam",
        **DECODING,
        "length_penalty_rule": "gnmt",
        "batch_tokens": 4096,
        "quantize": None,
    }
    assert settings["special_ids"] == {"pad_id": 0, "bos_id": 2, "eos_id": 3}
    assert settings["versions"]["tensorflow"] == tf.__version__
    assert set(settings["signatures"]) == {"serving_default", "translate_ids"}


def test_bad_requests_give_defined_results(serve, trained):
    text, ids = serve
    _, _, english, _, translator = trained

    def translate(batch):
        outputs = text(sentences=tf.constant(batch, tf.string))
        return (
            [t.decode("utf-8") for t in outputs["translations"].numpy()],
            outputs["scores"].numpy().tolist(),
            outputs["truncated"].numpy().tolist(),
        )

    reference = translate([english[0]])
    assert translate(["", " \t\n\u3000"]) == (["", ""], [0.0, 0.0], [False, False])
    words = (" ".join(english[20:40]).split() * 1000)[:5000]
    long_input = " ".join(words)  # far beyond max_source_length: cut, and flagged
    translations, _, truncated = translate([long_input])
    assert len(words) == 5000 and truncated == [True]
    assert translations == translator.translate([long_input])
    invalid = [b"\xff\xfe" + english[7].encode(), b"caf\xc3", b"\xc0\xaf"]
    assert translate(invalid)[0] == translator.translate(
        [b.decode("utf-8", errors="replace") for b in invalid]
    )
    assert translate([]) == ([], [], [])
    outputs = ids(token_ids=tf.zeros([0, 0], tf.int32))
    assert outputs["token_ids"].shape[0] == 0 and outputs["scores"].shape == (0,)
    for bad, message in [([[5, 600]], "vocabulary size 160"), ([[5, -1]], "must be >= 0")]:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            ids(token_ids=tf.constant(bad, tf.int32))
    assert translate([english[0]]) == reference  # the loaded model still serves


def test_a_wrong_rank_request_names_the_expected_shape(serve, trained):
    """The signatures declare [batch] and [batch, length], which a call does not enforce."""
    text, ids = serve
    english = trained[2]
    for bad in (english[0], [[english[0], english[1]]], [[english[0]], [english[1]]]):
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape \[batch\], one sentence"):
            text(sentences=tf.constant(bad, tf.string))
    for bad in (5, [5, 6], [[[5, 6]]]):
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape \[batch, length\]"):
            ids(token_ids=tf.constant(bad, tf.int32))
    outputs = text(sentences=tf.constant([english[0], english[1]]))
    assert outputs["translations"].shape == outputs["scores"].shape == (2,)


def test_ids_signature_matches_text_signature(serve, trained):
    text, ids = serve
    _, tokenizer, english, _, _ = trained
    batch = [english[8], english[9][:12], ""]
    pieces = to_token_lists(tokenizer(batch))
    token_ids = np.zeros((len(batch), max(map(len, pieces))), "int32")
    for row, piece_ids in enumerate(pieces):
        token_ids[row, : len(piece_ids)] = piece_ids
    by_ids = ids(token_ids=tf.constant(token_ids))
    by_text = text(sentences=tf.constant(batch))
    outputs = [[int(t) for t in row if t != 0] for row in by_ids["token_ids"].numpy()]
    texts = tokenizer.detokenize(outputs)
    texts = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in np.asarray(texts)]
    assert texts == [t.decode("utf-8") for t in by_text["translations"].numpy()]
    np.testing.assert_array_equal(by_ids["scores"].numpy(), by_text["scores"].numpy())


def test_concurrent_requests_get_the_sequential_outputs(serve, trained):
    text, _ = serve
    english = trained[2]
    rng = np.random.default_rng(0)
    pool = [sentence[: rng.integers(4, 30)] for sentence in english[10:40]] + ["", " "]
    requests = [list(rng.choice(pool, size=rng.integers(1, 4))) for _ in range(50)]

    def send(batch):
        outputs = text(sentences=tf.constant(batch))
        return outputs["translations"].numpy().tolist(), outputs["scores"].numpy().tobytes()

    sequential = [send(batch) for batch in requests]
    results, errors = {}, []

    def client(index):
        try:
            order = np.random.default_rng(index).permutation(len(requests))
            results[index] = {int(i): send(requests[i]) for i in order}
        except Exception as error:  # reported below, with the thread's index
            errors.append((index, error))

    threads = [threading.Thread(target=client, args=(index,)) for index in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for index in range(16):
        assert [results[index][i] for i in range(len(requests))] == sequential


def test_export_checks_its_arguments(trained, exported):
    model, tokenizer, *_ = trained
    with pytest.raises(FileExistsError, match="overwrite"):
        export_saved_model(model, tokenizer, exported, **DECODING)
    with pytest.raises(ValueError, match="beam_size"):
        export_saved_model(model, tokenizer, exported + "-new", beam_size=0)
    assert not os.path.exists(exported + "-new")
    assert sorted(os.listdir(os.path.dirname(exported))) == ["1"]  # no temporary left


def test_learned_positions_keep_max_position_minus_extra_source_ids(
    learned, learned_exported, trained, tmp_path
):
    model, translator = learned
    _, tokenizer, english, *_ = trained
    with open(os.path.join(learned_exported, "assets", SETTINGS_FILE), encoding="utf-8") as file:
        decoding = json.load(file)["decoding"]
    assert decoding == {
        "search": "beam",
        **LEARNED_DECODING,
        "max_source_length": LEARNED_MAX_SOURCE_LENGTH,
        "length_penalty_rule": "gnmt",
        "batch_tokens": 4096,
        "quantize": None,
    }
    # One id more and the last decoder position would be max_position, past the table.
    with pytest.raises(ValueError, match=r"`max_source_length` must be <= 12\. Received: 13"):
        export_saved_model(
            model, tokenizer, tmp_path / "1", **LEARNED_DECODING, max_source_length=13
        )
    assert os.listdir(tmp_path) == []
    signatures = tf.saved_model.load(learned_exported).signatures
    batch = [" ".join(english[20:30]), english[0][:8]]
    outputs = signatures["serving_default"](sentences=tf.constant(batch))
    translations, scores = translator.translate(batch, return_scores=True)
    assert [t.decode("utf-8") for t in outputs["translations"].numpy()] == translations
    np.testing.assert_allclose(outputs["scores"].numpy(), scores, atol=1e-4)
    assert outputs["truncated"].numpy().tolist() == [True, False]
    pieces = to_token_lists(tokenizer(batch))
    token_ids = np.zeros((2, len(pieces[0])), "int32")
    for row, piece_ids in enumerate(pieces):
        token_ids[row, : len(piece_ids)] = piece_ids
    by_ids = signatures["translate_ids"](token_ids=tf.constant(token_ids))["token_ids"].numpy()
    # No hypothesis ends early: each gives (source ids, EOS included) + max_extra_length ids,
    # so the cut row decodes at positions 0 .. 12 + 3 = max_position - 1.
    lengths = [LEARNED_MAX_SOURCE_LENGTH, len(pieces[1]) + 1]
    assert len(pieces[0]) + 1 > LEARNED_MAX_SOURCE_LENGTH
    assert (by_ids != 0).sum(axis=1).tolist() == [n + 3 for n in lengths]


def test_overwrite_replaces_the_export_and_leaves_nothing_behind(
    learned, learned_exported, trained, expected
):
    model, tokenizer, _, sentences, _ = trained
    parent = os.path.dirname(learned_exported)
    assert os.listdir(parent) == ["1"]  # no temporary or old directory left
    with open(os.path.join(learned_exported, "saved_model.pb"), "rb") as file:
        graph = file.read()
    # Without overwrite the existing export is kept.
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        export_saved_model(model, tokenizer, learned_exported, **DECODING)
    assert os.listdir(parent) == ["1"]
    with open(os.path.join(learned_exported, "saved_model.pb"), "rb") as file:
        assert file.read() == graph
    serve = tf.saved_model.load(learned_exported).signatures["serving_default"]
    batch = [sentences[0], sentences[5]]
    served = [
        t.decode("utf-8") for t in serve(sentences=tf.constant(batch))["translations"].numpy()
    ]
    assert served == learned[1].translate(batch)
    assert served != [expected[0][0], expected[0][5]]  # what the first export served


def test_default_source_limit_follows_the_position_encoding():
    # Sinusoids have no table: every source position up to max_position is encodable, and
    # decoding past it too. A learned table needs room for max_extra_length + 1 more.
    sinusoidal = small_config(VOCABULARY_SIZE, max_position=40)
    assert default_max_source_length(sinusoidal, max_extra_length=4) == 40
    learned = small_config(VOCABULARY_SIZE, max_position=40, position_embedding="learned")
    assert default_max_source_length(learned, max_extra_length=4) == 40 - 4 - 1


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="TranslationModule traces the TensorFlow-backend model (JAX exports in a subprocess)",
)
def test_sub_batches_by_length_give_the_one_batch_outputs_in_request_order(trained):
    model, tokenizer, english, _, _ = trained
    # Mixed lengths, blanks among them, and a long row made of several sentences.
    request = [english[20], "", english[21][:9], " ".join(english[22:26]), english[23], "  "]
    request += english[30:36]
    outputs = {}
    for batch_tokens in (20, 10**6):  # sub-batches of a few rows; one batch
        module = TranslationModule(model, tokenizer, **DECODING, batch_tokens=batch_tokens)
        result = module.translate(tf.constant(request))
        outputs[batch_tokens] = {name: value.numpy() for name, value in result.items()}
    split, whole = outputs[20], outputs[10**6]
    np.testing.assert_array_equal(split["translations"], whole["translations"])
    np.testing.assert_array_equal(split["truncated"], whole["truncated"])
    np.testing.assert_allclose(split["scores"], whole["scores"], rtol=1e-5)
    assert split["translations"][1] == split["translations"][5] == b""
    with pytest.raises(ValueError, match="batch_tokens"):
        TranslationModule(model, tokenizer, **DECODING, batch_tokens=0)
