"""Damaged files, bad values and misuses that once slipped through (issue 58): each gives
one line naming the file or argument, exit status 2 (or 1 for a fault), and leaves every
input and earlier output as it was.

The commands run in-process (`run_in_process` of test_command_errors); the files are tiny:
a one-layer model of a 100-piece vocabulary, two of its training-state checkpoints.
"""

import gzip
import json
import math
import os
import shutil
import signal
import zipfile

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, small_config
from test_command_errors import run_in_process, snapshot

from keras_transformer import cli
from keras_transformer.checkpoints import PeriodicCheckpoint
from keras_transformer.checkpoints.model_file_check import UnreadableCheckpointError
from keras_transformer.checkpoints.stop_signals import StopSignals
from keras_transformer.checkpoints.training_state import save_training_state
from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.experiment.inputs.run_config_file import (
    check_resumed_settings,
    run_settings,
    write_run_config,
)
from keras_transformer.experiment.recipe_main import build_parser as train_parser
from keras_transformer.experiment.recipes import load_recipe
from keras_transformer.experiment.settings.experiment_config import SECTIONS, ExperimentConfig
from keras_transformer.experiment.settings.optimization_config import OptimizationConfig
from keras_transformer.models import Seq2SeqTransformer, TransformerConfig
from keras_transformer.training import LabelSmoothedCrossEntropy, TrainingMonitor, paper_optimizer
from keras_transformer.training.divergence_watch import DivergenceWatch, TrainingDivergedError
from keras_transformer.utils.numeric_settings import INT64_MAX

