"""`keras-transformer translate` as users run it: a stream of lines in, only translations out.

A tiny model is saved once per module; the real command runs in subprocesses (stdout must
hold exactly the translations, stdin is streamed) and in-process (formats, refusals, errors),
and its outputs are compared with `Translator`'s own. The command's own code does not depend
on the Keras backend: only the pipe test, which loads and decodes through the whole path, runs
under every backend.
"""

import json
import math
import os
import select
import subprocess
import sys
import threading
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import BACKEND_INDEPENDENT, small_config

from keras_transformer import Seq2SeqTransformer
from keras_transformer.commands.translate import main
from keras_transformer.decoding import Translator
from keras_transformer.export import save_translation_model
from keras_transformer.export.export_saved_model import export_saved_model
from keras_transformer.synthetic import generate_synthetic_pairs
from keras_transformer.text import train_vocabulary
from keras_transformer.text.line_chunks import LineChunks
from keras_transformer.utils import run_directory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
# Short outputs keep decoding fast; the flags are the command's own.
DECODING = ["--max-extra-length", "3"]
INVALID = b"caf\xc3 \xff tables \xed\xa0\x80 two"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A run directory with a tiny model.keras, and the model, tokenizer and sentences."""
    english, german = generate_synthetic_pairs(300, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=160)
    keras.utils.set_random_seed(7)
    config = small_config(160)
    # Untrained: its outputs differ from sentence to sentence, so any mix-up of the order shows.
    model = Seq2SeqTransformer(config)
    run = tmp_path_factory.mktemp("run")
    save_translation_model(model, tokenizer, run / run_directory.MODEL_FILE)
    # Distinct lengths and a few blank lines: sorting inside a chunk must be undone.
    sentences = [s[: 5 + (i * 7) % 60] for i, s in enumerate(english[:120])]
    sentences[3] = ""
    sentences[50] = "   "
    return run, model, tokenizer, sentences


@pytest.fixture(scope="module")
def expected(saved):
    _, model, tokenizer, sentences = saved
    translations = Translator(model, tokenizer, max_extra_length=3).translate(sentences, verbose=0)
    assert len(set(translations)) > 20  # a mix-up of the order shows
    return translations


def command(*args, **kwargs):
    return [sys.executable, "-m", "keras_transformer", "translate", *args]


def run_in_process(capsys, *args):
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_pipe_stdout_holds_exactly_the_translations(saved, expected):
    run, _, _, sentences = saved
    # More than 100 lines: Keras' progress bar once came first on stdout from there on.
    stdin = "".join(f"{s}\n" for s in sentences).encode("utf-8") + INVALID + b"\n"
    result = subprocess.run(
        command("--model", str(run / "model.keras"), *DECODING),
        input=stdin,
        capture_output=True,
        env=ENV,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    lines = result.stdout.decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines) == len(sentences) + 2
    assert lines[: len(sentences)] == expected
    assert b"\x1b" not in result.stdout  # no progress bar (stderr is not a terminal)
    assert "1 input lines had invalid UTF-8" in result.stderr.decode()
    # The same bytes from a file, and from the SavedModel, give the same U+FFFD text.
    (run / "invalid.txt").write_bytes(INVALID + b"\n")
    _, model, tokenizer, _ = saved
    decoded = INVALID.decode("utf-8", errors="replace")
    stdin_translation = lines[len(sentences)]
    assert (
        stdin_translation
        == Translator(model, tokenizer, max_extra_length=3).translate([decoded], verbose=0)[0]
    )
    # The SavedModel reads the bytes with TensorFlow's string ops whatever the training
    # backend; test_export covers exporting from JAX and torch.
    if keras.backend.backend() == "tensorflow":
        assert _saved_model_translation(run, model, tokenizer, INVALID) == stdin_translation


def _saved_model_translation(run, model, tokenizer, raw):
    path = run / "saved_model"
    export_saved_model(
        model, tokenizer, path, beam_size=4, alpha=0.6, max_extra_length=3, overwrite=True
    )
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    return serve(sentences=tf.constant([raw]))["translations"].numpy()[0].decode("utf-8")


@BACKEND_INDEPENDENT
def test_input_file_with_invalid_utf8_reads_as_replacement_characters(saved, capsys):
    run, model, tokenizer, _ = saved
    source = run / "invalid_input.txt"
    source.write_bytes(b"two tables\n" + INVALID + b"\n")
    status, out, err = run_in_process(
        capsys, "--run-dir", str(run), "--input", str(source), *DECODING
    )
    assert status == 0
    translator = Translator(model, tokenizer, max_extra_length=3)
    assert out.split("\n")[:-1] == translator.translate(
        ["two tables", INVALID.decode("utf-8", errors="replace")], verbose=0
    )
    assert "(first: line 2)" in err


@BACKEND_INDEPENDENT
def test_line_chunks_end_when_a_pipe_pauses():
    read_end, write_end = os.pipe()
    os.write(write_end, b"first\nsecond\nthi")
    chunks, received = LineChunks(os.fdopen(read_end, "rb"), 10, pause_seconds=0.05), []
    iterator = iter(chunks)
    # The writer stays open: the lines read so far come out after the pause, not at EOF.
    reader = threading.Thread(target=lambda: received.append(next(iterator)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert received == [["first", "second"]]
    os.write(write_end, b"rd\r\n" + INVALID)
    os.close(write_end)
    assert list(iterator) == [["third", INVALID.decode("utf-8", errors="replace")]]
    assert (chunks.lines, chunks.replaced, chunks.first_replaced) == (4, 1, 4)


@BACKEND_INDEPENDENT
def test_lines_come_out_before_stdin_closes(saved):
    run, model, tokenizer, _ = saved
    sentences = ["A dog.", "Two men."]  # one bucket: one compiled shape
    process = subprocess.Popen(
        command("--model", str(run), *DECODING, "--chunk-size", "1"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    try:
        process.stdin.write("".join(f"{s}\n" for s in sentences).encode())
        process.stdin.flush()
        received = b""
        while received.count(b"\n") < 2:
            ready, _, _ = select.select([process.stdout], [], [], 300)
            assert ready, f"no output while stdin stays open; got {received!r}"
            received += os.read(process.stdout.fileno(), 1 << 16)
        assert process.poll() is None  # still waiting for input
        process.stdin.close()
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
    translator = Translator(model, tokenizer, max_extra_length=3)
    assert received.decode().split("\n")[:2] == translator.translate(sentences, verbose=0)


@BACKEND_INDEPENDENT
def test_chunked_output_equals_unchunked_and_goes_to_a_file(saved, expected, capsys, tmp_path):
    run, _, _, sentences = saved
    source = tmp_path / "input.txt"
    source.write_text("\n".join(sentences), encoding="utf-8")  # no final newline
    outputs = []
    for chunk_size in ("1000", "7"):
        output = tmp_path / f"output{chunk_size}.txt"
        arguments = ["--model", str(run), "--input", str(source), "--output", str(output)]
        status, out, _ = run_in_process(capsys, *arguments, *DECODING, "--chunk-size", chunk_size)
        assert status == 0 and out == ""
        outputs.append(output.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1] == "".join(f"{t}\n" for t in expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "input.txt",
        "output1000.txt",
        "output7.txt",
    ]


@BACKEND_INDEPENDENT
def test_n_best_formats_agree_with_the_translator(saved, expected, capsys, tmp_path):
    run, model, tokenizer, sentences = saved
    sentences = sentences[:12]
    source = tmp_path / "input.txt"
    source.write_text("".join(f"{s}\n" for s in sentences), encoding="utf-8")
    translator = Translator(model, tokenizer, max_extra_length=3, num_results=3)
    n_best = translator.translate_n_best(sentences, verbose=0)
    base = ["--model", str(run / "model.keras"), "--input", str(source), *DECODING]
    base += ["--n-best", "3"]

    status, out, _ = run_in_process(capsys, *base, "--format", "jsonl")
    assert status == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["line"] for r in records] == list(range(1, 13))
    for record, hypotheses, best in zip(records, n_best, expected[:12], strict=True):
        assert record["translation"] == best == hypotheses[0][0]
        assert [h["translation"] for h in record["n_best"]] == [t for t, _ in hypotheses]
        scores = [h["score"] for h in record["n_best"]]
        for got, (_, want) in zip(scores, hypotheses, strict=True):
            assert got is None if math.isinf(want) else got == pytest.approx(want)
        finite = [s for s in scores if s is not None]
        assert finite == sorted(finite, reverse=True)
    assert records[3]["translation"] == "" and records[3]["score"] == 0.0

    status, out, _ = run_in_process(capsys, *base, "--format", "tsv")
    rows = [line.split("\t", 3) for line in out.splitlines()]
    assert len(rows) == 3 * len(sentences)
    for index, (line, rank, score, text) in enumerate(rows):
        hypothesis = n_best[index // 3][index % 3]
        assert (int(line), int(rank), text) == (index // 3 + 1, index % 3 + 1, hypothesis[0])
        assert float(score) == pytest.approx(hypothesis[1], abs=1e-5)

    status, out, _ = run_in_process(capsys, *base)
    assert out.splitlines() == [t for hypotheses in n_best for t, _ in hypotheses]


@BACKEND_INDEPENDENT
def test_progress_in_a_log_is_plain_lines(saved, expected, capsys, tmp_path):
    run, model, tokenizer, sentences = saved
    source = tmp_path / "input.txt"
    source.write_text("".join(f"{s}\n" for s in sentences), encoding="utf-8")
    args = ["--model", str(run / "model.keras"), "--input", str(source), *DECODING]
    # stderr is not a terminal here: no progress unless asked for.
    status, out, err = run_in_process(capsys, *args)
    assert status == 0 and out.splitlines() == expected and err == ""
    # Asked for: a plain line at the end (no carriage returns or colour codes), stdout unchanged.
    status, out, err = run_in_process(capsys, *args, "--progress", "--chunk-size", "50")
    assert status == 0 and out.splitlines() == expected
    assert "\r" not in err and "\x1b" not in err
    assert err.splitlines()[-1].startswith(f"{len(sentences)} lines | ")
    # The recipes' progress (Translator's verbose=1) follows the same rule.
    translator = Translator(model, tokenizer, max_extra_length=3)
    assert translator.translate(sentences, verbose=1) == expected
    out, err = capsys.readouterr()
    blank = sum(not s.strip() for s in sentences)
    assert out == "" and "\r" not in err and "\x1b" not in err
    done = len(sentences) - blank
    assert err.splitlines()[-1].startswith(f"{done}/{done} sentences (100.0%) | ")


@BACKEND_INDEPENDENT
def test_truncation_is_counted_on_stderr(saved, capsys, tmp_path):
    run, model, tokenizer, sentences = saved
    source = tmp_path / "input.txt"
    source.write_text("".join(f"{s}\n" for s in sentences[:6]), encoding="utf-8")
    arguments = ["--model", str(run), "--input", str(source), *DECODING]
    status, out, err = run_in_process(capsys, *arguments, "--max-source-length", "4")
    assert status == 0
    translator = Translator(model, tokenizer, max_extra_length=3, max_source_length=4)
    assert out.splitlines() == translator.translate(sentences[:6], verbose=0)
    assert f"{translator.truncated} sentences were longer than 4 tokens" in err
    assert translator.truncated >= 3


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--max-extra-length", "-1"], "--max-extra-length must be >= 0. Received: -1"),
        (["--beam-size", "0"], "--beam-size must be >= 1"),
        (["--n-best", "5"], "--n-best must be <= --beam-size (4). Received: 5"),
        # Generated flags refuse NaN as they read it, as every `train` number flag does.
        (["--alpha", "nan"], "argument --alpha: expected a number, received 'nan'"),
        (["--alpha", "inf"], "--alpha must be a finite number. Received: inf"),
        (["--alpha", "-0.5"], "--alpha must be >= 0. Received: -0.5"),
        (["--batch-tokens", "0"], "--batch-tokens must be >= 1"),
        (["--chunk-size", "0"], "--chunk-size must be >= 1"),
        (["--max-source-length", "0"], "--max-source-length must be >= 1"),
        (["--format", "xml"], "invalid choice"),
    ],
)
@BACKEND_INDEPENDENT
def test_bad_numbers_exit_2_in_one_line(saved, capsys, flags, message):
    run = saved[0]
    with pytest.raises(SystemExit) as exit_info:
        main(["--model", str(run), *flags])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def model_kinds(run, tmp_path):
    saved_model = tmp_path / "served"
    saved_model.mkdir()
    (saved_model / "saved_model.pb").write_bytes(b"")
    not_zip = tmp_path / "model.keras"
    not_zip.write_text("not a zip")
    empty = tmp_path / "empty_run"
    empty.mkdir()
    return [
        (saved_model, "is a SavedModel directory; translate takes a .keras model file or a run"),
        (not_zip, "is not a .keras model file (not a zip archive: truncated or corrupt"),
        (empty, "not a run directory (no model.keras; is the run finished?)"),
        (tmp_path / "missing", "no such file or directory"),
    ]


@BACKEND_INDEPENDENT
def test_each_kind_of_model_path_gets_its_one_line_error(saved, capsys, tmp_path):
    for path, message in model_kinds(saved[0], tmp_path):
        with pytest.raises(SystemExit) as exit_info:
            main(["--model", str(path)])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2, path
        assert f"--model {path}" in err and message in err and err.count("\n") == 1, err


@BACKEND_INDEPENDENT
def test_output_that_is_the_input_is_refused(saved, capsys, tmp_path):
    run = saved[0]
    source = tmp_path / "x.txt"
    source.write_text("two tables\n")
    os.symlink(source, tmp_path / "link.txt")
    os.link(source, tmp_path / "hard.txt")
    for output in ("x.txt", "link.txt", "hard.txt", "./x.txt"):
        with pytest.raises(SystemExit) as exit_info:
            main(["--model", str(run), "--input", str(source), "--output", str(tmp_path / output)])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "is the same file as --input" in err and err.count("\n") == 1
    assert source.read_text() == "two tables\n"


@BACKEND_INDEPENDENT
def test_run_directory_resolution(saved, tmp_path):
    run = saved[0]
    resolved = run_directory.RunDirectory(run)
    assert resolved.model_file() == str(run / "model.keras")
    assert run_directory.resolve_model_file(run, "translate") == str(run / "model.keras")
    settings = resolved.model_settings()  # no config.json: the model's own config
    assert Seq2SeqTransformer.from_config(settings).config == saved[1].config
    with zipfile.ZipFile(run / "model.keras") as archive:
        assert "config.json" in archive.namelist()
    (tmp_path / "config.json").write_text(json.dumps({"model": {"vocabulary_size": 8}}))
    assert run_directory.RunDirectory(tmp_path).model_settings() == {"vocabulary_size": 8}
    with pytest.raises(ValueError, match="no checkpoints; has the run written a checkpoint"):
        run_directory.RunDirectory(tmp_path).checkpoints_dir()
    (tmp_path / "newstest.de.hyp").write_text("x\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "newstest.de").write_text("y\n")
    hypotheses = run_directory.RunDirectory(tmp_path).hypotheses_file()
    reference = run_directory.RunDirectory(tmp_path).reference_file(hypotheses)
    assert reference == str(tmp_path / "data" / "newstest.de")


def run_module(module, capsys, *args):
    """Runs a `python -m` command's main in-process; returns (status, stderr)."""
    try:
        status = module.main(list(args))
    except SystemExit as exit_info:
        status = exit_info.code
    return status, capsys.readouterr().err


