"""The command line shared by the recipes and `keras-transformer train`."""

import argparse
import dataclasses
import json
import sys

from keras_transformer.experiment.experiment_config import (
    DISTRIBUTIONS,
    FINAL_MODELS,
    VALID_METRICS,
    ExperimentConfig,
)
from keras_transformer.utils.command_line import OneLineErrorParser

# Errors a user can cause (paths, languages, a checkpoint of another model): one line each.
USER_ERRORS = (ValueError, OSError, KeyError, FloatingPointError)


def build_parser(defaults, description, prog=None):
    """An argument parser whose defaults are the fields of `defaults` (an ExperimentConfig)."""
    parser = OneLineErrorParser(prog=prog, description=description)
    add = parser.add_argument
    add(
        "--data-dir",
        default=defaults.data_dir,
        help="Folder of line-aligned {split}.{language} files (plain or .gz)"
        + ("" if defaults.data_dir else "; default: the built-in generated corpus")
        + f". Default: {defaults.data_dir}.",
    )
    add(
        "--tfds",
        dest="tfds_name",
        default=defaults.tfds_name,
        help="Train on a TFDS dataset instead (e.g. wmt14_translate/de-en; needs the "
        "`tfds` extra and its download or a local TFDS data dir).",
    )
    add(
        "--output-dir",
        default=defaults.output_dir,
        help="Everything is written here; a rerun resumes from it, and a second run on a directory "
        f"in use is refused. Default: {defaults.output_dir}",
    )
    add(
        "--source-language",
        default=defaults.source_language,
        help=f"Source file suffix. Default: {defaults.source_language}",
    )
    add(
        "--target-language",
        default=defaults.target_language,
        help=f"Target file suffix. Default: {defaults.target_language}",
    )
    add(
        "--train-split",
        default=defaults.train_split,
        help=f"Training split name or path prefix. Default: {defaults.train_split}",
    )
    add(
        "--valid-split",
        default=defaults.valid_split,
        help="Development split (Table 3's dev, newstest2013 in the paper). "
        f"Default: {defaults.valid_split}",
    )
    add(
        "--test-split",
        default=defaults.test_split,
        help="Split translated and scored at the end; a name under --data-dir or a path "
        f"prefix such as ../data/newstest2014/newstest2014. Default: {defaults.test_split}",
    )
    add(
        "--preset",
        default=defaults.preset,
        help=f"Model preset: base, big, table3-A1 ... table3-E. Default: {defaults.preset}",
    )
    add(
        "--model-override",
        dest="model_override",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="Change one TransformerConfig field of the preset, e.g. num_layers=2 "
        '(repeatable; values are JSON: 2, 0.3, true, "learned").',
    )
    add(
        "--pipeline-override",
        dest="pipeline_override",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="Change how training batches are made: max_length, min_bucket_length, "
        "bucket_growth or length_multiple of PipelineConfig (repeatable). E.g. "
        "bucket_growth=1.2 gives fewer batch shapes (fewer XLA compiles) for more padding.",
    )
    add(
        "--vocabulary-size",
        type=int,
        default=defaults.vocabulary_size,
        help=f"Shared subword vocabulary size (paper 5.1). Default: {defaults.vocabulary_size}",
    )
    add(
        "--max-steps",
        dest="train_steps",
        type=int,
        default=defaults.train_steps,
        help="Optimizer updates (paper: 100k base, 300k big). Default: "
        f"{defaults.train_steps or 'the preset'}",
    )
    add(
        "--token-budget",
        type=int,
        default=defaults.token_budget,
        help="Padded tokens per side per device and batch (paper 5.1: about 25000). "
        f"Default: {defaults.token_budget}",
    )
    add(
        "--accumulation-steps",
        type=int,
        default=defaults.accumulation_steps,
        help="Batches accumulated into one update, token-weighted; 8 on one device gives "
        f"the paper's 8-GPU batch. Default: {defaults.accumulation_steps}",
    )
    add(
        "--warmup-steps",
        type=int,
        default=defaults.warmup_steps,
        help=f"Learning-rate warmup (paper 5.3: 4000). Default: {defaults.warmup_steps}",
    )
    add(
        "--learning-rate-scale",
        type=float,
        default=defaults.learning_rate_scale,
        help=f"Multiplier of the schedule (paper: 1). Default: {defaults.learning_rate_scale}",
    )
    add(
        "--checkpoint-every-minutes",
        type=float,
        default=defaults.checkpoint_every_minutes,
        help="Minutes between checkpoints (paper 6.1: 10). Default: "
        f"{defaults.checkpoint_every_minutes}",
    )
    add(
        "--checkpoint-every-steps",
        type=int,
        default=defaults.checkpoint_every_steps,
        help=f"Updates between checkpoints. Default: {defaults.checkpoint_every_steps}",
    )
    add(
        "--average-last",
        type=int,
        default=defaults.average_last,
        help="Checkpoints averaged at the end (paper 6.1: 5 base, 20 big). Default: "
        f"{defaults.average_last or 'the preset'}",
    )
    add(
        "--beam-size",
        type=int,
        default=defaults.beam_size,
        help=f"Beam width (paper 6.1: 4). Default: {defaults.beam_size}",
    )
    add(
        "--alpha",
        type=float,
        default=defaults.alpha,
        help=f"Length penalty (paper 6.1: 0.6). Default: {defaults.alpha}",
    )
    add(
        "--distribution",
        choices=DISTRIBUTIONS,
        default=defaults.distribution,
        help="mirrored: all local GPUs (TensorFlow); multi_worker: one process per machine "
        "with TF_CONFIG (TensorFlow); data_parallel: all devices (JAX), and with "
        "KERAS_DISTRIBUTION_JOB_ADDRESSES/_NUM_PROCESSES/_PROCESS_ID one process per "
        "machine. Processes after the first write in a subfolder of --output-dir "
        "(worker-1, process-1, ...). "
        f"Default: {defaults.distribution}",
    )
    add(
        "--precision",
        choices=("mixed_bfloat16", "mixed_float16"),
        default=defaults.precision,
        help="Mixed precision policy (logits, loss and softmax stay float32). Default: float32",
    )
    add(
        "--select-on-valid",
        action=argparse.BooleanOptionalAction,
        default=defaults.select_on_valid,
        help="After training, keep whichever kept checkpoint, their average or the best "
        "checkpoint scores best on --valid-split by --select-metric (the paper averages "
        "without selecting, 6.1); overrides --final-model. Default: %(default)s",
    )
    add(
        "--select-metric",
        choices=VALID_METRICS,
        default=defaults.select_metric,
        help="What --select-on-valid ranks by: perplexity (lowest) or bleu (highest). "
        "Default: %(default)s",
    )
    add(
        "--validate",
        action=argparse.BooleanOptionalAction,
        default=defaults.validate,
        help="Validate on --valid-split while training: loss, perplexity and sacreBLEU on "
        "stderr, in valid_log.csv and TensorBoard; keeps checkpoints/best.weights.h5. "
        "Default: %(default)s",
    )
    add(
        "--validate-every-steps",
        type=int,
        default=defaults.validate_every_steps,
        help="Updates between validations. Default: "
        f"{defaults.validate_every_steps or 'at every checkpoint'}",
    )
    add(
        "--valid-max-sentences",
        type=int,
        default=defaults.valid_max_sentences,
        help="Valid sentences translated for each validation's BLEU (the first N; 0: no "
        "BLEU). Default: %(default)s",
    )
    add(
        "--valid-search",
        choices=("greedy", "beam"),
        default=defaults.valid_search,
        help="Search of the validation BLEU: greedy, or beam with --beam-size and --alpha. "
        "Default: %(default)s",
    )
    add(
        "--best-metric",
        choices=VALID_METRICS,
        default=defaults.best_metric,
        help="Metric that picks checkpoints/best.weights.h5: bleu (highest) or perplexity "
        "(lowest). Default: %(default)s",
    )
    add(
        "--patience",
        type=int,
        default=defaults.patience,
        help="Stop after this many validations without a better --best-metric (0: never); "
        "the final averaging, scores and export still run. Default: %(default)s",
    )
    add(
        "--final-model",
        choices=FINAL_MODELS,
        default=defaults.final_model,
        help="Model scored and exported at the end: average of the last --average-last "
        "checkpoints (paper 6.1), best (checkpoints/best.weights.h5) or last. "
        "Default: %(default)s",
    )
    add(
        "--no-export",
        dest="export",
        action="store_false",
        default=defaults.export,
        help="Skip the SavedModel export at the end.",
    )
    add(
        "--seed",
        type=int,
        default=defaults.seed,
        help=f"Seed of data order, weights and dropout. Default: {defaults.seed}",
    )
    add(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=defaults.verbose,
        help="0 silent; 1 or 2: a progress line on stderr every --log-every-steps updates "
        "and one per validation. Default: %(default)s",
    )
    add(
        "--log-every-steps",
        type=int,
        default=defaults.log_every_steps,
        help="Updates between progress lines, train_log.csv rows and TensorBoard points. "
        "Default: %(default)s",
    )
    return parser