SMALL = ["--model-override", "num_layers=1", "--model-override", "d_model=16",
         "--model-override", "num_heads=2", "--model-override", "intermediate_dim=32"]  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A run directory (model.keras, train_log.csv, vocabulary, two checkpoints), data files."""
    from keras_transformer.export import save_translation_model
    from keras_transformer.synthetic.corpus import generate_synthetic_pairs
    from keras_transformer.text import train_vocabulary

    root = tmp_path_factory.mktemp("made")
    english, german = generate_synthetic_pairs(120, seed=0)
    data = root / "data"
    data.mkdir()
    splits = (("train", slice(0, 100)), ("valid", slice(100, 110)), ("test", slice(110, 120)))
    for split, rows in splits:
        (data / f"{split}.en").write_text("\n".join(english[rows]) + "\n", encoding="utf-8")
        (data / f"{split}.de").write_text("\n".join(german[rows]) + "\n", encoding="utf-8")
    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    tokenizer = train_vocabulary(
        english + german, vocabulary_size=100, output_path=str(run / "vocabulary.model")
    )
    keras.utils.set_random_seed(3)
    model = Seq2SeqTransformer(small_config(100))
    model.compile(optimizer=paper_optimizer(16), loss=LabelSmoothedCrossEntropy())
    model.build()
    model.optimizer.build(model.trainable_variables)
    save_translation_model(model, tokenizer, run / "model.keras")
    for step in (1, 2):
        path = run / "checkpoints" / f"ckpt-{step:08d}.weights.h5"
        save_training_state(model, path, batches=step)
    (run / "train_log.csv").write_text("step,loss\n1,4.6\n2,4.5\n")
    (root / "config.json").write_text(json.dumps(model.config.to_dict()))
    (root / "sentences.en").write_text("\n".join(english[:5]) + "\n", encoding="utf-8")
    return root


def one_line_error(status, stdout, stderr, expected_status=2):
    assert (status, stdout) == (expected_status, ""), stderr
    assert stderr.endswith("\n") and stderr.count("\n") == 1, stderr
    assert "error" in stderr, stderr


def damaged_copy(source, target, damage):
    """A copy of `source` with one kind of damage; returns `target` as str."""
    with open(source, "rb") as file:
        data = bytearray(file.read())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "zip_member":  # a byte of the weights inside a .keras archive
        with zipfile.ZipFile(source) as archive:
            info = archive.getinfo("model.weights.h5")
        start = info.header_offset + 30 + len(info.filename) + len(info.extra)
        data[start + info.compress_size // 2] ^= 0xFF
    elif damage == "h5_structure":  # HDF5's own records: h5py raises RuntimeError
        data[data.index(b"TREE") + 1] ^= 0x01
    elif damage == "h5_data":  # a weight's bytes: only the SHA-256 tells
        import h5py

        with h5py.File(source, "r") as file:
            offset = file["layers/token_embedding/vars/0"].id.get_offset()
        data[offset + 5] ^= 0x10
    with open(target, "wb") as file:
        file.write(bytes(data))
    return str(target)


# Damaged model files, reported by name wherever they are read.


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("damage", ["truncated", "zip_member"])
def test_translate_names_a_damaged_model_file_and_keeps_the_output(made, tmp_path, damage):
    model = damaged_copy(made / "run" / "model.keras", tmp_path / "model.keras", damage)
    output = tmp_path / "out.de"
    output.write_text("an earlier translation\n")
    argv = ["translate", "--model", model, "--input", str(made / "sentences.en")]
    result = run_in_process([*argv, "--output", str(output)])
    one_line_error(*result)
    assert model in result[2] and "corrupt" in result[2]
    assert output.read_text() == "an earlier translation\n"


@BACKEND_INDEPENDENT
def test_translate_run_dir_with_a_truncated_model(made, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    model = damaged_copy(made / "run" / "model.keras", run / "model.keras", "truncated")
    sentences = str(made / "sentences.en")
    result = run_in_process(["translate", "--run-dir", str(run), "--input", sentences])
    one_line_error(*result)
    assert model in result[2]


@BACKEND_INDEPENDENT
def test_plot_names_a_damaged_model_before_drawing_anything(made, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(made / "run" / "train_log.csv", run)
    model = damaged_copy(made / "run" / "model.keras", run / "model.keras", "zip_member")
    figures = tmp_path / "figures"
    argv = ["plot", "--run-dir", str(run), "--source", "a b", "--output-dir", str(figures)]
    result = run_in_process(argv)
    one_line_error(*result)
    assert model in result[2] and not figures.exists()


def test_load_translation_model_names_the_damaged_file(made, tmp_path):
    from keras_transformer.export import load_translation_model

    model = damaged_copy(made / "run" / "model.keras", tmp_path / "m.keras", "zip_member")
    with pytest.raises(UnreadableCheckpointError, match=r"m\.keras .*CRC-32"):
        load_translation_model(model)


@BACKEND_INDEPENDENT
def test_export_names_a_damaged_model_and_writes_nothing(made, tmp_path):
    model = damaged_copy(made / "run" / "model.keras", tmp_path / "model.keras", "truncated")
    exported = tmp_path / "exported"
    result = run_in_process(["export", "--model", model, "--output", str(exported)])
    one_line_error(*result)
    assert model in result[2] and not exported.exists()


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "damage, expected", [("h5_data", "SHA-256"), ("h5_structure", "truncated or corrupt")]
)
def test_average_checks_every_checkpoint_like_a_resume(made, tmp_path, damage, expected):
    good = str(made / "run" / "checkpoints" / "ckpt-00000001.weights.h5")
    newest = made / "run" / "checkpoints" / "ckpt-00000002.weights.h5"
    bad = damaged_copy(newest, tmp_path / "ckpt-00000002.weights.h5", damage)
    output = tmp_path / "averaged.weights.h5"
    config = str(made / "config.json")
    argv = ["average", "--checkpoints", good, bad, "--config", config, "--output", str(output)]
    result = run_in_process(argv)
    one_line_error(*result)
    assert bad in result[2] and expected in result[2]
    assert not output.exists()


def test_resume_skips_a_newest_checkpoint_with_a_damaged_structure(made, tmp_path, capsys):
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    shutil.copy(made / "run" / "checkpoints" / "ckpt-00000001.weights.h5", directory)
    newest = made / "run" / "checkpoints" / "ckpt-00000002.weights.h5"
    broken = damaged_copy(newest, directory / newest.name, "h5_structure")
    model = Seq2SeqTransformer(small_config(100))
    model.compile(optimizer=paper_optimizer(16), loss=LabelSmoothedCrossEntropy())
    assert PeriodicCheckpoint(str(directory), every_steps=1).restore(model) == 1
    err = capsys.readouterr().err
    assert f"Checkpoint {broken} cannot be read" in err and "Trying the previous one" in err
    assert os.path.exists(broken + ".unreadable")


def test_a_changed_data_position_fails_the_checksum(made, tmp_path):
    import h5py

    from keras_transformer.checkpoints.training_state import read_training_state

    path = tmp_path / "ckpt-00000002.weights.h5"
    shutil.copy(made / "run" / "checkpoints" / path.name, path)
    assert read_training_state(path) == 2
    with h5py.File(path, "a") as file:  # the weights intact, the data position moved
        file["keras_transformer_training_state"].attrs["batches"] = 7
    with pytest.raises(UnreadableCheckpointError, match="fails its SHA-256 check"):
        read_training_state(path)


# One check of every numeric setting, for the command line and the Python API.


def test_the_python_api_refuses_what_the_command_line_refuses(made):
    from keras_transformer.decoding import Translator
    from keras_transformer.export import load_translation_model

    model, tokenizer = load_translation_model(made / "run" / "model.keras", compile=False)
    inf = float("inf")
    for call, message in [
        (lambda: DecodingConfig(alpha=inf), "`alpha` must be a finite number"),
        (lambda: Translator(model, tokenizer, alpha=inf), "`alpha` must be a finite number"),
        (lambda: OptimizationConfig(train_steps=10**20), f"must be <= {INT64_MAX}"),
        (lambda: ExperimentConfig().replace(decoding={"beam_size": 0}), "`beam_size` must be >= 1"),
        (lambda: OptimizationConfig(learning_rate_scale=inf), "must be a finite number"),
        (lambda: small_config(layer_norm_epsilon=-1.0), "`layer_norm_epsilon` must be > 0"),
        (lambda: small_config(layer_norm_epsilon=0.0), "`layer_norm_epsilon` must be > 0"),
        (lambda: small_config(layer_norm_epsilon=math.nan), "must be a finite number"),
        (lambda: TransformerConfig(vocabulary_size=2**64), f"must be <= {INT64_MAX}"),
    ]:
        with pytest.raises(ValueError, match=message):
            call()


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "argv, expected",
    [
        (["train", "--alpha", "inf"], "`alpha` (--alpha) must be a finite number"),
        (["train", "--max-steps", "100000000000000000000"], f"must be <= {INT64_MAX}"),
        (["train", *SMALL, "--model-override", "layer_norm_epsilon=-1"], "layer_norm_epsilon"),
        (["train", "--learning-rate-scale", "1e400"], "must be a finite number"),
        (["translate", "--model", "{model}", "--alpha", "inf"], "--alpha must be a finite"),
        (["export", "--model", "{model}", "--alpha", "inf", "--output", "{out}"], "--alpha"),
    ],
)
def test_the_command_line_refuses_bad_numbers(made, tmp_path, argv, expected):
    model, out = str(made / "run" / "model.keras"), str(tmp_path / "out")
    argv = [arg.format(model=model, out=out) for arg in argv]
    if argv[0] == "train":
        argv += ["--output-dir", out]
    result = run_in_process(argv)
    one_line_error(*result)
    assert expected in result[2] and not os.path.exists(out)


def command_parsers():
    """`{command: (parser, {dest: number type})}` of every command with number flags."""
    from keras_transformer.commands import average, evaluate, export, plot, translate
    from keras_transformer.utils.dataclass_config import field_types

    parsers = {}
    for name, module in [
        ("translate", translate),
        ("evaluate", evaluate),
        ("average", average),
        ("export", export),
        ("plot", plot),
    ]:
        parser, _ = module.build_parser()
        # A generated flag's `type` converts to its field's type, named by `kind`.
        types = {a.dest: getattr(a.type, "kind", a.type) for a in parser._actions}
        kinds = {dest: kind for dest, kind in types.items() if kind in (int, float)}
        parsers[name] = (parser, kinds)
    parser, added = train_parser(load_recipe("quickstart"), "train")
    types = {}
    for cls in (ExperimentConfig, *SECTIONS.values()):
        types.update(field_types(cls))
    kinds = {}
    for dest, field in added.items():
        kind = types[field.name][0]
        if kind is tuple:  # tuple[int, ...]: --synthetic-sizes
            kind = int
        if kind in (int, float):
            kinds[dest] = kind
    parsers["train"] = (parser, kinds)
    return parsers


def flag_cases(made, tmp_path):
    """(argv, flag, path that must stay absent) for each number flag and bad value."""
    model, out = str(made / "run" / "model.keras"), str(tmp_path / "out")
    checkpoints = str(made / "run" / "checkpoints")
    sentences = str(made / "sentences.en")
    base = {
        "train": ["train", "--output-dir", out],
        "translate": ["translate", "--model", model, "--input", sentences, "--output", out],
        "average": ["average", "--directory", checkpoints, "--output", out + ".weights.h5"],
        "export": ["export", "--model", model, "--output", out],
        "plot": ["plot", "--run-dir", str(made / "run"), "--output-dir", out],
    }
    companions = {("average", "vocabulary_size"): ["--preset", "base"]}
    cases = []
    for command, (parser, kinds) in command_parsers().items():
        for action in parser._actions:
            if action.dest not in kinds:
                continue
            flag = next(f for f in action.option_strings if f.startswith("--"))
            bad_values = [str(2**63)] if kinds[action.dest] is int else ["inf", "nan", "-inf"]
            for bad in bad_values:
                value = ["1", "1", bad] if action.nargs == "+" else [bad]
                extra = companions.get((command, action.dest), [])
                cases.append(([*base[command], *extra, flag, *value], flag, out))
    return cases


@BACKEND_INDEPENDENT
def test_every_number_flag_of_every_command_refuses_overflow_and_non_finite(made, tmp_path):
    cases = flag_cases(made, tmp_path)
    flags = {flag for _, flag, _ in cases}
    # The flags come from the parsers' definitions: a new number flag is checked here too.
    assert {"--max-steps", "--alpha", "--beam-size", "--n-best", "--chunk-size", "--last",
            "--dpi", "--layer", "--synthetic-sizes", "--learning-rate-scale",
            "--divergence-steps"} <= flags  # fmt: skip
    assert len(flags) >= 30
    wrong = []
    for argv, flag, watched in cases:
        status, stdout, stderr = run_in_process(argv)
        one = stderr.endswith("\n") and stderr.count("\n") == 1
        if (status, stdout) != (2, "") or not one or flag not in stderr:
            wrong.append((argv[0], argv[-2:], status, stderr))
        elif os.path.exists(watched) or os.path.exists(watched + ".weights.h5"):
            wrong.append((argv, "wrote", watched))
    assert not wrong, "\n".join(map(repr, wrong))


# Each command's paths it reads, from the parsers' definitions: a missing one is one line.
PATH_METAVARS = ("FILE", "DIR", "RUN", "JSON", "PATH")
OUTPUT_FLAGS = ("--output", "--output-dir", "--json")


def input_path_cases(made, tmp_path):
    """`{(command, flag): argv}` with "{absent}" where the missing path goes."""
    run, out = str(made / "run"), str(tmp_path / "out")
    model, tokenizer = f"{run}/model.keras", f"{run}/vocabulary.model"
    checkpoint, config = f"{run}/checkpoints/ckpt-00000001.weights.h5", str(made / "config.json")
    sentences, averaged = str(made / "sentences.en"), out + ".weights.h5"
    test_de = str(made / "data" / "test.de")
    to_out = ["--output", out]
    return {
        ("translate", "--model"): ["--model", "{absent}", "--input", sentences, *to_out],
        ("translate", "--run-dir"): ["--run-dir", "{absent}", "--input", sentences, *to_out],
        ("translate", "--input"): ["--model", model, "--input", "{absent}", *to_out],
        ("translate", "--target-prefix"): [
            *("--model", model, "--input", sentences, "--target-prefix", "{absent}", *to_out)
        ],
        ("translate", "--constraints"): [
            *("--model", model, "--input", sentences, "--constraints", "{absent}", *to_out)
        ],
        ("evaluate", "--hypotheses"): ["--hypotheses", "{absent}", "--references", test_de],
        ("evaluate", "--run-dir"): ["--run-dir", "{absent}"],
        ("evaluate", "--references"): ["--hypotheses", test_de, "--references", "{absent}"],
        ("average", "--checkpoints"): ["--checkpoints", "{absent}", "--output", averaged],
        ("average", "--directory"): ["--directory", "{absent}", "--output", averaged],
        ("average", "--run-dir"): ["--run-dir", "{absent}", "--output", averaged],
        ("average", "--config"): [
            "--checkpoints",
            checkpoint,
            "--config",
            "{absent}",
            "--output",
            averaged,
        ],
        ("export", "--model"): ["--model", "{absent}", *to_out],
        ("export", "--run-dir"): ["--run-dir", "{absent}", *to_out],
        ("export", "--weights"): [
            "--weights",
            "{absent}",
            "--tokenizer",
            tokenizer,
            "--config",
            config,
            *to_out,
        ],
        ("export", "--tokenizer"): [
            "--weights",
            checkpoint,
            "--tokenizer",
            "{absent}",
            "--config",
            config,
            *to_out,
        ],
        ("export", "--config"): [
            "--weights",
            checkpoint,
            "--tokenizer",
            tokenizer,
            "--config",
            "{absent}",
            *to_out,
        ],
        ("plot", "--run-dir"): ["--run-dir", "{absent}", "--output-dir", out],
        ("plot", "--data-dir"): ["--run-dir", run, "--data-dir", "{absent}", "--output-dir", out],
        ("train", "--config"): ["--config", "{absent}", "--output-dir", out],
        ("train", "--data-dir"): ["--data-dir", "{absent}", "--output-dir", out],
        ("train", "--vocabulary"): ["--vocabulary", "{absent}", "--output-dir", out],
        ("train", "--init-from"): ["--init-from", "{absent}", "--output-dir", out],
        ("train", "--extra-source"): [
            *("--extra-source", "{absent}", "--extra-target", sentences, "--output-dir", out)
        ],
        ("train", "--extra-target"): [
            *("--extra-source", sentences, "--extra-target", "{absent}", "--output-dir", out)
        ],
    }


@BACKEND_INDEPENDENT
def test_every_input_path_flag_of_every_command_names_a_missing_path(made, tmp_path):
    cases = input_path_cases(made, tmp_path)
    defined = set()
    for command, (parser, _) in command_parsers().items():
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in OUTPUT_FLAGS and action.metavar in PATH_METAVARS:
                    defined.add((command, flag))
    assert defined <= set(cases), sorted(defined - set(cases))  # a new path flag: add it here
    absent = str(tmp_path / "absent.path")
    wrong = []
    for (command, flag), argv in cases.items():
        argv = [command, *(absent if arg == "{absent}" else arg for arg in argv)]
        status, stdout, stderr = run_in_process(argv)
        one = stderr.endswith("\n") and stderr.count("\n") == 1
        if (status, stdout) != (2, "") or not one or absent not in stderr:
            wrong.append((command, flag, status, stderr))
        elif os.path.exists(tmp_path / "out") or os.path.exists(tmp_path / "out.weights.h5"):
            wrong.append((command, flag, "wrote"))
    assert not wrong, "\n".join(map(repr, wrong))


# Divergence: a finite loss far above its running level.


def test_divergence_watch_rule():
    watch = DivergenceWatch(patience_steps=30, initial_level=4.0)
    watch.update(10, 3.9, steps=10)  # at the level
    assert watch.level == pytest.approx(4.0 + (1 - 0.98**10) * (3.9 - 4.0))
    level = watch.level
    watch.update(20, 7.0, steps=10)  # high, but not twice the level
    assert watch.suspect() is None and watch.level > level
    watch.update(30, 100.0, steps=10)  # far above: a stretch from step 21
    assert "since step 21" in watch.suspect()
    watch.update(40, 3.0, steps=10)  # back at the level: the stretch ends
    assert watch.suspect() is None
    watch.update(50, 1e14, steps=10)
    watch.update(60, 1e14, steps=10)
    with pytest.raises(TrainingDivergedError, match="from step 41 to step 70") as raised:
        watch.update(70, 2.6e14, steps=10)
    assert raised.value.first_step == 41
    small = DivergenceWatch(patience_steps=1, initial_level=0.3)
    small.update(1, 0.9)  # three times a small level, but less than 1 nat above it
    assert small.suspect() is None


def test_a_diverging_fit_stops_without_saving_and_names_the_last_good_checkpoint(tmp_path, capsys):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse")
    x = np.ones((16, 2), "float32")
    y = np.where(np.arange(16) < 8, 1.0, 1000.0).astype("float32")[:, None]  # from step 9
    monitor = TrainingMonitor(str(tmp_path), every_steps=1, divergence_steps=3)
    checkpoint = PeriodicCheckpoint(str(tmp_path / "checkpoints"), every_steps=2,
                                    every_minutes=None, keep=10, average_last=None,
                                    hold_saves=monitor.divergence_suspect)  # fmt: skip
    with pytest.raises(TrainingDivergedError, match="from step 9 to step 11") as raised:
        model.fit(x, y, batch_size=1, epochs=1, shuffle=False, verbose=0,
                  callbacks=[monitor, checkpoint])  # fmt: skip
    checkpoint.restore_signal_handlers()
    saved = sorted(os.listdir(tmp_path / "checkpoints"))
    assert saved == [f"ckpt-{step:08d}.weights.h5" for step in (2, 4, 6, 8)]  # 10 held
    assert "checkpoint of step 10 skipped" in capsys.readouterr().err
    last = checkpoint.last_checkpoint(before_step=raised.value.first_step)
    assert last == str(tmp_path / "checkpoints" / "ckpt-00000008.weights.h5")


@BACKEND_INDEPENDENT
def test_a_diverging_train_run_stops_with_one_line(made, tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--data-dir", str(made / "data"), "--output-dir", str(out),
            "--vocabulary-size", "100", *SMALL, "--token-budget", "256", "--max-steps", "12",
            "--learning-rate-scale", "300", "--warmup-steps", "1", "--divergence-steps", "3",
            "--log-every-steps", "1", "--checkpoint-every-steps", "2", "--no-validate",
            "--no-export", "--verbose", "0"]  # fmt: skip
    status, stdout, stderr = run_in_process(argv)
    errors = [line for line in stderr.splitlines() if "error:" in line]
    assert (status, stdout, len(errors)) == (1, "", 1), stderr
    assert errors[0].startswith("keras-transformer train: error: Training diverged: the loss")
    assert "from step 2 to step 4" in errors[0] and "last good checkpoint: none in" in errors[0]
    assert stderr.count("WARNING: checkpoint of step 2 skipped") == 1
    assert "skipped" not in stderr.replace("checkpoint of step 2 skipped", "")
    assert os.listdir(out / "checkpoints") == [] and not (out / "model.keras").exists()


@BACKEND_INDEPENDENT
def test_divergence_check_flags():
    parser, _ = train_parser(load_recipe("quickstart"), "train")
    arguments = parser.parse_args(["--no-divergence-check"])
    assert getattr(arguments, "optimization.divergence_check") is False
    assert OptimizationConfig().divergence_check and OptimizationConfig().divergence_steps == 200


# Ctrl-C: like SIGTERM, one line, the checkpoint saved, how to resume.


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler, as in a user's process, whatever the test worker has.

    A test process may have inherited SIGINT ignored (its parent's choice), and then a
    run rightly leaves it ignored.
    """
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, inherited)


