"""`python -m keras_transformer.export`: write a SavedModel for TF Serving, or a CTranslate2 model.

Example:

    python -m keras_transformer.export --model runs/base/translator.keras \\
        --output serving/translator/1
    python -m keras_transformer.export --format ctranslate2 --quantization int8 \\
        --model runs/base/translator.keras --output serving/ct2
"""

import argparse
import os
import sys

from keras_transformer.decoding.length_penalty_rules import LENGTH_PENALTY_RULES
from keras_transformer.export.ctranslate2_support import QUANTIZATIONS, import_ctranslate2
from keras_transformer.utils.command_line import OneLineErrorParser
from keras_transformer.utils.numeric_settings import check_decoding_settings
from keras_transformer.utils.run_directory import RunDirectory, resolve_model_file
from keras_transformer.utils.same_file import (
    check_inputs_outside_output_dir,
    check_output_is_not_an_input,
)

DESCRIPTION = """\
Export a trained model as a SavedModel that stock TensorFlow Serving serves: UTF-8 sentences
in, translations and scores out (signature serving_default), or SentencePiece ids in and out
(signature translate_ids). Tokenization, beam search with the key/value cache and length
penalty, and detokenization all run in the graph; the decoding settings are fixed here and
written to assets/translation_settings.json. See docs/serving.md.

The graph is traced on the TensorFlow backend whatever backend trained the model: under
another KERAS_BACKEND this command runs itself again with KERAS_BACKEND=tensorflow.

--format ctranslate2 writes a CTranslate2 model directory instead (the optional ctranslate2
package: pip install 'keras-transformer-mt[ctranslate2]'), optionally quantized, with the
SentencePiece model as vocabulary.model; decoding settings are chosen at translation time.
"""


# The flags of the decoding settings, as `check_decoding_settings` names them.
DECODING_FLAGS = {
    "beam_size": "--beam-size",
    "alpha": "--alpha",
    "max_extra_length": "--max-extra-length",
    "max_source_length": "--max-source-length",
}


def build_parser(prog=None):
    """The command's argument parser.

    Args:
        prog: str or None, the command as typed (default `python -m keras_transformer.export`).

    Returns:
        An `argparse.ArgumentParser`.
    """
    parser = OneLineErrorParser(
        prog=prog or "python -m keras_transformer.export",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model",
        metavar="FILE",
        help="A .keras file from save_translation_model (model and tokenizer), a run "
        "directory (its model.keras), or a Seq2SeqTransformer .keras file with --tokenizer.",
    )
    source.add_argument(
        "--run-dir",
        metavar="RUN",
        help="A training run's directory: export its model.keras.",
    )
    source.add_argument(
        "--weights",
        metavar="FILE",
        help="A .weights.h5 file (e.g. averaged checkpoints), with --tokenizer and "
        "--config or --preset.",
    )
    parser.add_argument("--tokenizer", metavar="FILE", help="The SentencePiece .model file.")
    config = parser.add_mutually_exclusive_group()
    config.add_argument(
        "--config",
        metavar="JSON",
        help="With --weights: a run's config.json, or a JSON file of TransformerConfig fields "
        "(or of Seq2SeqTransformer.get_config()).",
    )
    config.add_argument(
        "--preset",
        metavar="NAME",
        help="With --weights: model preset (base, big, ...); the vocabulary size is the "
        "tokenizer's.",
    )
    parser.add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="SavedModel directory to create, a numbered version under the model's base "
        "path for TF Serving, e.g. serving/translator/1.",
    )
    parser.add_argument("--beam-size", type=int, default=4, metavar="N", help="Default: 4.")
    parser.add_argument("--alpha", type=float, default=0.6, help="Length penalty; default 0.6.")
    parser.add_argument(
        "--length-penalty-rule",
        choices=LENGTH_PENALTY_RULES,
        default="gnmt",
        help="How finished hypotheses are ranked: gnmt (paper, log-prob / ((5 + length) / 6) "
        "** alpha) or average (log-prob / length ** alpha, transformers' length_penalty).",
    )
    parser.add_argument(
        "--max-extra-length",
        type=int,
        default=50,
        metavar="N",
        help="Output tokens allowed beyond the source length; default 50.",
    )
    parser.add_argument(
        "--max-source-length",
        type=int,
        metavar="N",
        help="Source ids kept (EOS included); longer inputs are cut and flagged. Default: the "
        "model's max_position (512 by default).",
    )
    parser.add_argument("--overwrite", action="store_true", help="Replace an existing --output.")
    parser.add_argument(
        "--format",
        choices=("saved_model", "ctranslate2"),
        default="saved_model",
        help="saved_model (TF Serving, default) or ctranslate2 (a CTranslate2 model "
        "directory; the decoding flags above are then chosen at translation time).",
    )
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        help="With --format ctranslate2: the weight type (default: float32, as trained).",
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
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.weights is not None and (args.tokenizer is None or not (args.config or args.preset)):
        parser.error("--weights needs --tokenizer and --config or --preset")
    if args.model is not None and (args.config or args.preset):
        parser.error("--config and --preset go with --weights")
    try:
        check_decoding_settings(
            names=DECODING_FLAGS,
            beam_size=args.beam_size,
            alpha=args.alpha,
            max_extra_length=args.max_extra_length,
            max_source_length=args.max_source_length,
        )
    except ValueError as error:
        parser.error(str(error))
    _refuse_output_among_inputs(parser, args)
    output_is_empty_folder = os.path.isdir(args.output) and not os.listdir(args.output)
    if os.path.exists(args.output) and not (args.overwrite or output_is_empty_folder):
        parser.fail(f"--output {args.output} exists; pass --overwrite to replace it")
    _resolve_model(parser, args)
    _refuse_output_among_inputs(parser, args)  # the model a run directory names
    for name in ("model", "weights", "tokenizer", "config"):
        value = getattr(args, name)
        if value is not None and not os.path.isfile(value):
            parser.fail(f"--{name} file not found: {value}")
    if args.tokenizer is not None:
        _check_tokenizer_file(parser, args.tokenizer)
    if args.quantization is not None and args.format != "ctranslate2":
        parser.error("--quantization goes with --format ctranslate2")
    if args.format == "ctranslate2":
        return _export_ctranslate2(parser, args)
    # The backend loads here, once the arguments and paths are checked.
    import keras

    from keras_transformer.export.export_saved_model import export_saved_model
    from keras_transformer.export.run_export_command import run_export_command

    if keras.backend.backend() != "tensorflow":
        print(
            f"KERAS_BACKEND is {keras.backend.backend()}: exporting with "
            "KERAS_BACKEND=tensorflow in a subprocess.",
            file=sys.stderr,
        )
        return run_export_command(argv).returncode
    try:
        model, tokenizer = _load(args)
        path = export_saved_model(
            model,
            tokenizer,
            args.output,
            beam_size=args.beam_size,
            alpha=args.alpha,
            length_penalty_rule=args.length_penalty_rule,
            max_extra_length=args.max_extra_length,
            max_source_length=args.max_source_length,
            overwrite=args.overwrite,
        )
    except (OSError, ValueError, TypeError) as error:
        parser.fail(error)
    # Messages, not data: stdout stays empty.
    print(f"Exported a SavedModel to {path}", file=sys.stderr)
    print(
        "  serving_default: sentences string [batch] -> translations, scores, truncated",
        file=sys.stderr,
    )
    print(
        "  translate_ids:   token_ids int32 [batch, length] -> token_ids, scores, truncated",
        file=sys.stderr,
    )
    return 0


