"""`python -m keras_transformer.figures`: the figures of a run directory, as PNGs.

Example:

    python -m keras_transformer.figures --run-dir runs/quickstart --output-dir docs/figures
"""

import argparse
import os
import sys

from keras_transformer.utils.command_line import OneLineErrorParser
from keras_transformer.utils.numeric_settings import check_int
from keras_transformer.utils.run_directory import DATA_DIR, MODEL_FILE
from keras_transformer.utils.run_directory import TRAIN_LOG_FILE as TRAIN_LOG

PROG = "python -m keras_transformer.figures"
# Longest --source / --target of the attention figures: about 200 subwords, a heatmap
# whose labels are still readable; longer ones only cost memory (tokens^2 per head).
MAX_SENTENCE_CHARACTERS = 1000
# PNG resolution at most (a 10-inch figure at this dpi is 10,000 pixels wide).
MAX_DPI = 1000
ATTENTION_FIGURES = (
    ("encoder_self_attention", "attention_encoder_self.png"),
    ("decoder_self_attention", "attention_decoder_self.png"),
    ("decoder_cross_attention", "attention_decoder_cross.png"),
)

DESCRIPTION = f"""\
Draw the figures of a training run (a recipe's --output-dir) as PNG files:

  training_curves.png           loss and learning rate against the step ({TRAIN_LOG})
  learning_rate.png             the paper's schedule, eq. (3), for a few (d_model, warmup)
  attention_encoder_self.png    attention weights of one layer (--layer), a heatmap per head
  attention_decoder_self.png    (like the paper's figures 3-5), for one sentence pair and
  attention_decoder_cross.png   the run's {MODEL_FILE}

The sentence pair is --source and --target; without --source, the first sentence of the test
split; without --target, the model's own translation (beam search). Needs matplotlib (the
`plots` extra).
"""


def build_parser(prog=None):
    """The command's argument parser.

    Args:
        prog: str or None, the command as typed (default `python -m keras_transformer.figures`).

    Returns:
        An `argparse.ArgumentParser`.
    """
    parser = OneLineErrorParser(
        prog=prog or PROG,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--run-dir",
        required=True,
        metavar="RUN",
        help=f"A run directory holding {TRAIN_LOG} and {MODEL_FILE} (a recipe's --output-dir).",
    )
    parser.add_argument(
        "--output-dir", metavar="DIR", help="Where the PNG files go. Default: RUN/figures."
    )
    parser.add_argument("--source", help="Source sentence of the attention figures.")
    parser.add_argument(
        "--target", help="Target sentence of the attention figures. Default: the translation."
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="Folder of the test split, for the default --source. Default: RUN/data (where "
        "the quickstart's generated corpus is).",
    )
    parser.add_argument(
        "--test-split",
        default="test",
        help="Split name under --data-dir, or a path prefix, for the default --source. "
        "Default: test.",
    )
    parser.add_argument("--source-language", default="en", help="Source file suffix. Default: en.")
    parser.add_argument(
        "--layer", type=int, default=-1, help="Layer of the attention figures. Default: -1 (last)."
    )
    parser.add_argument("--dpi", type=int, default=100, help="PNG resolution. Default: 100.")
    return parser


def _default_source(args):
    data_dir = args.data_dir or os.path.join(args.run_dir, DATA_DIR)
    split = args.test_split
    prefix = split if os.sep in split or "/" in split else os.path.join(data_dir, split)
    path = f"{prefix}.{args.source_language}"
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"no --source given and the test split's source file {path} does not exist "
            "(pass --source, or --data-dir / --test-split / --source-language)"
        )
    from keras_transformer.text.text_files import read_lines

    lines = read_lines(path)
    if not lines:
        raise ValueError(f"no --source given and the test split's source file {path} is empty")
    check_sentence_length(lines[0], f"the first line of {path} (the default --source)")
    return lines[0]


def check_sentence_length(sentence, name):
    """Raises ValueError for a sentence too long to plot (`MAX_SENTENCE_CHARACTERS`)."""
    if sentence is not None and len(sentence) > MAX_SENTENCE_CHARACTERS:
        raise ValueError(
            f"{name} has {len(sentence):,} characters; the attention figures take at most "
            f"{MAX_SENTENCE_CHARACTERS:,} (a heatmap of a longer sentence is unreadable, and "
            "its attention weights may not fit in memory)"
        )


def draw_figures(args):
    """Writes every figure for the parsed arguments; returns the paths written."""
    from keras_transformer.figures._matplotlib import check_matplotlib
    from keras_transformer.figures.plot_attention import plot_attention
    from keras_transformer.figures.plot_learning_rate_schedule import plot_learning_rate_schedule
    from keras_transformer.figures.plot_training_curves import plot_training_curves

    check_matplotlib()  # before the slow model loading
    output_dir = args.output_dir or os.path.join(args.run_dir, "figures")
    source = args.source if args.source is not None else _default_source(args)
    from keras_transformer.export.load_translation_model import load_translation_model

    # Loaded (and checked) first: a damaged model.keras stops the command before any figure.
    model, tokenizer = load_translation_model(os.path.join(args.run_dir, MODEL_FILE), compile=False)
    paths = [os.path.join(output_dir, "training_curves.png")]
    plot_training_curves(os.path.join(args.run_dir, TRAIN_LOG), paths[-1], dpi=args.dpi)
    paths.append(os.path.join(output_dir, "learning_rate.png"))
    plot_learning_rate_schedule(paths[-1], dpi=args.dpi)
    target = args.target
    if target is None:
        from keras_transformer.decoding import Translator

        target = Translator(model, tokenizer).translate([source], verbose=0)[0]
    print(f"Attention of: {source!r} -> {target!r}", file=sys.stderr)
    for kind, name in ATTENTION_FIGURES:
        paths.append(os.path.join(output_dir, name))
        plot_attention(
            model, tokenizer, source, target, paths[-1], layer=args.layer, kind=kind, dpi=args.dpi
        )
    return paths


def main(argv=None, prog=None):
    """Runs the command.

    Args:
        argv: list of str arguments; None reads `sys.argv`.
        prog: str or None, the command as typed, for usage and errors.

    Returns:
        int, the exit status (0 on success; bad input or a bad invocation
        exits with 2 and a one-line message).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        check_int(args.dpi, "--dpi", minimum=1, maximum=MAX_DPI)
        check_int(args.layer, "--layer")
        for flag, sentence in (("--source", args.source), ("--target", args.target)):
            check_sentence_length(sentence, flag)
    except ValueError as error:
        parser.error(str(error))
    if not os.path.isdir(args.run_dir):
        parser.fail(f"run directory not found: {args.run_dir}")
    for name in (TRAIN_LOG, MODEL_FILE):
        path = os.path.join(args.run_dir, name)
        if not os.path.isfile(path):
            parser.fail(f"the run directory has no {name}: {path}")
    try:
        paths = draw_figures(args)
    except (OSError, ValueError, TypeError, ImportError) as error:
        parser.fail(error)
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