def test_sigint_saves_the_step_and_exits_130_with_one_line(tmp_path, capsys, python_sigint):
    class CtrlC(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                os.kill(os.getpid(), signal.SIGINT)

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    checkpoint = PeriodicCheckpoint(str(tmp_path), every_steps=1000, every_minutes=None,
                                    keep=3, average_last=None)  # fmt: skip
    previous = signal.getsignal(signal.SIGINT)
    with pytest.raises(SystemExit) as stopped:
        model.fit(np.ones((12, 2)), np.ones((12, 1)), batch_size=2, verbose=0,
                  callbacks=[CtrlC(), checkpoint])  # fmt: skip
    assert stopped.value.code == 130
    assert signal.getsignal(signal.SIGINT) is previous
    saved = str(tmp_path / "ckpt-00000003.weights.h5")
    assert os.listdir(tmp_path) == [os.path.basename(saved)]
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"SIGINT received: stopped after step 3; last checkpoint: {saved}; run the " in err


@BACKEND_INDEPENDENT
def test_a_catcher_left_by_a_failed_run_does_not_swallow_the_next_sigint(python_sigint):
    # A run that raised inside `fit` never reached on_train_end: its catcher stays.
    previous = signal.getsignal(signal.SIGINT)
    StopSignals([signal.SIGINT]).install()
    try:
        fresh = StopSignals([signal.SIGINT])
        fresh.install()
        os.kill(os.getpid(), signal.SIGINT)
        assert fresh.received == signal.SIGINT
        with pytest.raises(SystemExit) as stopped:
            fresh.deliver()
        assert stopped.value.code == 130
        assert signal.getsignal(signal.SIGINT) is previous
    finally:
        signal.signal(signal.SIGINT, previous)


@BACKEND_INDEPENDENT
def test_ctrl_c_outside_training_is_one_line(monkeypatch):
    def interrupted(argv, prog):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.HANDLERS, "evaluate", interrupted)
    status, stdout, stderr = run_in_process(["evaluate"])
    assert (status, stdout) == (130, "")
    assert stderr == "keras-transformer evaluate: interrupted (Ctrl-C)\n"


