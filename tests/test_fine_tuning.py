"""Fine-tuning from the command line: `train --init-from MODEL.keras` and `--vocabulary FILE`.

A small quickstart model, trained for a few hundred steps on the generated statements, is
fine-tuned on a second generated domain (polite requests, `domain="requests"`): its BLEU
there must rise clearly; its BLEU on the statements afterwards is reported. The commands
run in this process through `keras_transformer.cli.main`, as `keras-transformer` runs them.

Those two trainings take a minute or two, so they run in one suite only, under PyTorch, which
runs them eagerly, with nothing to trace or compile, and whose suite trains the small model
anyway for the backend-independent argument checks: what a backend does in them is its
ordinary training (tests/test_learning.py, tests/test_resume.py check it on every backend).
On every backend, a one-step run with a vanishing learning rate must end with the model
file's weights: the start from the file.
"""

import hashlib
import json
import math
import shutil
import zipfile

import keras
import numpy as np
import pytest
import sacrebleu
import sentencepiece as spm
from conftest import BACKEND_INDEPENDENT, only_under, small_config

from keras_transformer import Seq2SeqTransformer, cli
from keras_transformer.export import load_translation_model, save_translation_model
from keras_transformer.synthetic import generate_synthetic_pairs, write_synthetic_corpus
from keras_transformer.synthetic import lexicon as lex
from keras_transformer.text import SubwordTokenizer, read_lines, train_vocabulary

# A one-layer width-64 model: learns something of the task in 300 steps.
MODEL = [
    "--model-override", "num_layers=1", "--model-override", "d_model=64",
    "--model-override", "num_heads=2", "--model-override", "intermediate_dim=128",
]  # fmt: skip
# Short runs: one checkpoint kept as the final model, no validation or SavedModel, greedy-
# like beam 1 on the test split, four batch shapes (bucket lengths 8, 16, 32, 64).
FAST = [
    "--token-budget", "2048", "--average-last", "1", "--no-validate", "--no-export",
    "--beam-size", "1", "--verbose", "0", "--pipeline-override", "bucket_growth=2.0",
    "--metrics", "bleu",
]  # fmt: skip
BASE_STEPS = 300
FINE_TUNING_STEPS = 150
TRAINS_FOR_MINUTES = only_under(
    "torch",
    "trains two small models for a minute or two; on the other backends the start from the "
    "file is checked by test_the_run_starts_from_the_model_files_weights",
)


def train(*arguments):
    """`keras-transformer train ARGUMENTS` in this process; its exit status."""
    try:
        return cli.main(["train", *map(str, arguments)])
    except SystemExit as exit_:  # a user error found while checking the arguments
        return exit_.code


def bleu_of(model_path, sources, references, output):
    """sacreBLEU of `keras-transformer translate --beam-size 1` on `sources`."""
    status = cli.main(
        ["translate", "--model", str(model_path), "--input", str(sources)]
        + ["--output", str(output), "--beam-size", "1"]
    )
    assert status == 0
    hypotheses = read_lines(output)
    return sacrebleu.corpus_bleu(hypotheses, [read_lines(references)]).score


@pytest.fixture(scope="module", autouse=True)
def _shared_jax_compilations(tmp_path_factory):
    """On JAX, the runs of this file share one cache of compiled programs: the fine-tuning
    runs load the base run's training steps and searches (same shapes) instead of compiling
    them again. (A run leaves a cache folder set by its user as it is.)"""
    if keras.backend.backend() != "jax":
        yield
        return
    import jax

    settings = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
    before = [getattr(jax.config, name) for name in settings]
    jax.config.update(settings[0], str(tmp_path_factory.mktemp("xla_cache")))
    jax.config.update(settings[1], 0.0)
    yield
    for name, value in zip(settings, before, strict=True):
        jax.config.update(name, value)


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """The quickstart recipe on its generated statements, small: `runs/quickstart`'s files."""
    output = tmp_path_factory.mktemp("quickstart") / "run"
    status = train(
        "--output-dir", output, "--synthetic-sizes", 3000, 20, 40, "--vocabulary-size", 400,
        "--max-steps", BASE_STEPS, "--warmup-steps", 100, "--checkpoint-every-steps",
        BASE_STEPS, "--log-every-steps", 1, *MODEL, *FAST,
    )  # fmt: skip
    assert status == 0
    return output


