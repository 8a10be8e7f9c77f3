"""The command line shared by the recipes and `keras-transformer train`.

Its flags are generated from `ExperimentConfig`'s fields (`add_config_arguments`):
a new field with help text is a new flag. `--config FILE` starts from a run's
`config.json` (or a JSON object of ExperimentConfig fields, nested by config as
`ExperimentConfig.to_dict()` gives them or flat as earlier versions wrote them); flags
override it.
"""

import argparse
import json
import os
import shlex
import sys

from keras_transformer.experiment.inputs.input_checks import check_before_training
from keras_transformer.experiment.inputs.run_config_file import read_run_config
from keras_transformer.experiment.settings.experiment_config import ExperimentConfig
from keras_transformer.utils.command_line import OneLineErrorParser, one_line
from keras_transformer.utils.config_arguments import (
    NONE_WORDS,
    add_config_arguments,
    config_changes,
    flag_of,
)

# Errors a user can cause (paths, languages, a checkpoint of another model): one line each.
USER_ERRORS = (ValueError, OSError, KeyError)
CONFIG_HELP = (
    "Start from the settings of a run's config.json (or a JSON object of ExperimentConfig "
    "fields, nested by config or flat) instead of the recipe's; the other flags override them."
)
PRINT_CONFIG_HELP = (
    "Write the settings (the recipe's, with the other flags applied) to stdout as the JSON "
    "that --config takes, and exit without training."
)


def config_from_file(path):
    """The `ExperimentConfig` of a `config.json` written by a run, or of a dict of fields."""
    try:
        settings = read_run_config(path)
        return ExperimentConfig.from_dict(settings.get("experiment", settings))
    except (OSError, ValueError) as error:
        raise ValueError(f"--config {path}: {one_line(error)}") from None


def build_parser(defaults, description, prog=None):
    """An argument parser with a flag per `ExperimentConfig` field, defaulting to `defaults`.

    Returns:
        `(parser, added)`: the `OneLineErrorParser`, and the fields its flags set.
    """
    parser = OneLineErrorParser(
        prog=prog,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the recipes' example commands
    )
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    parser.add_argument("--print-config", action="store_true", help=PRINT_CONFIG_HELP)
    return parser, add_config_arguments(parser, defaults)


