"""The command line generated from ExperimentConfig, and config.json's resume check."""

import dataclasses
import json

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.experiment.inputs.run_config_file import (
    check_resumed_settings,
    run_settings,
    write_run_config,
)
from keras_transformer.experiment.recipe_main import build_parser, config_from_file
from keras_transformer.experiment.recipes import load_recipe, recipe_names
from keras_transformer.experiment.settings.checkpoint_config import CheckpointConfig
from keras_transformer.experiment.settings.experiment_config import (
    RUN_FIELDS,
    SECTIONS,
    ExperimentConfig,
    flat_settings,
)
from keras_transformer.experiment.settings.model_settings import ModelSettings
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


def config_fields():
    """`(dest, field)` of every field of ExperimentConfig's own and of its configs."""
    for field in dataclasses.fields(ExperimentConfig):
        if field.name in SECTIONS:
            for inner in dataclasses.fields(SECTIONS[field.name]):
                yield f"{field.name}.{inner.name}", inner
        else:
            yield field.name, field


def test_every_field_is_a_flag_with_its_help_and_no_flag_changes_nothing():
    parser, added = build_parser(ExperimentConfig(), "test")
    # Every field but the decoding's n-best (a run keeps one translation per sentence) and its
    # choice of search with the sampling settings (a run decodes with beam search).
    unflagged = {"decoding.num_results"} | {
        f"decoding.{name}" for name in DecodingConfig.fields_with("training_run", False)
    }
    assert {"decoding.search", "decoding.sampling_seed"} <= unflagged
    assert set(added) == {dest for dest, _ in config_fields()} - unflagged
    text = parser.format_help()
    for dest, field in config_fields():
        assert dest in unflagged or field.metadata["help"].split()[0] in text, dest
    assert "--n-best" not in text
    for title in ("data and vocabulary:", "optimization:", "decoding:"):  # a group per config
        assert f"\n{title}\n" in text
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
            found = flat_settings(dataclasses.asdict(config))[name]
            assert found == value and type(found) is type(value)
    config = parse(QUICKSTART, ["--model-override", "dropout=0.2", "--metrics", "bleu"])
    # Overrides merge over the recipe's own; tuples stay tuples.
    assert config.model.model_overrides == {**QUICKSTART.model.model_overrides, "dropout": 0.2}
    assert config.validation.metrics == ("bleu",)
    config = parse(QUICKSTART, ["--checkpoint-every-minutes", "none"])
    assert config.checkpoint.checkpoint_every_minutes is None
    # Each flag changes its field in its config, and nothing else.
    config = parse(QUICKSTART, ["--vocabulary-size", "300", "--alpha", "1.0", "--seed", "3"])
    assert config == QUICKSTART.replace(
        data=QUICKSTART.data.replace(vocabulary_size=300),
        decoding=DecodingConfig(alpha=1.0),
        seed=3,
    )


def test_train_takes_the_decoding_settings_validation_and_test_decoding_read():
    config = parse(QUICKSTART, ["--length-penalty-rule", "average", "--batch-tokens", "512"])
    assert config.decoding == DecodingConfig(length_penalty_rule="average", batch_tokens=512)
    parser, _ = build_parser(QUICKSTART, "test")
    with pytest.raises(SystemExit):
        parser.parse_args(["--n-best", "2"])  # one translation per sentence
    with pytest.raises(ValueError, match="`num_results` must be 1"):
        QUICKSTART.replace(decoding={"num_results": 2})


def test_each_config_holds_at_most_15_fields_and_every_field_name_once():
    names = [field.name for _, field in config_fields()]
    assert len(names) == len(set(names))
    assert len(RUN_FIELDS) + len(SECTIONS) <= 15
    for cls in SECTIONS.values():
        assert len(dataclasses.fields(cls)) <= 15, cls.__name__


