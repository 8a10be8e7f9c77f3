"""`keras-transformer evaluate`: score a hypothesis file.

Example:

    keras-transformer evaluate --hypotheses newstest2014.hyp.de \\
        --references newstest2014.de --metrics bleu chrf tokenized_bleu
"""

import argparse
import dataclasses
import json
import os
import sys

from keras_transformer.evaluation.evaluation_scores import DEFAULT_METRICS, METRICS
from keras_transformer.utils.command_line import OneLineErrorParser, add_verbose_flag
from keras_transformer.utils.config_arguments import add_config_arguments, parsed_config
from keras_transformer.utils.dataclass_config import DataclassConfig, setting
from keras_transformer.utils.run_directory import RunDirectory
from keras_transformer.utils.same_file import check_output_is_not_an_input, check_output_writable

PROG = "keras-transformer evaluate"
# The metrics that tokenize with Moses' rules of the target language (--language).
TOKENIZED_METRICS = ("tokenized_bleu", "multi30k_bleu")

DESCRIPTION = """\
Score detokenized translations against one or more references.

Metrics:
  bleu            detokenized cased sacreBLEU (13a) with its signature: report this one.
  chrf            chrF (character 6-grams, beta 2) with its signature.
  tokenized_bleu  Moses-tokenized BLEU with ##AT## compound splitting, as tensor2tensor's
                  get_ende_bleu.sh: compare this one with the paper's 27.3 / 28.4.
  multi30k_bleu   lowercased Moses-tokenized BLEU, as in the Multi30k literature.
"""


@dataclasses.dataclass(frozen=True)
class EvaluateOptions(DataclassConfig):
    """The files `evaluate` scores and how."""

    hypotheses: str | None = setting(
        None, "Detokenized system output, UTF-8, one segment per line.", metavar="FILE"
    )
    run_dir: str | None = setting(
        None,
        "A training run's directory: --hypotheses defaults to its NAME.hyp test "
        "translations and --references to NAME in the run's data folder.",
        metavar="RUN",
    )
    references: tuple[str, ...] | None = setting(
        None,
        "One or more detokenized reference files (several = multi-reference BLEU), each with "
        "as many lines as --hypotheses.",
        metavar="FILE",
    )
    # `--metrics`, as `train --metrics`; `--metric` is its deprecated older name.
    metrics: tuple[str, ...] = setting(
        tuple(DEFAULT_METRICS),
        f"Metrics to compute, among {', '.join(METRICS)}. --metric is a deprecated alias.",
        choices=METRICS,
        metavar="NAME",
        aliases=("--metric",),
    )
    language: str | None = setting(
        None,
        "Target language code for the Moses tokenizer of tokenized_bleu and multi30k_bleu "
        "(none: the --run-dir's target language, else the first --references file's suffix "
        "when it is a two-letter code, as in newstest2014.fr, else de).",
        metavar="CODE",
    )
    lowercase: bool | None = setting(
        None,
        "Case-insensitive bleu and chrf (their signatures say case:lc), for a model trained "
        "with --vocabulary-lowercase (none: as the --run-dir was trained, else off).",
    )
    json: str | None = setting(
        None,
        "Write the scores as one JSON object instead of one line per metric: to standard "
        "output, or to FILE (written atomically; never one of the inputs).",
        metavar="FILE",
        nargs="?",
        const="-",
    )

    def __post_init__(self):
        self.check_types()


def build_parser(prog=PROG):
    """The command's argument parser.

    Returns:
        `(parser, added)`: the parser and the `EvaluateOptions` fields its flags set.
    """
    parser = OneLineErrorParser(
        prog=prog, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_verbose_flag(parser)
    return parser, add_config_arguments(parser, EvaluateOptions())


def _with_run_dir(parser, options):
    """`options` with what --run-dir gives for the settings not set."""
    try:
        run = RunDirectory.existing(options.run_dir)
        hypotheses = options.hypotheses or run.hypotheses_file()
        experiment = run.data_settings()
        language = options.language
        if language is None:  # an en-fr run is scored with French tokenization
            language = experiment.get("target_language")
        return options.replace(
            hypotheses=hypotheses,
            references=options.references or (run.reference_file(hypotheses),),
            lowercase=(
                bool(experiment.get("vocabulary_lowercase", False))
                if options.lowercase is None
                else options.lowercase
            ),
            language=language,
        )
    except ValueError as error:
        parser.error(f"--run-dir {error}")


def _language_of(path):
    """The language code a reference file's name ends with (`test_2016_flickr.fr`), else de.

    German rules would tokenize a French test set's apostrophes and quotes otherwise and
    silently change its tokenized scores, so the file's own suffix wins over the default.
    """
    suffix = os.path.splitext(path)[1][1:]  # of the last path component only
    if len(suffix) == 2 and suffix.isascii() and suffix.isalpha():
        return suffix.lower()
    return "de"


def _language_source(options, language_flag):
    """Where the tokenization language came from, for the message that names it."""
    if language_flag is not None:
        return "--language"
    if options.language is not None:
        return "the --run-dir's target language"
    if _language_of(options.references[0]) != "de" or options.references[0].endswith(".de"):
        return f"the suffix of {os.path.basename(options.references[0])}; --language sets another"
    return "the default; --language sets another"


def main(argv=None, prog=PROG):
    """Runs the command.

    Args:
        argv: list of str arguments; None reads `sys.argv`.
        prog: str, the command as typed, for usage and errors.

    Returns:
        int, the exit status (0 on success; a user error exits with 2 and one line).
    """
    parser, added = build_parser(prog)
    options = parsed_config(parser, EvaluateOptions(), parser.parse_args(argv), added)
    language_flag = options.language
    if options.run_dir is not None:
        options = _with_run_dir(parser, options)
    for flag in ("hypotheses", "references"):
        if getattr(options, flag) is None:
            parser.error(f"the following arguments are required: --{flag} (or --run-dir)")
    if options.json not in (None, "-"):
        inputs = [("--hypotheses", options.hypotheses)]
        inputs += [("--references", path) for path in options.references]
        try:
            check_output_is_not_an_input(options.json, inputs, output_flag="--json")
        except ValueError as error:
            parser.error(str(error))
        try:
            check_output_writable(options.json, output_flag="--json")
        except PermissionError as error:
            parser.fail(error)
    from keras_transformer.evaluation.files import score_files  # sacrebleu, sacremoses

    language = options.language or _language_of(options.references[0])
    try:
        scores = score_files(
            options.hypotheses,
            list(options.references),
            metrics=list(options.metrics),
            language=language,
            lowercase=bool(options.lowercase),
        )
    except (OSError, ValueError) as error:
        # A file problem is the user's to fix: one line, no traceback.
        parser.fail(error)
    tokenized = [name for name in options.metrics if name in TOKENIZED_METRICS]
    if tokenized:
        why = _language_source(options, language_flag)
        print(
            f"{parser.prog}: {' and '.join(tokenized)} tokenized with Moses' {language} rules "
            f"({why})",
            file=sys.stderr,
        )
    if options.json == "-":
        print(json.dumps(dataclasses.asdict(scores), indent=1))
    elif options.json is not None:
        from keras_transformer.text.text_files import write_bytes_atomic

        text = json.dumps(dataclasses.asdict(scores), indent=1) + "\n"
        write_bytes_atomic(options.json, text.encode("utf-8"))
    else:
        print(scores.format())
    return 0
