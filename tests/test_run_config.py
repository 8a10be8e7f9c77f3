"""The command line generated from ExperimentConfig, and config.json's resume check."""

import dataclasses
import json

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer.experiment.experiment_config import ExperimentConfig
from keras_transformer.experiment.recipe_main import build_parser, config_from_file
from keras_transformer.experiment.recipes import load_recipe, recipe_names
from keras_transformer.experiment.run_config_file import (
    check_resumed_settings,
    run_settings,
    write_run_config,
)
from keras_transformer.models import Seq2SeqTransformer, TransformerConfig
from keras_transformer.utils.config_arguments import (
    config_changes,
    parse_overrides,
    parse_value,
)

pytestmark = BACKEND_INDEPENDENT

QUICKSTART = load_recipe("quickstart")

# The flags of the hand-written parser this one replaced: each must keep working.
EARLIER_FLAGS = [
    ["--data-dir", "d"], ["--tfds", "wmt14_translate/de-en"], ["--output-dir", "o"],
    ["--source-language", "fr"], ["--target-language", "fr"], ["--train-split", "t"],
    ["--valid-split", "v"], ["--test-split", "x"], ["--preset", "big"],
    ["--model-override", "num_layers=2"], ["--pipeline-override", "bucket_growth=1.2"],
    ["--vocabulary-size", "300"], ["--max-steps", "20"], ["--token-budget", "512"],
    ["--accumulation-steps", "2"], ["--warmup-steps", "5"], ["--learning-rate-scale", "2"],
    ["--checkpoint-every-minutes", "3"], ["--checkpoint-every-steps", "10"],
    ["--average-last", "3"], ["--beam-size", "2"], ["--alpha", "0.5"],
    ["--distribution", "mirrored"], ["--precision", "mixed_bfloat16"], ["--select-on-valid"],
    ["--no-select-on-valid"], ["--no-export"], ["--seed", "3"], ["--verbose", "0"],
]  # fmt: skip


def parse(defaults, argv):
    parser, added = build_parser(defaults, "test")
    return defaults.replace(**config_changes(defaults, parser.parse_args(argv), added))


def test_every_field_is_a_flag_with_its_help_and_no_flag_changes_nothing():
    parser, added = build_parser(ExperimentConfig(), "test")
    assert set(added) == {field.name for field in dataclasses.fields(ExperimentConfig)}
    text = parser.format_help()
    for field in dataclasses.fields(ExperimentConfig):
        assert field.metadata["help"].split()[0] in text, field.name
    for name in recipe_names():
        recipe = load_recipe(name)
        assert parse(recipe, []) == recipe


def test_the_earlier_flags_set_their_fields():
    expected = {
        "--tfds": ("tfds_name", "wmt14_translate/de-en"), "--max-steps": ("train_steps", 20),
        "--no-export": ("export", False), "--select-on-valid": ("select_on_valid", True),
        "--learning-rate-scale": ("learning_rate_scale", 2.0), "--preset": ("preset", "big"),
        "--checkpoint-every-minutes": ("checkpoint_every_minutes", 3.0),
    }  # fmt: skip
    for argv in EARLIER_FLAGS:
        config = parse(QUICKSTART, argv)
        if argv[0] in expected:
            name, value = expected[argv[0]]
            assert getattr(config, name) == value and type(getattr(config, name)) is type(value)
    config = parse(QUICKSTART, ["--model-override", "dropout=0.2", "--metrics", "bleu"])
    # Overrides merge over the recipe's own; tuples stay tuples.
    assert config.model_overrides == {**QUICKSTART.model_overrides, "dropout": 0.2}
    assert config.metrics == ("bleu",)
    assert (
        parse(QUICKSTART, ["--checkpoint-every-minutes", "none"]).checkpoint_every_minutes is None
    )


def test_values_and_overrides_are_parsed_as_their_field_types():
    assert parse_value("3", int) == 3 and parse_value("0.5", float) == 0.5
    assert parse_value("true", bool) is True and parse_value("None", int, optional=True) is None
    assert parse_value('"learned"', str) == "learned" == parse_value("learned", str)
    for text, kind in (("2.5", int), ("abc", float), ("nan", float), ("maybe", bool)):
        with pytest.raises(ValueError, match=f"received '{text}'"):
            parse_value(text, kind)
    assert parse_overrides(["key_dim=none", "attention_bias=1"], TransformerConfig, "-m") == {
        "key_dim": None,
        "attention_bias": True,
    }
    with pytest.raises(ValueError, match=r"-m dropuot=0.1: .*\(did you mean dropout\?\)"):
        parse_overrides(["dropuot=0.1"], TransformerConfig, "-m")