def test_replace_takes_a_configs_changed_fields_as_a_dict():
    config = QUICKSTART.replace(data={"vocabulary_size": 300}, model={"preset": "big"})
    assert config.data == QUICKSTART.data.replace(vocabulary_size=300)
    assert config.model == ModelSettings(
        preset="big", model_overrides=QUICKSTART.model.model_overrides
    )
    assert config.optimization == QUICKSTART.optimization
    # Each config checks its own fields; ExperimentConfig the settings across them.
    with pytest.raises(ValueError, match="`vocabulary_size` must be >= 1"):
        QUICKSTART.replace(data={"vocabulary_size": 0})
    with pytest.raises(ValueError, match="`init_from` and `vocabulary_file` both choose"):
        QUICKSTART.replace(
            model={"init_from": "model.keras", "model_overrides": {}},
            data={"vocabulary_file": "v.model"},
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
    config = load_recipe("multi30k").replace(
        output_dir=str(tmp_path), data={"vocabulary_size": 300}
    )
    settings = run_settings(config, config.pipeline_config(), "train --recipe multi30k")
    path = write_run_config(settings, str(tmp_path))
    with open(path, encoding="utf-8") as file:
        recorded = json.load(file)
    assert recorded["model"] == config.model_config().to_dict()
    assert recorded["model"]["num_layers"] == 4 and recorded["model"]["vocabulary_size"] == 300
    assert recorded["pipeline"]["token_budget"] == 4096
    # Nested by config, as `to_dict` gives it.
    assert recorded["experiment"]["data"]["vocabulary_size"] == 300
    assert recorded["experiment"]["decoding"]["length_penalty_rule"] == "gnmt"
    assert recorded["experiment"]["output_dir"] == str(tmp_path)
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
        optimization={"train_steps": 9000},
        checkpoint=CheckpointConfig(checkpoint_every_steps=50, average_last=1, keep_checkpoints=40),
        decoding=DecodingConfig(beam_size=2, length_penalty_rule="average"),
        export=False,
    )
    recorded = check_resumed_settings(run_settings(later, later.pipeline_config()), tmp_path)
    assert recorded["command_lines"] == ["first"]
    # The same model named another way is the same model.
    renamed = config.replace(model={"preset": "table3-C1", "model_overrides": {"d_model": 128,
                             "num_heads": 4, "intermediate_dim": 512, "dropout": 0.0}})  # fmt: skip
    assert renamed.model_config() == config.model_config()
    check_resumed_settings(run_settings(renamed, renamed.pipeline_config()), tmp_path)
    wider = config.replace(
        model={"model_overrides": {**config.model.model_overrides, "d_model": 256}}
    )
    with pytest.raises(ValueError) as error:
        check_resumed_settings(run_settings(wider, wider.pipeline_config()), str(tmp_path))
    assert str(error.value) == (
        f"{tmp_path}: the run was started with d_model=128; this command asks for d_model=256 "
        "(resuming must keep the model and data settings; use a new --output-dir)"
    )
    other = config.replace(seed=1, optimization={"adam_epsilon": 1e-6})
    started = "started with adam_epsilon=1e-09, seed=0; this command "
    with pytest.raises(ValueError, match=started + "asks for adam_epsilon=1e-06, seed=1"):
        check_resumed_settings(run_settings(other, other.pipeline_config()), str(tmp_path))
    # The recovery from a divergence (docs/training.md): a lower scale, a longer warmup.
    gentler = config.replace(optimization={"learning_rate_scale": 0.5, "warmup_steps": 650})
    check_resumed_settings(run_settings(gentler, gentler.pipeline_config()), str(tmp_path))


def test_checkpoints_kept_on_disk_and_averaged():
    base = ExperimentConfig()  # the base preset averages 5 (6.1), the big one 20
    assert (base.checkpoints_averaged(), base.checkpoints_kept()) == (5, 5)
    big = ExperimentConfig(model=ModelSettings(preset="big"))
    assert (big.checkpoints_averaged(), big.checkpoints_kept()) == (20, 20)
    # Fewer averaged: at least 5 stay on disk; more may be asked for.
    assert ExperimentConfig(checkpoint=CheckpointConfig(average_last=2)).checkpoints_kept() == 5
    config = parse(QUICKSTART, ["--average-last", "10", "--keep-checkpoints", "40"])
    assert (config.checkpoints_averaged(), config.checkpoints_kept()) == (10, 40)
    # Fewer kept than averaged only where nothing is averaged at the end.
    with pytest.raises(ValueError, match=r"`keep_checkpoints` must be >= the checkpoints "
                       r"averaged at the end \(10\)\. Received: keep_checkpoints=3"):  # fmt: skip
        ExperimentConfig(checkpoint=CheckpointConfig(average_last=10, keep_checkpoints=3))
    assert ExperimentConfig(
        checkpoint=CheckpointConfig(average_last=10, keep_checkpoints=3, final_model="best")
    )
    with pytest.raises(ValueError, match="`keep_checkpoints` must be >= 1"):
        CheckpointConfig(keep_checkpoints=0)


# A `config.json` as versions before the configs by concern wrote it: every ExperimentConfig
# field at the top level of "experiment" (the quickstart recipe's values).
FLAT_QUICKSTART = {
    "output_dir": "runs/quickstart", "data_dir": None, "tfds_name": None,
    "source_language": "en", "target_language": "de", "train_split": "train",
    "valid_split": "valid", "test_split": "test", "synthetic_sizes": [20000, 500, 500],
    "vocabulary_size": 1000, "vocabulary_type": "bpe", "vocabulary_lowercase": False,
    "vocabulary_file": None, "init_from": None, "preset": "base",
    "model_overrides": {"num_layers": 2, "d_model": 128, "num_heads": 4,
                        "intermediate_dim": 512, "dropout": 0.0},
    "token_budget": 4096, "pipeline_overrides": {}, "accumulation_steps": 1,
    "train_steps": 650, "warmup_steps": 325, "learning_rate_scale": 1.0,
    "warmup_initial_rate": 0.0, "clip_norm": None, "adam_epsilon": 1e-09,
    "label_smoothing": None, "checkpoint_every_minutes": None, "checkpoint_every_steps": 50,
    "average_last": 5, "keep_checkpoints": None, "beam_size": 4, "alpha": 0.6,
    "max_extra_length": 50, "metrics": ["bleu", "chrf"], "evaluate_valid": False,
    "select_on_valid": False, "select_metric": "perplexity", "validate": True,
    "validate_every_steps": 250, "valid_max_sentences": 200, "valid_search": "greedy",
    "best_metric": "bleu", "patience": None, "final_model": "average", "export": True,
    "distribution": "none", "precision": None, "log_every_steps": 100, "verbose": 1,
    "divergence_check": True, "divergence_steps": 200, "seed": 0,
}  # fmt: skip


