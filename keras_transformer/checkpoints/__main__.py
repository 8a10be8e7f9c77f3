"""`python -m keras_transformer.checkpoints`: average the last checkpoints of a run.

Example:

    python -m keras_transformer.checkpoints --preset base --vocabulary-size 37000 \\
        --directory runs/base --last 5 --output runs/base/averaged.weights.h5
"""

import argparse
import os
import sys

from keras_transformer.checkpoints.checkpoint_files import latest_checkpoints, save_weights_atomic
from keras_transformer.models.presets import get_preset
from keras_transformer.utils.command_line import OneLineErrorParser
from keras_transformer.utils.numeric_settings import check_int
from keras_transformer.utils.run_directory import CHECKPOINT_PATTERN, CONFIG_FILE, RunDirectory
from keras_transformer.utils.same_file import check_output_is_not_an_input

DESCRIPTION = """\
Average checkpoints into one model (paper 6.1: the last 5 for base, the last 20 for big).

The model is built from --config (a run's config.json, or a JSON file of TransformerConfig
fields) or --preset/--vocabulary-size; without either, from the config.json of the run whose
checkpoints/ folder holds the checkpoints, or from the first checkpoint if it is a .keras
file, which holds its config. Checkpoint files are only read;
the output is written to a temporary file first and then renamed, so it is never partial.
"""


def build_parser(prog=None):
    """The command's argument parser.

    Args:
        prog: str or None, the command as typed (default
            `python -m keras_transformer.checkpoints`).

    Returns:
        An `argparse.ArgumentParser`.
    """
    parser = OneLineErrorParser(
        prog=prog or "python -m keras_transformer.checkpoints",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--checkpoints",
        nargs="+",
        metavar="FILE",
        help="Checkpoint files to average (.weights.h5 from save_weights or .keras from save).",
    )
    source.add_argument(
        "--directory",
        metavar="DIR",
        help="Average the last --last checkpoints of this directory, ordered by the step "
        "number in their file names.",
    )
    source.add_argument(
        "--run-dir",
        metavar="RUN",
        help=f"A training run's directory: average the last --last {CHECKPOINT_PATTERN} of "
        "RUN/checkpoints, with the model settings of RUN/config.json or RUN/model.keras.",
    )
    parser.add_argument(
        "--last",
        type=int,
        metavar="N",
        help="With --directory: how many checkpoints (default: the preset's number, "
        "5 for base and 20 for big; 5 without --preset).",
    )
    parser.add_argument(
        "--pattern",
        default="*.weights.h5",
        metavar="GLOB",
        help="With --directory: file names to consider (default: %(default)s).",
    )
    model = parser.add_mutually_exclusive_group()
    model.add_argument(
        "--config",
        metavar="JSON",
        help="A run's config.json, or a JSON file of TransformerConfig fields (or of "
        "Seq2SeqTransformer.get_config()).",
    )
    model.add_argument(
        "--preset",
        metavar="NAME",
        help="Model preset: base, big, table3-B1, ... (needs --vocabulary-size).",
    )
    parser.add_argument(
        "--vocabulary-size",
        type=int,
        metavar="N",
        help="With --preset: size of the shared subword vocabulary.",
    )
    parser.add_argument(
        "--output",
        required=True,
        metavar="FILE",
        help="Where to write the averaged model: FILE.weights.h5 (weights only) or "
        "FILE.keras (config and weights).",
    )
    return parser


def main(argv=None, prog=None):
    """Runs the command.

    Args:
        argv: list of str arguments; None reads `sys.argv`.
        prog: str or None, the command as typed, for usage and errors.

    Returns:
        int, the exit status (0 on success; a user error exits with 2 and one line).
    """
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.preset is not None and args.vocabulary_size is None:
        parser.error("--preset needs --vocabulary-size")
    if args.vocabulary_size is not None and args.preset is None:
        parser.error("--vocabulary-size goes with --preset")
    if args.last is not None and args.directory is None and args.run_dir is None:
        parser.error("--last goes with --directory or --run-dir")
    try:
        check_int(args.last, "--last", minimum=1, optional=True)
        check_int(args.vocabulary_size, "--vocabulary-size", minimum=1, optional=True)
    except ValueError as error:
        parser.error(str(error))
    if not args.output.endswith((".weights.h5", ".keras")):
        parser.error(f"--output must end in .weights.h5 or .keras. Received: {args.output}")
    for flag, path in [
        ("--config", args.config),
        *(("--checkpoints", p) for p in args.checkpoints or ()),
    ]:
        if path is not None and not os.path.isfile(path):
            parser.fail(f"{flag} file not found: {path}")
    if args.directory is not None and not os.path.isdir(args.directory):
        parser.fail(f"--directory not found: {args.directory}")
    output_folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(output_folder):
        parser.fail(f"--output's folder does not exist: {output_folder}")
    settings = None
    if args.run_dir is not None:
        try:
            run = RunDirectory(args.run_dir)
            args.directory = run.checkpoints_dir()
            if args.pattern == parser.get_default("pattern"):
                args.pattern = CHECKPOINT_PATTERN  # not best.weights.h5
            if args.config is None and args.preset is None:
                settings = run.model_settings()
        except ValueError as error:
            parser.error(f"--run-dir {error}")
    paths = _checkpoint_paths(parser, args, settings)
    # The backend loads here, once the arguments and paths are checked.
    from keras_transformer.checkpoints.averaging import average_checkpoints

    try:
        model = _model(args, paths[0], settings)
        average_checkpoints(model, paths)
        save_weights_atomic(model, args.output)
    except (OSError, ValueError, TypeError) as error:
        parser.fail(error)
    print(f"Averaged {len(paths)} checkpoints into {args.output}:", file=sys.stderr)
    for path in paths:
        print(f"  {path}", file=sys.stderr)
    return 0


def _checkpoint_paths(parser, args, settings):
    """The checkpoints to average, checked without the backend; exits 2 on a user error."""
    try:
        preset = get_preset(args.preset) if args.preset else None
        paths = args.checkpoints
        if args.directory is not None:
            last = args.last
            if last is None:
                last = preset.averaged_checkpoints if preset else 5
            paths = latest_checkpoints(args.directory, last, args.pattern)
    except (OSError, ValueError) as error:
        parser.fail(error)
    try:
        check_output_is_not_an_input(
            args.output,
            [("--checkpoints" if args.checkpoints else "checkpoint", path) for path in paths],
        )
    except ValueError as error:
        parser.error(str(error))
    no_config = args.preset is None and args.config is None and settings is None
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
        return RunDirectory(folder).config_file()
    except ValueError:
        return None


def _model(args, first_checkpoint, settings=None):
    import keras

    from keras_transformer.checkpoints.model_file_check import check_model_file, reading_model_file
    from keras_transformer.models.build_model import build_model

    config_path = args.config
    if args.preset is None and config_path is None and settings is None:
        if first_checkpoint.endswith(".keras"):  # the checkpoint holds its config
            with reading_model_file(check_model_file(first_checkpoint)):
                model = keras.saving.load_model(first_checkpoint, compile=False)
            if not model.built:
                model.build()
            return model
        config_path = _run_config(first_checkpoint)  # `_checkpoint_paths` checked it exists
    return build_model(
        config_path, preset=args.preset, vocabulary_size=args.vocabulary_size, settings=settings
    )


if __name__ == "__main__":
    sys.exit(main())
