"""`keras-transformer plot`: the figures of a run directory, as PNGs.

Example:

    keras-transformer plot --run-dir runs/quickstart --output-dir docs/figures
"""

import argparse
import dataclasses
import os
import sys

from keras_transformer.utils.command_line import OneLineErrorParser, add_verbose_flag
from keras_transformer.utils.config_arguments import add_config_arguments, parsed_config
from keras_transformer.utils.dataclass_config import DataclassConfig, setting
from keras_transformer.utils.numeric_settings import check_int
from keras_transformer.utils.run_directory import MODEL_FILE, RunDirectory
from keras_transformer.utils.run_directory import TRAIN_LOG_FILE as TRAIN_LOG

PROG = "keras-transformer plot"
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


@dataclasses.dataclass(frozen=True)
class PlotOptions(DataclassConfig):
    """The run `plot` draws, the sentence pair of its attention figures, the PNGs' resolution."""

    run_dir: str | None = setting(
        None,
        f"A run directory holding {TRAIN_LOG} and {MODEL_FILE} (a recipe's --output-dir).",
        metavar="RUN",
        required=True,
    )
    output_dir: str | None = setting(
        None, "Where the PNG files go (none: RUN/figures).", metavar="DIR"
    )
    source: str | None = setting(None, "Source sentence of the attention figures.")
    target: str | None = setting(
        None, "Target sentence of the attention figures (none: the translation)."
    )
    data_dir: str | None = setting(
        None,
        "Folder of the test split, for the default --source (none: RUN/data, where the "
        "quickstart's generated corpus is).",
        metavar="DIR",
    )
    test_split: str = setting(
        "test", "Split name under --data-dir, or a path prefix, for the default --source."
    )
    source_language: str = setting("en", "Source file suffix.")
    layer: int = setting(-1, "Layer of the attention figures (-1: the last).")
    dpi: int = setting(100, "PNG resolution.")

    def __post_init__(self):
        self.check_types()
        check_int(self.dpi, "dpi", minimum=1, maximum=MAX_DPI)


def build_parser(prog=PROG):
    """The command's argument parser.

    Returns:
        `(parser, added)`: the parser and the `PlotOptions` fields its flags set.
    """
    parser = OneLineErrorParser(
        prog=prog, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_verbose_flag(parser)
    return parser, add_config_arguments(parser, PlotOptions())


def _default_source(options):
    data_dir = options.data_dir or RunDirectory(options.run_dir).data_path
    split = options.test_split
    prefix = split if os.sep in split or "/" in split else os.path.join(data_dir, split)
    path = f"{prefix}.{options.source_language}"
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


def draw_figures(options):
    """Writes every figure for the `PlotOptions`; returns the paths written."""
    from keras_transformer.figures._matplotlib import check_matplotlib
    from keras_transformer.figures.plot_attention import plot_attention
    from keras_transformer.figures.plot_learning_rate_schedule import plot_learning_rate_schedule
    from keras_transformer.figures.plot_training_curves import plot_training_curves

    check_matplotlib()  # before the slow model loading
    run = RunDirectory(options.run_dir)
    output_dir = options.output_dir or run.figures_path
    source = options.source if options.source is not None else _default_source(options)
    from keras_transformer.export.load_translation_model import load_translation_model

    # Loaded (and checked) first: a damaged model.keras stops the command before any figure.
    model, tokenizer = load_translation_model(run.model_path, compile=False)
    paths = [os.path.join(output_dir, "training_curves.png")]
    plot_training_curves(run.train_log_path, paths[-1], dpi=options.dpi)
    paths.append(os.path.join(output_dir, "learning_rate.png"))
    plot_learning_rate_schedule(paths[-1], dpi=options.dpi)
    target = options.target
    if target is None:
        from keras_transformer.decoding import Translator

        target = Translator(model, tokenizer).translate([source], verbose=0)[0]
    print(f"Attention of: {source!r} -> {target!r}", file=sys.stderr)
    for kind, name in ATTENTION_FIGURES:
        paths.append(os.path.join(output_dir, name))
        plot_attention(
            model,
            tokenizer,
            source,
            target,
            paths[-1],
            layer=options.layer,
            kind=kind,
            dpi=options.dpi,
        )
    return paths


def main(argv=None, prog=PROG):
    """Runs the command.

    Args:
        argv: list of str arguments; None reads `sys.argv`.
        prog: str, the command as typed, for usage and errors.

    Returns:
        int, the exit status (0 on success; bad input or a bad invocation
        exits with 2 and a one-line message).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, added = build_parser(prog)
    options = parsed_config(parser, PlotOptions(), parser.parse_args(argv), added)
    try:
        for flag, sentence in (("--source", options.source), ("--target", options.target)):
            check_sentence_length(sentence, flag)
    except ValueError as error:
        parser.error(str(error))
    if not os.path.isdir(options.run_dir):
        parser.fail(f"run directory not found: {options.run_dir}")
    run = RunDirectory(options.run_dir)
    for name, path in ((TRAIN_LOG, run.train_log_path), (MODEL_FILE, run.model_path)):
        if not os.path.isfile(path):
            parser.fail(f"the run directory has no {name}: {path}")
    try:
        paths = draw_figures(options)
    except (OSError, ValueError, TypeError, ImportError) as error:
        parser.fail(error)
    for path in paths:
        print(path)
    return 0