def write_flat_run(directory, **changes):
    """A run directory whose config.json has the flat "experiment" of earlier versions."""
    config = QUICKSTART.replace(output_dir=str(directory))
    settings = run_settings(config, config.pipeline_config(), "train (an earlier version)")
    experiment = {**FLAT_QUICKSTART, "output_dir": str(directory), **changes}
    write_run_config({**settings, "experiment": experiment}, str(directory))
    return directory / "config.json"


def test_a_flat_config_json_of_earlier_versions_loads_into_the_configs(tmp_path):
    path = write_flat_run(tmp_path, vocabulary_size=300, alpha=1.0, patience=3)
    config = config_from_file(str(path))
    assert config == QUICKSTART.replace(
        output_dir=str(tmp_path),
        data={"vocabulary_size": 300},
        decoding={"alpha": 1.0},
        validation={"patience": 3},
    )
    # A JSON object of some fields, flat or nested, starts from the defaults.
    (tmp_path / "some.json").write_text(
        json.dumps({"target_language": "fr", "data": {"source_language": "de"}})
    )
    config = config_from_file(str(tmp_path / "some.json"))
    assert (config.data.source_language, config.data.target_language) == ("de", "fr")
    (tmp_path / "typo.json").write_text(json.dumps({"experiment": {"vocab_size": 100}}))
    with pytest.raises(
        ValueError, match=r"no field 'vocab_size' \(did you mean vocabulary_size\?\)"
    ):
        config_from_file(str(tmp_path / "typo.json"))


def test_resume_checks_work_across_flat_and_nested_config_json(tmp_path):
    write_flat_run(tmp_path)
    config = QUICKSTART.replace(output_dir=str(tmp_path))
    # The same run, now nested, with decoding settings the flat file did not have.
    same = config.replace(
        decoding={"length_penalty_rule": "average"}, optimization={"train_steps": 900}
    )
    recorded = check_resumed_settings(run_settings(same, same.pipeline_config(), "now"), tmp_path)
    assert recorded["command_lines"] == ["train (an earlier version)"]
    other = config.replace(seed=1, data={"token_budget": 2048})
    with pytest.raises(ValueError, match="started with seed=0, token_budget=4096; this command "
                       "asks for seed=1, token_budget=2048"):  # fmt: skip
        check_resumed_settings(run_settings(other, other.pipeline_config()), str(tmp_path))
    # The resumed run's new file is nested, its command lines continued.
    write_run_config(run_settings(same, same.pipeline_config(), "now"), str(tmp_path), recorded)
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["experiment"]["optimization"]["train_steps"] == 900
    assert written["command_lines"] == ["train (an earlier version)", "now"]
    assert config_from_file(str(tmp_path / "config.json")) == same


def test_the_run_directory_reads_the_data_settings_of_either_form(tmp_path):
    from keras_transformer.utils.run_directory import RunDirectory

    (tmp_path / "flat").mkdir()
    write_flat_run(tmp_path / "flat", target_language="fr")
    config = QUICKSTART.replace(data={"target_language": "fr", "vocabulary_lowercase": True})
    (tmp_path / "nested").mkdir()
    write_run_config(run_settings(config, config.pipeline_config()), str(tmp_path / "nested"))
    flat = RunDirectory(str(tmp_path / "flat")).data_settings()
    nested = RunDirectory(str(tmp_path / "nested")).data_settings()
    assert (flat["target_language"], flat["vocabulary_lowercase"]) == ("fr", False)
    assert (nested["target_language"], nested["vocabulary_lowercase"]) == ("fr", True)


@pytest.mark.parametrize(
    "search, recorded, not_recorded",
    [
        ("beam", {"beam_size", "alpha", "length_penalty_rule"}, {"temperature", "top_k"}),
        ("constrained", {"beam_size", "alpha", "length_penalty_rule"}, {"temperature", "top_p"}),
        ("greedy", {"max_extra_length"}, {"beam_size", "alpha", "temperature"}),
        ("sampling", {"temperature", "top_k", "top_p", "sampling_seed"}, {"beam_size", "alpha"}),
    ],
)
def test_a_saved_model_records_the_settings_its_search_reads(search, recorded, not_recorded):
    # Constrained search is a beam search: its SavedModel must say which beam and penalty.
    served = DecodingConfig(search=search, beam_size=5, alpha=1.0).served_settings()
    assert served["search"] == search
    assert recorded <= set(served), sorted(served)
    assert not (not_recorded & set(served)), sorted(served)
    if "beam_size" in recorded:
        assert (served["beam_size"], served["alpha"]) == (5, 1.0)