@BACKEND_INDEPENDENT
def test_average_evaluate_export_refuse_their_inputs_and_take_run_dirs(saved, capsys, tmp_path):
    from keras_transformer.commands import average, evaluate, export

    run, model, _, _ = saved
    checkpoints = run / run_directory.CHECKPOINTS_DIR
    checkpoints.mkdir(exist_ok=True)
    other = Seq2SeqTransformer(model.config)
    other.build()
    model.save_weights(checkpoints / "ckpt-00000001.weights.h5")
    other.save_weights(checkpoints / "ckpt-00000002.weights.h5")
    before = (checkpoints / "ckpt-00000002.weights.h5").read_bytes()
    status, err = run_module(
        average,
        capsys,
        "--run-dir",
        str(run),
        "--last",
        "2",
        "--output",
        str(checkpoints / "ckpt-00000002.weights.h5"),
    )
    assert status == 2 and "is the same file as checkpoint" in err and err.count("\n") == 1
    assert (checkpoints / "ckpt-00000002.weights.h5").read_bytes() == before
    # --run-dir: the run's checkpoints, with the model settings of its model.keras.
    output = tmp_path / "averaged.weights.h5"
    status, err = run_module(
        average, capsys, "--run-dir", str(run), "--last", "2", "--output", str(output)
    )
    assert status == 0, err
    averaged = Seq2SeqTransformer(model.config)
    averaged.build()
    averaged.load_weights(output)
    for mean, first, second in zip(averaged.weights, model.weights, other.weights, strict=True):
        want = (keras.ops.convert_to_numpy(first) + keras.ops.convert_to_numpy(second)) / 2
        assert np.allclose(keras.ops.convert_to_numpy(mean), want, atol=1e-6)

    sentence = "Zwei junge Hunde spielen heute im Park.\n"
    (run / "test.de.hyp").write_text(sentence, encoding="utf-8")
    (run / "data").mkdir(exist_ok=True)
    (run / "data" / "test.de").write_text(sentence, encoding="utf-8")
    status, err = run_module(
        evaluate, capsys, "--run-dir", str(run), "--json", str(run / "test.de.hyp")
    )
    assert status == 2 and "--json" in err and "same file as --hypotheses" in err
    assert (run / "test.de.hyp").read_text(encoding="utf-8") == sentence
    status, err = run_module(
        evaluate,
        capsys,
        "--run-dir",
        str(run),
        "--metric",
        "bleu",
        "--json",
        str(tmp_path / "s.json"),
    )
    assert status == 0, err
    assert json.loads((tmp_path / "s.json").read_text())["bleu"] == pytest.approx(100.0)

    model_file = str(run / "model.keras")
    status, err = run_module(export, capsys, "--model", model_file, "--output", model_file)
    assert status == 2 and "is the same file as --model" in err
    status, err = run_module(
        export, capsys, "--run-dir", str(run), "--output", str(run), "--overwrite"
    )
    assert status == 2 and f"--output {run} holds --model" in err
    assert os.path.isfile(model_file)
    for path, message in model_kinds(run, tmp_path):
        status, err = run_module(
            export, capsys, "--model", str(path), "--output", str(tmp_path / "x")
        )
        assert status == 2 and message.replace("translate takes", "export takes") in err, err


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX's compilation cache")
def test_a_second_run_loads_the_compiled_searches(saved, tmp_path):
    run, _, _, sentences = saved
    # A few sentences of several lengths: each run compiles (or loads) a search per batch shape.
    (tmp_path / "input.en").write_text("\n".join(sentences[:12]) + "\n", encoding="utf-8")
    # Every program cached, however fast it compiled (JAX's default keeps those over 1 s).
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"),
                   "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}  # fmt: skip
    environment.pop("JAX_COMPILATION_CACHE_DIR", None)
    cache = tmp_path / "cache" / "keras_transformer" / "xla_cache"

    def translate(output, **extra):
        arguments = ["--run-dir", str(run), "--input", str(tmp_path / "input.en"),
                     "--output", str(tmp_path / output), "--max-extra-length", "3"]  # fmt: skip
        result = subprocess.run(command(*arguments), env={**environment, **extra},
                                capture_output=True, text=True, timeout=300)  # fmt: skip
        assert result.returncode == 0, result.stderr
        return (tmp_path / output).read_text(encoding="utf-8")

    def searches(directory):
        return sorted(path.name for path in directory.glob("jit_stateless-*"))

    first = translate("first.de")
    compiled = searches(cache)
    assert compiled  # the beam search of each batch shape
    # The second run finds every search in the cache: it compiles none, the output is the same.
    assert translate("second.de") == first
    assert searches(cache) == compiled
    # A cache the user chose is the one used.
    chosen = tmp_path / "chosen"
    assert translate("third.de", JAX_COMPILATION_CACHE_DIR=str(chosen)) == first
    assert len(searches(chosen)) == len(compiled) and searches(cache) == compiled
