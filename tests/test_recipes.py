"""The recipes end to end on small local files, and their bad invocations."""

import json
import math
import os
import re
import shutil
import subprocess
import sys

import keras
import pytest
import sacrebleu
from conftest import BACKEND_INDEPENDENT
from process_group import SHORT_OUTPUTS, SMALL_MODEL, write_recipe_data

from keras_transformer.data import make_translation_dataset
from keras_transformer.evaluation.tokenized_bleu import tokenized_bleu
from keras_transformer.experiment import ExperimentConfig
from keras_transformer.experiment.inputs.output_dir_lock import OutputDirLock
from keras_transformer.experiment.run_distribution import RunDistribution
from keras_transformer.text import ParallelCorpus, SubwordTokenizer
from keras_transformer.utils.run_directory import RunDirectory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The recipe runs' batching: three batch shapes on the generated data instead of 16 (wide
# length buckets), as JAX compiles a training step and a validation step per shape.
TOKEN_BUDGET, BUCKET_GROWTH = 1024, 4.0
BATCHING = ("--token-budget", str(TOKEN_BUDGET), "--pipeline-override",
            f"bucket_growth={BUCKET_GROWTH}")  # fmt: skip


def run_recipe(name, *arguments, own_cache=False):
    """Runs `recipes/{name}.py`; with `own_cache`, JAX keeps its programs in the run's folder
    (a user's default) instead of the tests' shared cache (tests/conftest.py)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    if own_cache:
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
    command = [sys.executable, os.path.join(ROOT, "recipes", f"{name}.py"), *arguments]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def wmt_files(tmp_path_factory):
    """WMT-named splits: train.{en,de} and newstest2014.{en,de}, generated."""
    directory = tmp_path_factory.mktemp("wmt14")
    write_recipe_data(directory)
    return directory


@pytest.fixture(scope="module")
def wmt_run(wmt_files, tmp_path_factory):
    output = tmp_path_factory.mktemp("run") / "wmt14_base"
    result = run_recipe(
        "wmt14_base", "--data-dir", str(wmt_files), "--output-dir", str(output),
        "--max-steps", "20", "--vocabulary-size", "300",
        "--checkpoint-every-steps", "10", "--verbose", "0", *SMALL_MODEL,
        "--valid-split", "valid", "--select-on-valid", *SHORT_OUTPUTS,
        *BATCHING, own_cache=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return output, result.stdout, result.stderr


def test_wmt14_base_runs_end_to_end_with_averaging_evaluation_and_export(wmt_run, wmt_files):
    output, stdout, stderr = wmt_run
    # Selection on valid compared the average and each checkpoint.
    selection = [line for line in stdout.splitlines() if line.startswith("valid: selected")]
    assert len(selection) == 1, stdout
    # "valid: selected NAME (scores, lower is better: NAME SCORE, NAME SCORE, ...)"
    head, listed = selection[0].rstrip(")").split(" (scores, lower is better: ")
    candidates = dict(item.rsplit(" ", 1) for item in listed.split(", "))
    assert set(candidates) == {"average of last 2", "ckpt-00000010", "ckpt-00000020", "best"}
    best = min(float(score) for score in candidates.values())
    chosen = head.removeprefix("valid: selected ")
    assert float(candidates[chosen]) == best
    # One line on stderr (stdout is the summary) says what was kept and why; no average is put
    # into the model before the selection.
    final = [line for line in stderr.splitlines() if line.startswith("Final model: ")]
    assert final == [
        f"Final model: {chosen}, the best of 4 candidates on valid by perplexity "
        f"(--select-on-valid; lower is better: {listed})"
    ]
    assert "Averaged" not in stderr
    checkpoints = sorted(os.listdir(output / "checkpoints"))
    assert checkpoints == [
        "best.weights.h5", "ckpt-00000010.weights.h5", "ckpt-00000020.weights.h5",
    ]  # fmt: skip
    # Validated at each checkpoint (the default), in valid_log.csv.
    with open(output / "valid_log.csv") as log:
        assert [line.split(",")[0] for line in log.readlines()] == ["step", "10", "20"]
    hypotheses = (output / "newstest2014.de.hyp").read_text(encoding="utf-8").split("\n")
    assert len(hypotheses) == 12 + 1  # one line per test sentence, final newline
    scores = json.loads((output / "scores.json").read_text())
    assert scores["num_segments"] == 12
    # The written scores are those of the written files, by sacrebleu's own API.
    references = (wmt_files / "newstest2014.de").read_text(encoding="utf-8").split("\n")[:12]
    bleu = sacrebleu.corpus_bleu(hypotheses[:12], [references]).score
    chrf = sacrebleu.corpus_chrf(hypotheses[:12], [references]).score
    assert (scores["bleu"], scores["chrf"]) == pytest.approx((bleu, chrf), abs=1e-9)
    # Tokenized BLEU has its own reference tests (tests/test_evaluation.py); here: same files.
    assert scores["tokenized_bleu"] == tokenized_bleu(hypotheses[:12], [references], "de")
    assert (output / "saved_model" / "saved_model.pb").is_file()
    assert (output / "model.keras").is_file()
    # On JAX the compiled training steps are kept for a resumed run (one per bucket shape).
    cached = [name for name in os.listdir(output) if name == "xla_cache"]
    if keras.backend.backend() == "jax":
        steps = [name for name in os.listdir(output / "xla_cache") if "train_step" in name]
        assert len(steps) >= 2, os.listdir(output / "xla_cache")
    else:
        assert cached == []
    with open(output / "train_log.csv") as log:
        rows = log.readlines()
    assert len(rows) == 2 and rows[1].startswith("20,")  # header, then the last step


def test_every_file_of_the_run_folder_is_named_by_its_run_directory(wmt_run, wmt_files):
    # What the run wrote, listed: the check that no input lies among a run's outputs
    # (`RunDirectory.written_paths`) knows every one of them.
    output = wmt_run[0]
    run = RunDirectory(output)
    files, folders = run.written_paths(str(wmt_files / "newstest2014.de"))
    named = {*files, *folders, run.vocabulary_path}
    assert {str(output / name) for name in os.listdir(output)} <= named
    assert run.model_path in files and run.scores_path in files
    assert run.hypotheses_path("x/newstest2014.de") == str(output / "newstest2014.de.hyp")


@BACKEND_INDEPENDENT
def test_a_lowercase_vocabulary_run_writes_and_scores_lowercase(wmt_files, tmp_path):
    output = tmp_path / "lowercase"
    result = run_recipe(
        "wmt14_base", "--data-dir", str(wmt_files), "--output-dir", str(output),
        "--max-steps", "10", "--vocabulary-size", "300",
        "--checkpoint-every-steps", "10", "--verbose", "0", *SMALL_MODEL,
        "--valid-split", "valid", "--no-export", "--vocabulary-lowercase",
        *SHORT_OUTPUTS, *BATCHING,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    tokenizer = SubwordTokenizer(proto=(output / "vocabulary.model").read_bytes())
    assert all(piece == piece.lower() for piece in tokenizer.get_vocabulary())
    hypotheses = (output / "newstest2014.de.hyp").read_text(encoding="utf-8").split("\n")[:12]
    assert all(line == line.lower() for line in hypotheses)
    references = (wmt_files / "newstest2014.de").read_text(encoding="utf-8").split("\n")[:12]
    assert any(line != line.lower() for line in references)
    scores = json.loads((output / "scores.json").read_text())
    assert "case:lc" in scores["bleu_signature"] and "case:lc" in scores["chrf_signature"]
    bleu = sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True).score
    assert scores["bleu"] == pytest.approx(bleu, abs=1e-9)
    settings = json.loads((output / "config.json").read_text())
    assert settings["experiment"]["data"]["vocabulary_lowercase"]


def test_pipeline_override_reaches_the_training_batches(wmt_run, wmt_files):
    output, stdout, _ = wmt_run
    tokenizer = SubwordTokenizer(proto=(output / "vocabulary.model").read_bytes())
    corpus = ParallelCorpus.from_files(str(wmt_files / "train.en"), str(wmt_files / "train.de"))
    summaries = [
        make_translation_dataset(corpus, tokenizer, token_budget=TOKEN_BUDGET, **growth).summary
        for growth in ({"bucket_growth": BUCKET_GROWTH}, {})
    ]
    assert summaries[0].num_shapes < summaries[1].num_shapes
    printed = "Training data: " + str(summaries[0]).replace("\n", "\n  ")
    assert printed in stdout, stdout


def one_error_line(result, *expected):
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    for text in expected:
        assert text in lines[0], lines[0]


@BACKEND_INDEPENDENT
def test_missing_data_dir_is_one_line(tmp_path):
    result = run_recipe("wmt14_base", "--output-dir", str(tmp_path))
    assert result.returncode == 2
    one_error_line(result, "--data-dir")
    result = run_recipe("wmt14_base", "--data-dir", str(tmp_path / "absent"),
                        "--output-dir", str(tmp_path / "out"))  # fmt: skip
    assert result.returncode == 2
    one_error_line(result, "--data-dir", "absent", "is not a directory")
    assert not (tmp_path / "out").exists()


@BACKEND_INDEPENDENT
def test_wrong_language_pair_is_one_line(tmp_path, wmt_files):
    result = run_recipe("wmt14_base", "--data-dir", str(wmt_files), "--target-language", "ja")
    assert result.returncode == 2
    one_error_line(result, "en-ja", "en-de")


@BACKEND_INDEPENDENT
def test_selection_without_valid_files_fails_before_training(tmp_path, wmt_files):
    output = tmp_path / "run"
    result = run_recipe(
        "wmt14_base", "--data-dir", str(wmt_files), "--output-dir", str(output),
        "--select-on-valid", "--valid-split", "missing", *SMALL_MODEL,
    )  # fmt: skip
    assert result.returncode == 2
    one_error_line(result, "valid split", os.path.join(str(wmt_files), "missing.en"))
    assert not (output / "checkpoints").exists()  # nothing trained


@BACKEND_INDEPENDENT
def test_unwritable_output_dir_is_one_line(tmp_path, wmt_files):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    result = run_recipe("wmt14_base", "--data-dir", str(wmt_files),
                        "--output-dir", str(blocker / "run"))  # fmt: skip
    assert result.returncode == 2
    one_error_line(result, str(blocker / "run"))


def test_resume_with_another_architecture_is_one_line(wmt_run, wmt_files):
    output, *_ = wmt_run
    result = run_recipe(
        "wmt14_base", "--data-dir", str(wmt_files), "--output-dir", str(output),
        "--max-steps", "30", "--vocabulary-size", "300", *SMALL_MODEL,
        "--model-override", "intermediate_dim=96",
    )  # fmt: skip
    assert result.returncode == 2
    # config.json names every setting the command changes (here also the batching).
    started, asked = result.stderr.split("the run was started with ")[1].split("; this command")
    assert "intermediate_dim=64" in started and "intermediate_dim=96" in asked
    one_error_line(result, "resuming must keep the model and data settings; use a new --output-dir")


@BACKEND_INDEPENDENT
def test_resume_with_other_batching_is_one_line_and_trains_nothing(wmt_run, wmt_files):
    output, *_ = wmt_run
    recorded = json.loads((output / "data_order.json").read_text())
    assert recorded["token_budget"] == TOKEN_BUDGET and recorded["num_replicas"] == 1
    assert recorded["pipeline_overrides"] == {"bucket_growth": BUCKET_GROWTH}
    before = sorted(os.listdir(output / "checkpoints"))
    result = run_recipe(
        "wmt14_base", "--data-dir", str(wmt_files), "--output-dir", str(output),
        "--max-steps", "30", "--vocabulary-size", "300", "--token-budget", "256", *SMALL_MODEL,
        "--valid-split", "valid", "--pipeline-override", f"bucket_growth={BUCKET_GROWTH}",
    )  # fmt: skip
    assert result.returncode == 2
    one_error_line(
        result, f"started with token_budget={TOKEN_BUDGET}; this command asks for token_budget=256"
    )
    assert sorted(os.listdir(output / "checkpoints")) == before


@BACKEND_INDEPENDENT
def test_resuming_a_finished_run_trains_nothing_and_selects_again(wmt_run, wmt_files, tmp_path):
    finished, stdout, _ = wmt_run
    output = tmp_path / "wmt14_base"
    shutil.copytree(finished, output)
    # The run's last step must fall inside an epoch, where `fit` would start one more.
    batches_per_epoch = int(re.search(r"(\d+) batches", stdout).group(1))
    assert batches_per_epoch < 37 and 37 % batches_per_epoch, batches_per_epoch

    def resume(*arguments):
        result = run_recipe(
            "wmt14_base", "--data-dir", str(wmt_files), "--output-dir", str(output),
            "--max-steps", "37", "--vocabulary-size", "300",
            "--checkpoint-every-steps", "10", *SMALL_MODEL, "--valid-split", "valid",
            *SHORT_OUTPUTS, *BATCHING, "--no-export", *arguments,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    resume()
    log_before = (output / "train_log.csv").read_text()
    checkpoints_before = sorted(os.listdir(output / "checkpoints"))
    assert "ckpt-00000037.weights.h5" in checkpoints_before
    result = resume("--select-on-valid", "--select-metric", "bleu")
    # No update 38: fit would have trained one batch and saved it at the end.
    assert sorted(os.listdir(output / "checkpoints")) == checkpoints_before
    assert (output / "train_log.csv").read_text() == log_before
    assert "Nothing left to train: the run is at step 37 of 37." in result.stderr
    # Selection by BLEU translates through the validation callback, which fit never ran.
    selection = [line for line in result.stdout.splitlines() if line.startswith("valid: selected")]
    assert len(selection) == 1 and "higher is better" in selection[0], result.stdout


@BACKEND_INDEPENDENT
def test_a_resumed_run_with_accumulation_trains_to_its_last_update(wmt_files, tmp_path):
    # A checkpoint stores batches, two per update here: a run stopped after 4 of its 6
    # updates (8 batches) must train updates 5 and 6, not count its 8 batches as updates.
    output = tmp_path / "run"

    def run(max_steps):
        result = run_recipe(
            "wmt14_base", "--data-dir", str(wmt_files), "--output-dir", str(output),
            "--max-steps", str(max_steps), "--accumulation-steps", "2",
            "--vocabulary-size", "300", "--checkpoint-every-steps", "2",
            "--average-last", "1", *SMALL_MODEL, "--no-validate", "--no-export",
            *SHORT_OUTPUTS, *BATCHING,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    run(4)
    result = run(6)
    assert "Nothing left to train" not in result.stderr
    assert "checkpoints/ckpt-00000004.weights.h5 (batch 8)." in result.stderr
    steps = [int(row.split(",")[0]) for row in (output / "train_log.csv").read_text().split()[1:]]
    assert steps[-1] == 6, steps
    assert "ckpt-00000006.weights.h5" in os.listdir(output / "checkpoints")


@pytest.mark.slow
def test_wmt14_base_with_the_paper_model_runs_end_to_end(wmt_files, tmp_path):
    result = run_recipe(
        "wmt14_base", "--data-dir", str(wmt_files), "--output-dir", str(tmp_path / "run"),
        "--max-steps", "20", "--vocabulary-size", "300", "--token-budget", "512",
        "--checkpoint-every-steps", "10", "--verbose", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Final model: the average of the last 2 checkpoints in " in result.stderr
    assert (tmp_path / "run" / "saved_model" / "saved_model.pb").is_file()


@BACKEND_INDEPENDENT
def test_command_line_translates_stdin_like_the_recipe(wmt_run, wmt_files):
    output, *_ = wmt_run
    sentences = (wmt_files / "newstest2014.en").read_text(encoding="utf-8")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    result = subprocess.run(
        [sys.executable, "-m", "keras_transformer", "translate", "--model",
         str(output / "model.keras"), *SHORT_OUTPUTS],  # as the run decoded
        input=sentences, capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == (output / "newstest2014.de.hyp").read_text(encoding="utf-8")


def test_command_line_help_and_bad_command(capsys):
    from keras_transformer.cli import COMMANDS, main

    for command in COMMANDS:
        try:  # argparse's --help exits; a command that prints its own help returns
            code = main([command, "--help"])
        except SystemExit as exit_info:
            code = exit_info.code
        assert code == 0, command
        assert capsys.readouterr().out.startswith(f"usage: keras-transformer {command}")
    with pytest.raises(SystemExit) as exit_info:
        main(["fly"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@BACKEND_INDEPENDENT
def test_table3_prints_a_row_per_variant(wmt_files, tmp_path):
    # Through `keras-transformer train --recipe table3` (recipes/table3.py runs the same code):
    # the variants, never one ordinary training.
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    command = [sys.executable, "-m", "keras_transformer", "train", "--recipe", "table3"]
    result = subprocess.run([*command,
        "--data-dir", str(wmt_files), "--output-dir", str(tmp_path),
        "--valid-split", "valid", "--test-split", "newstest2014", "--max-steps", "3",
        "--vocabulary-size", "300", "--token-budget", "512", "--checkpoint-every-steps", "3",
        "--verbose", "0", "--beam-size", "1", *SHORT_OUTPUTS, *SMALL_MODEL,
        "--variants", "base", "table3-B2",
    ], capture_output=True, text=True, env=env, timeout=900)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    header, rule, *table = result.stdout.strip().splitlines()[-4:]
    assert header.split()[:3] == ["variant", "N", "d_model"] and set(rule) == {"-"}
    table = [header, *table]
    assert [line.split()[0] for line in table[1:]] == ["base", "B2"]
    assert [line.split()[5] for line in table[1:]] == ["16", "32"]  # d_k: 32 / 2 heads; B2 sets 32
    for line in table[1:]:
        perplexity = float(line.split()[-2])
        # 3 warm-up updates leave the model at its initialization: logits h E^T with unit-variance
        # h and E ~ N(0, 1/d) have variance ~1, so log-perplexity ~ log 300 + 1/2 (300 pieces).
        assert 300 < perplexity < 300 * math.e


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    ("override", "expected"),
    [("token_budget=100", "token_budget is set by the run itself; this flag sets max_length"),
     ("bucket_growth=1.0", "bucket_growth=1.0")],
)  # fmt: skip
def test_bad_pipeline_override_is_one_line_before_any_work(tmp_path, wmt_files, override, expected):
    output = tmp_path / "run"
    result = run_recipe("wmt14_base", "--data-dir", str(wmt_files), "--output-dir", str(output),
                        "--pipeline-override", override)  # fmt: skip
    assert result.returncode == 2
    one_error_line(result, expected)
    assert not (output / "vocabulary.model").exists()


@BACKEND_INDEPENDENT
def test_second_run_on_a_busy_output_dir_is_one_line_and_writes_nothing(tmp_path, wmt_files):
    output = tmp_path / "run"
    output.mkdir()
    with OutputDirLock(str(output)):  # as a run in progress holds it
        result = run_recipe("wmt14_base", "--data-dir", str(wmt_files),
                            "--output-dir", str(output), "--max-steps", "2",
                            "--vocabulary-size", "300", *SMALL_MODEL)  # fmt: skip
    assert result.returncode == 2
    one_error_line(result, "Another run", str(output), f"process {os.getpid()}")
    assert os.listdir(output) == [OutputDirLock.NAME]


@BACKEND_INDEPENDENT
def test_optimizer_flags_reach_the_config_and_round_trip():
    from keras_transformer.experiment.recipe_main import parse_experiment
    from keras_transformer.experiment.recipes import load_recipe
    from keras_transformer.experiment.settings.experiment_config import ExperimentConfig

    multi30k = load_recipe("multi30k")
    _, _, default = parse_experiment(multi30k, "test", argv=[])
    settings = default.optimization
    assert (settings.clip_norm, settings.adam_epsilon, settings.warmup_initial_rate) == (
        None, 1e-9, 0.0,
    )  # fmt: skip
    arguments = ["--clip-norm", "25", "--adam-epsilon", "1e-8", "--warmup-initial-rate", "1e-7"]
    _, _, config = parse_experiment(multi30k, "test", argv=arguments)
    settings = config.optimization
    assert (settings.clip_norm, settings.adam_epsilon, settings.warmup_initial_rate) == (
        25.0, 1e-8, 1e-7,
    )  # fmt: skip
    assert ExperimentConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="clip_norm"):
        config.replace(optimization={"clip_norm": 0.0})


# The distributions each backend lacks: keras.distribution is JAX's, tf.distribute
# TensorFlow's, and Keras' `fit` has no multi-device form on torch.
UNSUPPORTED = {
    "tensorflow": ("data_parallel",),
    "jax": ("mirrored", "multi_worker"),
    "torch": ("mirrored", "multi_worker", "data_parallel"),
}


def test_distribution_the_backend_lacks_is_one_line_before_any_work(tmp_path, wmt_files):
    backend = keras.backend.backend()
    needed = {"data_parallel": "jax", "mirrored": "tensorflow", "multi_worker": "tensorflow"}
    for distribution in UNSUPPORTED[backend]:
        config = ExperimentConfig(output_dir=str(tmp_path / "x"), distribution=distribution)
        with pytest.raises(ValueError, match=f"needs KERAS_BACKEND={needed[distribution]}"):
            RunDistribution.from_name(config.distribution)
    # The recipe (this backend, from the environment) stops with the message, writing nothing.
    distribution = UNSUPPORTED[backend][0]
    output = tmp_path / "run"
    result = run_recipe("wmt14_base", "--data-dir", str(wmt_files), "--output-dir", str(output),
                        "--distribution", distribution)  # fmt: skip
    assert result.returncode == 2
    one_error_line(result, f"distribution={distribution!r}", f"not {backend}")
    assert not output.exists()