@pytest.fixture(scope="module")
def requests_data(tmp_path_factory):
    """The second domain: generated polite requests (same words, another sentence form)."""
    directory = tmp_path_factory.mktemp("requests")
    write_synthetic_corpus(
        directory, train_size=3000, valid_size=20, test_size=40, seed=1, domain="requests"
    )
    # Four short test sentences, for runs whose test scores are not the point (one shape).
    for language in ("en", "de"):
        lines = read_lines(directory / f"valid.{language}")[:4]
        (directory / f"short.{language}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def fine_tuning_command(base_run, requests_data, output, steps=FINE_TUNING_STEPS, *more):
    return [
        "--init-from", base_run / "model.keras", "--data-dir", requests_data,
        "--output-dir", output, "--max-steps", steps, "--warmup-steps", 50,
        "--checkpoint-every-steps", 50, "--log-every-steps", 1, *FAST, *more,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def fine_tuned(base_run, requests_data, tmp_path_factory):
    output = tmp_path_factory.mktemp("fine_tuned") / "run"
    assert train(*fine_tuning_command(base_run, requests_data, output)) == 0
    return output


def losses(run):
    """`{step: loss}` of a run's train_log.csv."""
    rows = (run / "train_log.csv").read_text().splitlines()[1:]
    return {int(row.split(",")[0]): float(row.split(",")[1]) for row in rows}


@TRAINS_FOR_MINUTES
def test_fine_tuning_raises_bleu_on_the_new_domain(
    base_run, requests_data, fine_tuned, tmp_path, record_property
):
    before = bleu_of(
        base_run / "model.keras",
        requests_data / "test.en",
        requests_data / "test.de",
        tmp_path / "before.hyp",
    )
    after = json.loads((fine_tuned / "scores.json").read_text())["bleu"]
    # The run's own score is that of its translations, by sacreBLEU's API.
    hypotheses = read_lines(fine_tuned / "test.de.hyp")
    references = read_lines(requests_data / "test.de")
    assert after == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    # The old domain after fine-tuning: reported, not asserted (it may well fall).
    old_before = json.loads((base_run / "scores.json").read_text())["bleu"]
    old_after = bleu_of(
        fine_tuned / "model.keras",
        base_run / "data" / "test.en",
        base_run / "data" / "test.de",
        tmp_path / "old.hyp",
    )
    report = {
        "requests_bleu_before": before,
        "requests_bleu_after": after,
        "statements_bleu_before": old_before,
        "statements_bleu_after": old_after,
    }
    print(f"\nfine-tuning on requests ({keras.backend.backend()}): {report}")
    for name, value in report.items():
        record_property(name, value)
    assert after >= before + 10, report


@TRAINS_FOR_MINUTES
def test_fine_tuning_starts_from_the_model_and_its_tokenizer(base_run, fine_tuned):
    # The first update's loss is the trained model's on the new data, far below a fresh
    # model's (which starts near ln V, as the base run's first step shows).
    base_first, tuned_first = losses(base_run)[1], losses(fine_tuned)[1]
    assert base_first > 0.8 * math.log(400)
    assert tuned_first < base_first - 1.5, (base_first, tuned_first)
    # The tokenizer is the model's: no vocabulary was trained.
    assert (fine_tuned / "vocabulary.model").read_bytes() == (
        base_run / "vocabulary.model"
    ).read_bytes()
    settings = json.loads((fine_tuned / "config.json").read_text())
    model_file = base_run / "model.keras"
    assert settings["init_from"] == {
        "path": str(model_file),
        "sha256": hashlib.sha256(model_file.read_bytes()).hexdigest(),
    }
    base_settings = json.loads((base_run / "config.json").read_text())
    assert settings["model"] == base_settings["model"]  # the file's architecture
    assert settings["experiment"]["model"]["model_overrides"] == {}  # not the recipe's
    # Its own schedule: warmup 50 (the base run's was 100), from step 1.
    with zipfile.ZipFile(fine_tuned / "model.keras") as archive:
        saved = json.loads(archive.read("config.json"))
    schedule = saved["compile_config"]["optimizer"]["config"]["learning_rate"]["config"]
    assert schedule["warmup_steps"] == 50


@TRAINS_FOR_MINUTES
def test_a_resumed_fine_tuning_run_continues_it(base_run, requests_data, fine_tuned, tmp_path):
    run = tmp_path / "resumed"
    shutil.copytree(fine_tuned, run)
    steps = FINE_TUNING_STEPS + 5
    short_test = ("--test-split", "short")
    assert train(*fine_tuning_command(base_run, requests_data, run, steps, *short_test)) == 0
    logged = losses(run)
    assert sorted(logged)[-6:] == list(range(FINE_TUNING_STEPS, steps + 1))
    # Continued from the checkpoint, not from the base model again: the loss goes on at
    # the fine-tuned level.
    assert logged[FINE_TUNING_STEPS + 1] < losses(fine_tuned)[1] - 0.3
    # A model file that changed since the run started: refused, nothing trained.
    settings = json.loads((run / "config.json").read_text())
    settings["init_from"]["sha256"] = "0" * 64
    (run / "config.json").write_text(json.dumps(settings))
    assert train(*fine_tuning_command(base_run, requests_data, run, steps + 5, *short_test)) == 2
    assert max(losses(run)) == steps


@TRAINS_FOR_MINUTES
def test_vocabulary_flag_reuses_a_sentencepiece_model(base_run, requests_data, tmp_path):
    output = tmp_path / "run"
    status = train(
        "--vocabulary", base_run / "vocabulary.model", "--data-dir", requests_data,
        "--output-dir", output, "--max-steps", 2, "--checkpoint-every-steps", 2,
        "--test-split", "short", "--max-extra-length", 5, *MODEL, *FAST,
    )  # fmt: skip
    assert status == 0
    given = SubwordTokenizer(proto=(base_run / "vocabulary.model").read_bytes())
    used = SubwordTokenizer(proto=(output / "vocabulary.model").read_bytes())
    assert used.get_vocabulary() == given.get_vocabulary()
    settings = json.loads((output / "config.json").read_text())
    assert settings["experiment"]["data"]["vocabulary_file"] == str(base_run / "vocabulary.model")
    assert settings["model"]["vocabulary_size"] == given.vocabulary_size() == 400


def test_the_run_starts_from_the_model_files_weights(requests_data, tmp_path):
    tokenizer = train_vocabulary(read_lines(requests_data / "train.en")[:500], 120)
    model = Seq2SeqTransformer(small_config(vocabulary_size=120, activation_dropout=0.1))
    model.build()
    save_translation_model(model, tokenizer, tmp_path / "start.keras")
    output = tmp_path / "run"
    # One update at a rate of about 1e-12: the weights stay the file's to float32 rounding.
    status = train(
        "--init-from", tmp_path / "start.keras", "--data-dir", requests_data,
        "--output-dir", output, "--max-steps", 1, "--learning-rate-scale", 1e-12,
        "--warmup-steps", 1, "--checkpoint-every-steps", 1, "--test-split", "short",
        "--max-extra-length", 2, "--model-override", "dropout=0.2", *FAST,
    )  # fmt: skip
    assert status == 0
    tuned, tuned_tokenizer = load_translation_model(output / "model.keras", compile=False)
    assert tuned_tokenizer.get_vocabulary() == tokenizer.get_vocabulary()
    assert tuned.config == model.config.replace(dropout=0.2)  # the file's, its dropout changed
    fresh = Seq2SeqTransformer(model.config)
    fresh.build()
    pairs = list(zip(model.get_weights(), tuned.get_weights(), strict=True))
    assert all(np.allclose(before, after, rtol=0, atol=1e-6) for before, after in pairs)
    # Not any model's: a model built anew has other weights.
    assert not np.allclose(fresh.get_weights()[0], tuned.get_weights()[0], atol=1e-3)


@BACKEND_INDEPENDENT
def test_the_requests_domain_is_the_formal_imperative():
    english, german = generate_synthetic_pairs(300, seed=5, domain="requests")
    assert (english, german) == generate_synthetic_pairs(300, seed=5, domain="requests")
    for source, target in zip(english, german, strict=True):
        words = source.rstrip(".").split()
        verb = next(
            v for v in lex.VERBS if words[1 : 1 + len(v.english.split())] == v.english.split()
        )
        main_clause = target.rstrip(".").split(", weil ")[0].split()
        # "Bitte" + the plural verb form + "Sie", a separable particle at the clause's end.
        assert words[0] == "Please" and main_clause[:3] == ["Bitte", verb.german_plural, "Sie"]
        assert main_clause[-1] == verb.particle or not verb.particle, (source, target)
    statements, _ = generate_synthetic_pairs(300, seed=5)
    assert not any(sentence.startswith("Please") for sentence in statements)
    with pytest.raises(ValueError, match="`domain` must be one of"):
        generate_synthetic_pairs(1, domain="questions")


def one_line_error(capsys, *arguments):
    """The single stderr line of a `train` refused with status 2."""
    with pytest.raises(SystemExit) as exit_info:
        status = train(*arguments)
        raise SystemExit(status)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "Traceback" not in error, error
    return error


@BACKEND_INDEPENDENT
def test_bad_init_from_and_vocabulary_files_are_one_line_errors(base_run, tmp_path, capsys):
    output = ["--output-dir", tmp_path / "never", "--max-steps", 1]
    missing = tmp_path / "missing.keras"
    assert "--init-from" in one_line_error(capsys, "--init-from", missing, *output)
    corrupt = tmp_path / "corrupt.keras"
    corrupt.write_bytes(b"\x00not a zip archive" * 10)
    error = one_line_error(capsys, "--init-from", corrupt, *output)
    assert f"--init-from {corrupt}: not a .keras (zip) file, or truncated" in error
    # A .keras file of another model: not a translation model.
    other = tmp_path / "other.keras"
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save(other)
    error = one_line_error(capsys, "--init-from", other, *output)
    assert "holds a Sequential; expected a translation model file" in error
    # A truncated translation model file.
    truncated = tmp_path / "truncated.keras"
    data = (base_run / "model.keras").read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    error = one_line_error(capsys, "--init-from", truncated, *output)
    assert f"--init-from {truncated}: not a .keras (zip) file, or truncated" in error
    # A damaged member (a flipped byte in the weights): the CRC-32 check names it.
    damaged = tmp_path / "damaged.keras"
    middle = data.index(b"model.weights.h5") + 4096
    damaged.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    error = one_line_error(capsys, "--init-from", damaged, *output)
    assert f"--init-from {damaged}" in error and "CRC-32" in error
    # Settings that contradict the model file.
    model = base_run / "model.keras"
    error = one_line_error(
        capsys, "--init-from", model, "--model-override", "num_layers=3", *output
    )
    assert "may set only dropout, attention_dropout, activation_dropout" in error
    error = one_line_error(capsys, "--init-from", model, "--vocabulary-size", 500, *output)
    assert "vocabulary_size" in error and "--init-from's model file" in error
    vocabulary = base_run / "vocabulary.model"
    error = one_line_error(capsys, "--init-from", model, "--vocabulary", vocabulary, *output)
    assert "both choose the tokenizer" in error
    # A SentencePiece model with SentencePiece's own special ids (unk 0, <s> 1, </s> 2).
    prefix = tmp_path / "plain"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a b c d e f g h", "h g f e d c b a"] * 20),
        model_prefix=str(prefix),
        vocab_size=12,
        minloglevel=2,
    )
    error = one_line_error(capsys, "--vocabulary", f"{prefix}.model", *output)
    assert f"--vocabulary {prefix}.model" in error and "pad_id=0" in error
    assert "--vocabulary" in one_line_error(capsys, "--vocabulary", missing, *output)
    assert not (tmp_path / "never").exists()