# The data of a resumed run.


@BACKEND_INDEPENDENT
def test_a_resume_on_edited_training_files_is_refused(made, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(made / "data", data)
    started = tmp_path / "started"
    started.mkdir()
    config = load_recipe("quickstart").replace(
        output_dir=str(started), data={"data_dir": str(data), "vocabulary_size": 100}
    )
    files = (str(data / "train.en"), str(data / "train.de"))
    settings = run_settings(config, config.pipeline_config(), "train ...", data_files=files)
    write_run_config(settings, str(started))
    before = snapshot(str(started))
    assert check_resumed_settings(settings, str(started)) is not None  # the same data
    with open(data / "train.en", "a", encoding="utf-8") as file:
        file.write("one more sentence\n")
    argv = ["train", "--data-dir", str(data), "--output-dir", str(started),
            "--vocabulary-size", "100"]  # fmt: skip
    result = run_in_process(argv)
    one_line_error(*result)
    assert "the training data changed since the run started (train.en was " in result[2]
    assert snapshot(str(started)) == before


# Inputs inside an output that is replaced, long sentences, splits, gzip.


@BACKEND_INDEPENDENT
def test_export_overwrite_refuses_a_tokenizer_inside_the_output(made, tmp_path):
    output = tmp_path / "exported"
    output.mkdir()
    tokenizer = output / "vocabulary.model"
    shutil.copy(made / "run" / "vocabulary.model", tokenizer)
    weights = str(made / "run" / "checkpoints" / "ckpt-00000001.weights.h5")
    argv = ["export", "--weights", weights, "--tokenizer", str(tokenizer), "--config",
            str(made / "config.json"), "--output", str(output), "--overwrite"]  # fmt: skip
    before = snapshot(str(output))
    result = run_in_process(argv)
    one_line_error(*result)
    assert f"holds --tokenizer {tokenizer}" in result[2]
    assert snapshot(str(output)) == before


@BACKEND_INDEPENDENT
def test_translate_truncated_gzip_input_keeps_the_output(made, tmp_path):
    text = (made / "sentences.en").read_bytes() * 400
    packed = gzip.compress(text)
    source = tmp_path / "x.gz"
    source.write_bytes(packed[: len(packed) // 2])
    output = tmp_path / "out.de"
    output.write_text("kept\n")
    argv = ["translate", "--model", str(made / "run" / "model.keras"), "--input", str(source),
            "--output", str(output), "--max-extra-length", "1"]  # fmt: skip
    result = run_in_process(argv)
    one_line_error(*result)
    assert f"--input {source} is a truncated or corrupt gzip file" in result[2]
    assert output.read_text() == "kept\n"


@BACKEND_INDEPENDENT
def test_plot_refuses_a_very_long_sentence(made, tmp_path):
    figures = tmp_path / "figures"
    argv = ["plot", "--run-dir", str(made / "run"), "--source", "a" * 100_000,
            "--output-dir", str(figures)]  # fmt: skip
    result = run_in_process(argv)
    one_line_error(*result)
    assert "--source has 100,000 characters" in result[2] and not figures.exists()


@BACKEND_INDEPENDENT
def test_a_split_the_generated_corpus_lacks_is_refused(tmp_path):
    out = tmp_path / "out"
    result = run_in_process(["train", "--valid-split", "nosuch", "--output-dir", str(out)])
    one_line_error(*result)
    assert "--valid-split nosuch: without --data-dir" in result[2] and not out.exists()
