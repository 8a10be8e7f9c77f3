"""`python -m keras_transformer.evaluation`: score a hypothesis file.

Example:

    python -m keras_transformer.evaluation --hypotheses newstest2014.hyp.de \\
        --references newstest2014.de --metrics bleu chrf tokenized_bleu
"""

import argparse
import dataclasses
import json
import sys

from keras_transformer.evaluation.evaluation_scores import DEFAULT_METRICS, METRICS
from keras_transformer.utils.command_line import OneLineErrorParser
from keras_transformer.utils.run_directory import RunDirectory
from keras_transformer.utils.same_file import check_output_is_not_an_input

DESCRIPTION = """\
Score detokenized translations against one or more references.

Metrics:
  bleu            detokenized cased sacreBLEU (13a) with its signature: report this one.
  chrf            chrF (character 6-grams, beta 2) with its signature.
  tokenized_bleu  Moses-tokenized BLEU with ##AT## compound splitting, as tensor2tensor's
                  get_ende_bleu.sh: compare this one with the paper's 27.3 / 28.4.
  multi30k_bleu   lowercased Moses-tokenized BLEU, as in the Multi30k literature.
"""


def build_parser(prog=None):
    """The command's argument parser.

    Args:
        prog: str or None, the command as typed (default
            `python -m keras_transformer.evaluation`).

    Returns:
        An `argparse.ArgumentParser`.
    """
    parser = OneLineErrorParser(
        prog=prog or "python -m keras_transformer.evaluation",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--hypotheses",
        metavar="FILE",
        help="Detokenized system output, UTF-8, one segment per line.",
    )
    parser.add_argument(
        "--run-dir",
        metavar="RUN",
        help="A training run's directory: --hypotheses defaults to its NAME.hyp test "
        "translations and --references to NAME in the run's data folder.",
    )
    parser.add_argument(
        "--references",
        nargs="+",
        metavar="FILE",
        help="One or more detokenized reference files (several = multi-reference BLEU), "
        "each with as many lines as --hypotheses.",
    )
    parser.add_argument(
        # `--metrics`, as `train --metrics`; `--metric` is its deprecated older name.
        "--metrics",
        "--metric",
        dest="metrics",
        nargs="+",
        choices=METRICS,
        default=list(DEFAULT_METRICS),
        metavar="NAME",
        help=f"Metrics to compute, among {', '.join(METRICS)} "
        f"(default: {' '.join(DEFAULT_METRICS)}). --metric is a deprecated alias.",
    )
    parser.add_argument(
        "--language",
        metavar="CODE",
        help="Target language code for the Moses tokenizer of tokenized_bleu and "
        "multi30k_bleu (default: the --run-dir's target language, else de).",
    )
    parser.add_argument(
        "--lowercase",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Case-insensitive bleu and chrf (their signatures say case:lc), for a model "
        "trained with --vocabulary-lowercase (default: as the --run-dir was trained, else off).",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="FILE",
        help="Write the scores as one JSON object instead of one line per metric: to "
        "standard output, or to FILE (written atomically; never one of the inputs).",
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
    if args.run_dir is not None:
        try:
            run = RunDirectory(args.run_dir)
            args.hypotheses = args.hypotheses or run.hypotheses_file()
            args.references = args.references or [run.reference_file(args.hypotheses)]
            experiment = (run.settings() or {}).get("experiment", {})
            if args.lowercase is None:
                args.lowercase = bool(experiment.get("vocabulary_lowercase", False))
            if args.language is None:  # an en-fr run is scored with French tokenization
                args.language = experiment.get("target_language")
        except ValueError as error:
            parser.error(f"--run-dir {error}")
    for flag in ("hypotheses", "references"):
        if getattr(args, flag) is None:
            parser.error(f"the following arguments are required: --{flag} (or --run-dir)")
    if args.json not in (None, "-"):
        inputs = [("--hypotheses", args.hypotheses)]
        inputs += [("--references", path) for path in args.references]
        try:
            check_output_is_not_an_input(args.json, inputs, output_flag="--json")
        except ValueError as error:
            parser.error(str(error))
    from keras_transformer.evaluation.files import score_files  # sacrebleu, sacremoses

    try:
        scores = score_files(
            args.hypotheses,
            args.references,
            metrics=args.metrics,
            language=args.language or "de",
            lowercase=bool(args.lowercase),
        )
    except (OSError, ValueError) as error:
        # A file problem is the user's to fix: one line, no traceback.
        parser.fail(error)
    if args.json == "-":
        print(json.dumps(dataclasses.asdict(scores), indent=1))
    elif args.json is not None:
        from keras_transformer.text.text_files import write_bytes_atomic

        text = json.dumps(dataclasses.asdict(scores), indent=1) + "\n"
        write_bytes_atomic(args.json, text.encode("utf-8"))
    else:
        print(scores.format())
    return 0


if __name__ == "__main__":
    sys.exit(main())