def test_config_json_holds_the_resolved_model_and_starts_the_same_run(tmp_path):
    config = load_recipe("multi30k").replace(output_dir=str(tmp_path), vocabulary_size=300)
    settings = run_settings(config, config.pipeline_config(), "train --recipe multi30k")
    path = write_run_config(settings, str(tmp_path))
    with open(path, encoding="utf-8") as file:
        recorded = json.load(file)
    assert recorded["model"] == config.model_config().to_dict()
    assert recorded["model"]["num_layers"] == 4 and recorded["model"]["vocabulary_size"] == 300
    assert recorded["pipeline"]["token_budget"] == 4096
    assert config_from_file(path) == config
    # The file `average --config` and `export --config` read: the same model.
    model = Seq2SeqTransformer(TransformerConfig.from_json_file(path))
    assert model.config == config.model_config()


def test_resume_refuses_changed_training_settings_in_one_line(tmp_path):
    config = load_recipe("quickstart").replace(output_dir=str(tmp_path))
    settings = run_settings(config, config.pipeline_config(), "first")
    write_run_config(settings, str(tmp_path))
    # Stopping later, checkpointing, decoding and exporting differently: the same run.
    later = config.replace(
        train_steps=9000, average_last=1, keep_checkpoints=40, beam_size=2, export=False
    )
    recorded = check_resumed_settings(run_settings(later, later.pipeline_config()), tmp_path)
    assert recorded["command_lines"] == ["first"]
    # The same model named another way is the same model.
    renamed = config.replace(preset="table3-C1", model_overrides={"d_model": 128, "num_heads": 4,
                             "intermediate_dim": 512, "dropout": 0.0})  # fmt: skip
    assert renamed.model_config() == config.model_config()
    check_resumed_settings(run_settings(renamed, renamed.pipeline_config()), tmp_path)
    wider = config.replace(model_overrides={**config.model_overrides, "d_model": 256})
    with pytest.raises(ValueError) as error:
        check_resumed_settings(run_settings(wider, wider.pipeline_config()), str(tmp_path))
    assert str(error.value) == (
        f"{tmp_path}: the run was started with d_model=128; this command asks for d_model=256 "
        "(resuming must keep the model and data settings; use a new --output-dir)"
    )
    other = config.replace(seed=1, warmup_steps=10)
    started = f"started with seed=0, warmup_steps={config.warmup_steps}; this command "
    with pytest.raises(ValueError, match=started + "asks for seed=1, warmup_steps=10"):
        check_resumed_settings(run_settings(other, other.pipeline_config()), str(tmp_path))


def test_checkpoints_kept_on_disk_and_averaged():
    base = ExperimentConfig()  # the base preset averages 5 (6.1), the big one 20
    assert (base.checkpoints_averaged(), base.checkpoints_kept()) == (5, 5)
    big = ExperimentConfig(preset="big")
    assert (big.checkpoints_averaged(), big.checkpoints_kept()) == (20, 20)
    # Fewer averaged: at least 5 stay on disk; more may be asked for.
    assert ExperimentConfig(average_last=2).checkpoints_kept() == 5
    config = parse(QUICKSTART, ["--average-last", "10", "--keep-checkpoints", "40"])
    assert (config.checkpoints_averaged(), config.checkpoints_kept()) == (10, 40)
    # Fewer kept than averaged only where nothing is averaged at the end.
    with pytest.raises(ValueError, match=r"`keep_checkpoints` must be >= the checkpoints "
                       r"averaged at the end \(10\)\. Received: keep_checkpoints=3"):  # fmt: skip
        ExperimentConfig(average_last=10, keep_checkpoints=3)
    assert ExperimentConfig(average_last=10, keep_checkpoints=3, final_model="best")
    with pytest.raises(ValueError, match="`keep_checkpoints` must be >= 1"):
        ExperimentConfig(keep_checkpoints=0)