def parse_experiment(defaults, description, argv=None, prog=None, add_arguments=None):
    """Parses `argv` over `defaults` (or over `--config FILE`) into a checked config.

    Every user error, from a malformed flag to an out-of-range value, a
    misspelled override or a missing data file, ends the process here with one
    line on stderr and exit status 2, before anything is written.

    Args:
        defaults: the recipe's `ExperimentConfig`.
        description: `--help` text.
        argv: list of str, or None for `sys.argv[1:]`.
        prog: str or None, the program name in usage and errors.
        add_arguments: callable adding a recipe's own flags to the parser, or None.

    Returns:
        `(parser, arguments, config)`. With `--print-config`, writes the config's
        JSON to stdout and exits (status 0) instead.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    first = OneLineErrorParser(prog=prog, add_help=False)
    first.add_argument("--config", metavar="FILE")
    first.add_argument("--init-from", metavar="MODEL")
    known, _ = first.parse_known_args(argv)
    if known.config is not None:
        try:
            defaults = config_from_file(known.config)
        except (OSError, ValueError) as error:
            first.error(one_line(error))
    if known.init_from is not None and known.init_from.lower() not in NONE_WORDS:
        # The architecture is the model file's: the recipe's model settings do not apply.
        defaults = defaults.replace(model={"model_overrides": {}})
    parser, added = build_parser(defaults, description, prog=prog)
    if add_arguments is not None:
        add_arguments(parser)
    arguments = parser.parse_args(argv)
    try:
        changes = config_changes(defaults, arguments, added)
        config = defaults.replace(**changes)
        _check_vocabulary_flags(config, changes)
    except ValueError as error:
        message = one_line(error)
        for field in added.values():  # name the flag beside the field
            message = message.replace(f"`{field.name}`", f"`{field.name}` ({flag_of(field)})", 1)
        parser.error(message)
    if arguments.print_config:
        # The data, on stdout; the exit is --help's (nothing is checked or written).
        print(json.dumps(config.to_dict(), indent=2))
        raise SystemExit(0)
    arguments.command_line = shlex.join([parser.prog, *argv])
    return parser, arguments, config


def _check_vocabulary_flags(config, changes):
    """Raises for --vocabulary-size/--vocabulary-type given with a vocabulary that exists."""
    data_changes = changes.get("data", {})
    given = [name for name in ("vocabulary_size", "vocabulary_type") if name in data_changes]
    if not given or (config.model.init_from is None and config.data.vocabulary_file is None):
        return
    source = "--init-from's model file" if config.model.init_from else "--vocabulary's file"
    raise ValueError(
        f"{', '.join(f'`{name}`' for name in given)} cannot be set: the vocabulary is "
        f"{source}, not trained by the run"
    )


def check_before_running(
    parser, config, require_data=False, language_pairs=None, command_line=None, output_dir=True
):
    """Exits with one line (status 2) for settings that cannot run; nothing is written.

    Every check here needs no backend (`input_checks`): a user error ends the command
    before TensorFlow, JAX or torch loads. `output_dir=False` skips the checks of
    `config.output_dir` itself (its lock, a resume's config.json), for commands whose
    runs write in subfolders of it.
    """
    data = config.data
    if require_data and data.generated:
        parser.error("this recipe needs --data-dir (or --tfds); it has no built-in data")
    pair = (data.source_language, data.target_language)
    if language_pairs is not None and pair not in language_pairs:
        allowed = ", ".join(f"{s}-{t}" for s, t in language_pairs)
        parser.error(f"language pair {pair[0]}-{pair[1]} is not one of this recipe's: {allowed}")
    if data.data_dir is not None and not os.path.isdir(data.data_dir):
        parser.error(f"--data-dir {data.data_dir} is not a directory.")
    try:
        check_before_training(config, command_line=command_line, output_dir=output_dir)
    except USER_ERRORS as error:
        parser.error(one_line(error))


def recipe_main(
    defaults,
    description,
    argv=None,
    language_pairs=None,
    require_data=False,
    prog=None,
    add_arguments=None,
):
    """Parses flags over `defaults`, runs the experiment, prints the summary.

    Args:
        defaults: the recipe's `ExperimentConfig`.
        description: `--help` text (the recipe's docstring).
        argv: list of str, or None for `sys.argv[1:]`.
        language_pairs: allowed (source, target) pairs, or None for any.
        require_data: the recipe has no built-in data: `--data-dir` or
            `--tfds` must be given.
        prog: str or None. Program name in usage and errors.
        add_arguments: callable adding more flags to the parser (as
            `keras-transformer train`'s `--recipe`), or None.

    Returns:
        int, the exit code: 0, or 2 for a run refused or failed on the user's
        input (one line on stderr, no traceback). Bad flags exit with 2 through
        `SystemExit`, as argparse does.
    """
    parser, arguments, config = parse_experiment(
        defaults, description, argv, prog, add_arguments=add_arguments
    )
    check_before_running(
        parser, config, require_data, language_pairs, command_line=arguments.command_line
    )
    try:
        from keras_transformer.experiment.run_experiment import run_experiment

        result = run_experiment(config, command_line=arguments.command_line)
    except FloatingPointError as error:
        # The training diverged: one line naming the step and the last good checkpoint,
        # status 1 (the invocation itself was valid).
        print(f"{parser.prog}: error: {one_line(error)}", file=sys.stderr)
        return 1
    except USER_ERRORS as error:
        print(f"{parser.prog}: error: {one_line(error)}", file=sys.stderr)
        return 2
    print(result.format())
    return 0
