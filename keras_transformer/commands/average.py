"""`keras-transformer average`: average the last checkpoints of a run.

Example:

    keras-transformer average --preset base --vocabulary-size 37000 \\
        --directory runs/base --last 5 --output runs/base/averaged.weights.h5
"""

import argparse
import dataclasses
import os
import sys

from keras_transformer.checkpoints.checkpoint_files import latest_checkpoints, save_weights_atomic
from keras_transformer.models.presets import get_preset
from keras_transformer.utils.command_line import OneLineErrorParser, add_verbose_flag
from keras_transformer.utils.config_arguments import add_config_arguments, parsed_config
from keras_transformer.utils.dataclass_config import DataclassConfig, setting
from keras_transformer.utils.numeric_settings import check_int
from keras_transformer.utils.run_directory import CHECKPOINT_PATTERN, CONFIG_FILE, RunDirectory
from keras_transformer.utils.same_file import check_output_is_not_an_input, check_output_writable

PROG = "keras-transformer average"

DESCRIPTION = """\
Average checkpoints into one model (paper 6.1: the last 5 for base, the last 20 for big).

The model is built from --config (a run's config.json, or a JSON file of TransformerConfig
fields) or --preset/--vocabulary-size; without either, from the config.json of the run whose
checkpoints/ folder holds the checkpoints, or from the first checkpoint if it is a .keras
file, which holds its config. Checkpoint files are only read;
the output is written to a temporary file first and then renamed, so it is never partial.
"""


@dataclasses.dataclass(frozen=True)
class AverageOptions(DataclassConfig):
    """Which checkpoints `average` reads, the model they fit, and where the average goes."""

    checkpoints: tuple[str, ...] | None = setting(
        None,
        "Checkpoint files to average (.weights.h5 from save_weights or .keras from save).",
        metavar="FILE",
        group="checkpoints",
        required=True,
    )
    directory: str | None = setting(
        None,
        "Average the last --last checkpoints of this directory, ordered by the step number "
        "in their file names.",
        metavar="DIR",
        group="checkpoints",
        required=True,
    )
    run_dir: str | None = setting(
        None,
        f"A training run's directory: average the last --last {CHECKPOINT_PATTERN} of "
        "RUN/checkpoints, with the model settings of RUN/config.json or RUN/model.keras.",
        metavar="RUN",
        group="checkpoints",
        required=True,
    )
    last: int | None = setting(
        None,
        "With --directory or --run-dir: how many checkpoints (none: the preset's number, "
        "5 for base and 20 for big; 5 without --preset).",
        metavar="N",
    )
    pattern: str = setting(
        "*.weights.h5", "With --directory: file names to consider.", metavar="GLOB"
    )
    config: str | None = setting(
        None,
        "A run's config.json, or a JSON file of TransformerConfig fields (or of "
        "Seq2SeqTransformer.get_config()).",
        metavar="JSON",
        group="model",
    )
    preset: str | None = setting(
        None,
        "Model preset: base, big, table3-B1, ... (needs --vocabulary-size).",
        metavar="NAME",
        group="model",
    )
    vocabulary_size: int | None = setting(
        None, "With --preset: size of the shared subword vocabulary.", metavar="N"
    )
    output: str | None = setting(
        None,
        "Where to write the averaged model: FILE.weights.h5 (weights only) or FILE.keras "
        "(config and weights).",
        metavar="FILE",
        required=True,
    )

    def __post_init__(self):
        self.check_types()
        check_int(self.last, "last", minimum=1, optional=True)
        check_int(self.vocabulary_size, "vocabulary_size", minimum=1, optional=True)