def _export_ctranslate2(parser, args):
    """`--format ctranslate2`: on any backend, since only the weights are read."""
    try:
        import_ctranslate2()  # before the (slow) model load
        from keras_transformer.export.ctranslate2_export import export_ctranslate2

        model, tokenizer = _load(args)
        path = export_ctranslate2(
            model, tokenizer, args.output, quantization=args.quantization, overwrite=args.overwrite
        )
    except (ImportError, OSError, ValueError, TypeError) as error:
        parser.fail(error)
    weights = args.quantization or "float32"
    print(f"Exported a CTranslate2 model ({weights} weights) to {path}", file=sys.stderr)
    return 0


def _resolve_model(parser, args):
    """Points `args.model` at a .keras file (from --run-dir or a --model directory)."""
    try:
        if args.run_dir is not None:
            args.model = RunDirectory(args.run_dir).model_file()
        elif args.model is not None:
            args.model = resolve_model_file(
                args.model, "export", needs_tokenizer=args.tokenizer is None
            )
    except ValueError as error:
        parser.error(f"--{'run-dir' if args.run_dir is not None else 'model'} {error}")


def _check_tokenizer_file(parser, path):
    """Exits (status 2) unless `path` is a SentencePiece model with the package's ids."""
    from keras_transformer.text.sentencepiece_ids import check_special_ids

    with open(path, "rb") as file:
        proto = file.read()
    try:
        check_special_ids(proto)
    except ValueError as error:
        parser.fail(f"--tokenizer {path}: {' '.join(str(error).split())}")


def _refuse_output_among_inputs(parser, args):
    """Exits (status 2) when --output is, or holds, a file the export reads.

    `--overwrite` replaces the whole directory: a model, weights, tokenizer or
    config inside it would be deleted before (or while) it is read.
    """
    inputs = [
        ("--model", args.model),
        ("--weights", args.weights),
        ("--tokenizer", args.tokenizer),
        ("--config", args.config),
    ]
    try:
        check_output_is_not_an_input(args.output, inputs)
        check_inputs_outside_output_dir(args.output, inputs)
    except ValueError as error:
        parser.error(str(error))


def _load(args):
    """(model, tokenizer) from the command's arguments."""
    import keras

    from keras_transformer.checkpoints.model_file_check import check_model_file, reading_model_file
    from keras_transformer.export.load_translation_model import load_translation_model
    from keras_transformer.models.build_model import build_model
    from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
    from keras_transformer.text.subword_tokenizer import SubwordTokenizer

    tokenizer = SubwordTokenizer(proto=args.tokenizer) if args.tokenizer else None
    if args.model is not None:
        if tokenizer is None:
            return load_translation_model(args.model, compile=False)
        with reading_model_file(check_model_file(args.model)):
            model = keras.saving.load_model(args.model, compile=False)
        if not isinstance(model, Seq2SeqTransformer):
            raise ValueError(
                f"{args.model} holds a {type(model).__name__}, not a Seq2SeqTransformer."
            )
        return model, tokenizer
    model = build_model(
        args.config,
        preset=args.preset,
        vocabulary_size=tokenizer.vocabulary_size() if args.preset else None,
    )
    with reading_model_file(check_model_file(args.weights)):
        model.load_weights(args.weights)
    return model, tokenizer


if __name__ == "__main__":
    sys.exit(main())