def _overrides(items, flag):
    overrides = {}
    for item in items:
        field, separator, value = item.partition("=")
        if not separator or not field:
            raise ValueError(f"{flag} takes FIELD=VALUE. Received: {item!r}")
        try:
            overrides[field.strip()] = json.loads(value)
        except json.JSONDecodeError:
            overrides[field.strip()] = value
    return overrides


def config_from_arguments(defaults, arguments):
    """`defaults` with the parsed command-line values applied."""
    names = {field.name for field in dataclasses.fields(ExperimentConfig)}
    changes = {name: value for name, value in vars(arguments).items() if name in names}
    for name, flag in (("model", "--model-override"), ("pipeline", "--pipeline-override")):
        overrides = _overrides(getattr(arguments, f"{name}_override", []), flag)
        if overrides:
            default = getattr(defaults, f"{name}_overrides")
            changes[f"{name}_overrides"] = {**default, **overrides}
    return defaults.replace(**changes)


def recipe_main(
    defaults, description, argv=None, language_pairs=None, require_data=False, prog=None
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

    Returns:
        int, the exit code: 0, 1 for a run that failed on the user's input
        (one line on stderr, no traceback), 2 for bad flags.
    """
    parser = build_parser(defaults, description, prog=prog)
    arguments = parser.parse_args(argv)
    if require_data and arguments.data_dir is None and arguments.tfds_name is None:
        parser.error("this recipe needs --data-dir (or --tfds); it has no built-in data")
    pair = (arguments.source_language, arguments.target_language)
    if language_pairs is not None and pair not in language_pairs:
        allowed = ", ".join(f"{s}-{t}" for s, t in language_pairs)
        parser.error(f"language pair {pair[0]}-{pair[1]} is not one of this recipe's: {allowed}")
    try:
        config = config_from_arguments(defaults, arguments)
        from keras_transformer.experiment.run_experiment import run_experiment

        result = run_experiment(config)
    except USER_ERRORS as error:
        message = " ".join(str(error).split())
        print(f"{parser.prog}: error: {type(error).__name__}: {message}", file=sys.stderr)
        return 1
    print(result.format())
    return 0