def build_parser(prog=PROG):
    """The command's argument parser.

    Returns:
        `(parser, added)`: the parser and the `AverageOptions` fields its flags set.
    """
    parser = OneLineErrorParser(
        prog=prog, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_verbose_flag(parser)
    return parser, add_config_arguments(parser, AverageOptions())


def _check_flags(parser, options):
    """Exits (status 2) for flags that do not go together, or paths that are not there."""
    if options.preset is not None and options.vocabulary_size is None:
        parser.error("--preset needs --vocabulary-size")
    if options.vocabulary_size is not None and options.preset is None:
        parser.error("--vocabulary-size goes with --preset")
    if options.last is not None and options.directory is None and options.run_dir is None:
        parser.error("--last goes with --directory or --run-dir")
    if not options.output.endswith((".weights.h5", ".keras")):
        parser.error(f"--output must end in .weights.h5 or .keras. Received: {options.output}")
    for flag, path in [
        ("--config", options.config),
        *(("--checkpoints", p) for p in options.checkpoints or ()),
    ]:
        if path is not None and not os.path.isfile(path):
            parser.fail(f"{flag} file not found: {path}")
    if options.directory is not None and not os.path.isdir(options.directory):
        parser.fail(f"--directory not found: {options.directory}")
    output_folder = os.path.dirname(os.path.abspath(options.output))
    if not os.path.isdir(output_folder):
        parser.fail(f"--output's folder does not exist: {output_folder}")
    try:
        check_output_writable(options.output)
    except PermissionError as error:
        parser.fail(error)


def _with_run_dir(parser, options):
    """(options reading the run's checkpoints, the run's model settings or None)."""
    try:
        run = RunDirectory.existing(options.run_dir)
        pattern = options.pattern
        if pattern == AverageOptions().pattern:
            pattern = CHECKPOINT_PATTERN  # not best.weights.h5
        settings = None
        if options.config is None and options.preset is None:
            settings = run.model_settings()
        return options.replace(directory=run.checkpoints_dir(), pattern=pattern), settings
    except ValueError as error:
        parser.error(f"--run-dir {error}")


def main(argv=None, prog=PROG):
    """Runs the command.

    Args:
        argv: list of str arguments; None reads `sys.argv`.
        prog: str, the command as typed, for usage and errors.

    Returns:
        int, the exit status (0 on success; a user error exits with 2 and one line).
    """
    parser, added = build_parser(prog)
    options = parsed_config(parser, AverageOptions(), parser.parse_args(argv), added)
    _check_flags(parser, options)
    settings = None
    if options.run_dir is not None:
        options, settings = _with_run_dir(parser, options)
    paths = _checkpoint_paths(parser, options, settings)
    # The backend loads here, once the arguments and paths are checked.
    from keras_transformer.checkpoints.averaging import average_checkpoints

    try:
        model = _model(options, paths[0], settings)
        average_checkpoints(model, paths)
        save_weights_atomic(model, options.output)
    except (OSError, ValueError, TypeError) as error:
        parser.fail(error)
    print(f"Averaged {len(paths)} checkpoints into {options.output}:", file=sys.stderr)
    for path in paths:
        print(f"  {path}", file=sys.stderr)
    return 0


def _checkpoint_paths(parser, options, settings):
    """The checkpoints to average, checked without the backend; exits 2 on a user error."""
    try:
        preset = get_preset(options.preset) if options.preset else None
        paths = list(options.checkpoints or ())
        if options.directory is not None:
            last = options.last
            if last is None:
                last = preset.averaged_checkpoints if preset else 5
            paths = latest_checkpoints(options.directory, last, options.pattern)
    except (OSError, ValueError) as error:
        parser.fail(error)
    try:
        check_output_is_not_an_input(
            options.output,
            [("--checkpoints" if options.checkpoints else "checkpoint", path) for path in paths],
        )
    except ValueError as error:
        parser.error(str(error))
    no_config = options.preset is None and options.config is None and settings is None
    if no_config and not paths[0].endswith(".keras") and _run_config(paths[0]) is None:
        parser.fail(
            f"The first checkpoint {paths[0]} holds no config and its run directory has no "
            f"{CONFIG_FILE}: give --config or --preset with --vocabulary-size."
        )
    return paths


def _run_config(first_checkpoint):
    """The config.json of the run whose checkpoints/ folder holds `first_checkpoint`, or None."""
    folder = os.path.dirname(os.path.dirname(os.path.abspath(first_checkpoint)))
    try:
        return RunDirectory.existing(folder).config_file()
    except ValueError:
        return None


def _model(options, first_checkpoint, settings=None):
    import keras

    from keras_transformer.checkpoints.model_file_check import check_model_file, reading_model_file
    from keras_transformer.models.build_model import build_model

    config_path = options.config
    if options.preset is None and config_path is None and settings is None:
        if first_checkpoint.endswith(".keras"):  # the checkpoint holds its config
            with reading_model_file(check_model_file(first_checkpoint)):
                model = keras.saving.load_model(first_checkpoint, compile=False)
            if not model.built:
                model.build()
            return model
        config_path = _run_config(first_checkpoint)  # `_checkpoint_paths` checked it exists
    return build_model(
        config_path,
        preset=options.preset,
        vocabulary_size=options.vocabulary_size,
        settings=settings,
    )
