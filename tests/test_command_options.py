"""The commands' flags come from their options dataclasses (keras_transformer/commands/).

`add_config_arguments` turns each field made with `setting(...)` into an argument; the
metadata a command needs beyond `train`'s (positional arguments, mutually exclusive
groups, required flags, aliases, a flag whose value may be left out) is checked here on a
made-up dataclass, and every command's parser is checked to hold only generated flags.
"""

import argparse
import dataclasses

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer.commands import (
    average,
    evaluate,
    export,
    import_fairseq,
    import_marian,
    plot,
    translate,
)
from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.utils.command_line import BackendLogOptions, OneLineErrorParser
from keras_transformer.utils.config_arguments import add_config_arguments, parsed_config
from keras_transformer.utils.dataclass_config import DataclassConfig, setting
from keras_transformer.utils.numeric_settings import check_int

pytestmark = BACKEND_INDEPENDENT


@dataclasses.dataclass(frozen=True)
class MadeUpOptions(DataclassConfig):
    source: str | None = setting(None, "Where from.", metavar="SRC", positional=True)
    model: str | None = setting(None, "A file.", metavar="FILE", group="in", required=True)
    run_dir: str | None = setting(None, "A run.", metavar="RUN", group="in", required=True)
    config: str | None = setting(None, "A config.", group="how")
    preset: str | None = setting(None, "A preset.", group="how")
    output: str | None = setting(None, "Where to.", metavar="FILE", required=True)
    files: tuple[str, ...] | None = setting(None, "Some files.", metavar="FILE")
    names: tuple[str, ...] = setting(("a",), "Names.", choices=("a", "b"), aliases=("--name",))
    json: str | None = setting(None, "JSON out.", metavar="FILE", nargs="?", const="-")
    count: int = setting(3, "How many.")

    def __post_init__(self):
        self.check_types()
        check_int(self.count, "count", minimum=1)


def parse(argv):
    parser = OneLineErrorParser(prog="made-up")
    added = add_config_arguments(parser, MadeUpOptions())
    return parsed_config(parser, MadeUpOptions(), parser.parse_args(argv), added)


def error_of(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    return error


def test_generated_arguments_follow_the_metadata(capsys):
    options = parse(["in.txt", "--model", "m", "--output", "o", "--files", "x", "y"])
    assert options == MadeUpOptions(source="in.txt", model="m", output="o", files=("x", "y"))
    # An alias, a choice per item, a flag without its value, a value for it.
    options = parse(["s", "--run-dir", "r", "--output", "o", "--name", "b", "a", "--json"])
    assert (options.run_dir, options.names, options.json) == ("r", ("b", "a"), "-")
    assert parse(["s", "--model", "m", "--output", "o", "--json", "x.json"]).json == "x.json"
    # "none" is None only where None is allowed: a required argument takes it as a name.
    assert parse(["none", "--model", "none", "--output", "o", "--config", "none"]) == (
        MadeUpOptions(source="none", model="none", output="o")
    )
    assert "one of the arguments --model --run-dir is required" in error_of(
        ["s", "--output", "o"], capsys
    )
    assert "not allowed with argument --model" in error_of(
        ["s", "--model", "m", "--run-dir", "r", "--output", "o"], capsys
    )
    assert "not allowed with argument --config" in error_of(
        ["s", "--model", "m", "--output", "o", "--config", "c", "--preset", "p"], capsys
    )
    assert "required: --output" in error_of(["s", "--model", "m"], capsys)
    assert "required: SRC" in error_of(["--model", "m", "--output", "o"], capsys)
    assert "argument --names/--name: invalid choice: 'c' (expected one of a, b)" in error_of(
        ["s", "--model", "m", "--output", "o", "--names", "c"], capsys
    )


def test_a_value_the_config_refuses_names_the_flag(capsys):
    error = error_of(["s", "--model", "m", "--output", "o", "--count", "0"], capsys)
    assert error == "made-up: error: --count must be >= 1. Received: 0 (see --help)\n"
    error = error_of(["s", "--model", "m", "--output", "o", "--count", str(2**63)], capsys)
    assert "--count must be <=" in error and "int64" in error


def test_help_shows_defaults_except_for_required_arguments():
    parser = OneLineErrorParser(prog="made-up")
    add_config_arguments(parser, MadeUpOptions())
    helps = {action.dest: action.help for action in parser._actions}
    assert helps["count"] == "How many. Default: 3."
    assert helps["names"] == "Names. Default: a."
    assert (helps["output"], helps["source"], helps["model"]) == (
        "Where to.",
        "Where from.",
        "A file.",
    )


COMMANDS = [translate, evaluate, average, export, plot, import_marian, import_fairseq]


@pytest.mark.parametrize("module", COMMANDS, ids=lambda module: module.__name__.split(".")[-1])
def test_every_flag_of_a_command_is_a_field_with_help(module):
    parser, added = module.build_parser()
    added = added if isinstance(added, tuple) else (added,)
    fields = {name: field for each in added for name, field in each.items()}
    # `--verbose`, shared by these commands, is generated from its own options dataclass.
    fields.update({field.name: field for field in dataclasses.fields(BackendLogOptions)})
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.dest in fields, f"{module.__name__}: {action.option_strings} by hand"
        assert action.help.startswith(fields[action.dest].metadata["help"].replace("%", "%%"))


@pytest.mark.parametrize("module", [translate, export], ids=["translate", "export"])
def test_the_decoding_flags_are_decoding_configs_fields(module):
    parser, (_, decoding) = module.build_parser()
    names = {field.name for field in dataclasses.fields(DecodingConfig)}
    skipped = set(export.UNSERVED_DECODING) if module is export else set()
    assert set(decoding) == names - skipped
    flags = {flag for action in parser._actions for flag in action.option_strings}
    assert {"--beam-size", "--alpha", "--length-penalty-rule", "--max-extra-length"} <= flags
    assert ("--n-best" in flags) == (module is translate)


def test_translate_passes_the_decoding_flags_as_one_decoding_config():
    parser, (added, decoding_added) = translate.build_parser()
    argv = ["--model", "m.keras", "--beam-size", "6", "--n-best", "2", "--alpha", "1"]
    arguments = parser.parse_args([*argv, "--length-penalty-rule", "average"])
    decoding = parsed_config(parser, DecodingConfig(), arguments, decoding_added)
    assert decoding == DecodingConfig(
        beam_size=6, num_results=2, alpha=1.0, length_penalty_rule="average"
    )
    options = parsed_config(parser, translate.TranslateOptions(), arguments, added)
    assert options.model == ("m.keras",)
    # --model repeated: an ensemble's models, in order.
    arguments = parser.parse_args(["--model", "a.keras", "--model", "b.keras"])
    options = parsed_config(parser, translate.TranslateOptions(), arguments, added)
    assert options.model == ("a.keras", "b.keras")
