"""`keras-transformer export`: write a SavedModel for TF Serving, or a CTranslate2 model.

Example:

    keras-transformer export --model runs/base/translator.keras --output serving/translator/1
    keras-transformer export --format ctranslate2 --quantization int8 \\
        --model runs/base/translator.keras --output serving/ct2
"""

import argparse
import dataclasses
import os
import sys

from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.export.ctranslate2_support import QUANTIZATIONS, import_ctranslate2
from keras_transformer.utils.command_line import OneLineErrorParser, add_verbose_flag
from keras_transformer.utils.config_arguments import add_config_arguments, parsed_config
from keras_transformer.utils.dataclass_config import DataclassConfig, setting
from keras_transformer.utils.run_directory import RunDirectory, resolve_model_file
from keras_transformer.utils.same_file import (
    check_inputs_outside_output_dir,
    check_output_is_not_an_input,
    check_output_writable,
)

PROG = "keras-transformer export"
# The options that name the model's files (`load_model_files`' arguments).
MODEL_FILES = ("model", "weights", "config", "preset", "tokenizer", "adapter")

DESCRIPTION = """\
Export a trained model as a SavedModel that stock TensorFlow Serving serves: UTF-8 sentences
in, translations and scores out (signature serving_default), or SentencePiece ids in and out
(signature translate_ids). Tokenization, the search (--search: beam, with the key/value
cache and length penalty, greedy or sampling), and detokenization all run in the graph; the
decoding settings are fixed here and written to assets/translation_settings.json. See
docs/serving.md.

The graph is traced on the TensorFlow backend whatever backend trained the model: under
another KERAS_BACKEND the export runs in a subprocess with KERAS_BACKEND=tensorflow.

--format ctranslate2 writes a CTranslate2 model directory instead (the optional ctranslate2
package: pip install 'keras-transformer-mt[ctranslate2]'), optionally quantized, with the
SentencePiece model as vocabulary.model; decoding settings are chosen at translation time.
"""

# DecodingConfig's fields that a served model has no use for (those not marked `served`): it
# gives one translation per sentence and bounds its sub-batches by source ids only.
UNSERVED_DECODING = tuple(
    field.name
    for field in dataclasses.fields(DecodingConfig)
    if field.name not in DecodingConfig.fields_with("served")
)


@dataclasses.dataclass(frozen=True)
class ExportOptions(DataclassConfig):
    """What `export` reads and writes; the served decoding is a `DecodingConfig`."""

    model: str | None = setting(
        None,
        "A .keras file from save_translation_model (model and tokenizer), a run directory "
        "(its model.keras), or a Seq2SeqTransformer .keras file with --tokenizer.",
        metavar="FILE",
        group="model",
        required=True,
    )
    run_dir: str | None = setting(
        None,
        "A training run's directory: export its model.keras.",
        metavar="RUN",
        group="model",
        required=True,
    )
    weights: str | None = setting(
        None,
        "A .weights.h5 file (e.g. averaged checkpoints), with --tokenizer and --config or "
        "--preset.",
        metavar="FILE",
        group="model",
        required=True,
    )
    tokenizer: str | None = setting(None, "The SentencePiece .model file.", metavar="FILE")
    adapter: str | None = setting(
        None,
        "LoRA adapters (a `train --lora-rank` run's adapter.lora) of the model, merged into "
        "its kernels in memory before the export (no merged file is written); an adapter "
        "trained on another model is refused.",
        metavar="ADAPTER",
    )
    config: str | None = setting(
        None,
        "With --weights: a run's config.json, or a JSON file of TransformerConfig fields (or "
        "of Seq2SeqTransformer.get_config()).",
        metavar="JSON",
        group="config",
    )
    preset: str | None = setting(
        None,
        "With --weights: model preset (base, big, ...); the vocabulary size is the tokenizer's.",
        metavar="NAME",
        group="config",
    )
    output: str | None = setting(
        None,
        "SavedModel directory to create, a numbered version under the model's base path for "
        "TF Serving, e.g. serving/translator/1.",
        metavar="DIR",
        required=True,
    )
    overwrite: bool = setting(False, "Replace an existing --output.")
    format: str = setting(
        "saved_model",
        "saved_model (TF Serving), ctranslate2 (a CTranslate2 model directory; the decoding "
        "flags are then chosen at translation time) or keras (the model and tokenizer in one "
        ".keras file, --output FILE.keras, e.g. with --quantize int8 for translate --model).",
        choices=("saved_model", "ctranslate2", "keras"),
    )
    quantization: str | None = setting(
        None,
        "With --format ctranslate2: CTranslate2's weight type, converted by CTranslate2 (none: "
        "float32, as trained). --quantize int8 is the package's own (Keras' int8 layers), for "
        "--format saved_model and keras.",
        choices=QUANTIZATIONS,
    )

    def __post_init__(self):
        self.check_types()


def build_parser(prog=PROG):
    """The command's argument parser.

    Returns:
        `(parser, added)`: the parser and, for `ExportOptions` and `DecodingConfig`,
        the fields its flags set.
    """
    parser = OneLineErrorParser(
        prog=prog, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    added = add_config_arguments(parser, ExportOptions())
    decoding = add_config_arguments(parser, DecodingConfig(), skip=UNSERVED_DECODING)
    add_verbose_flag(parser)
    return parser, (added, decoding)


def _check_options(parser, options):
    """Exits with one line (status 2) for flags that do not go together or unusable paths."""
    if options.weights is not None and (
        options.tokenizer is None or not (options.config or options.preset)
    ):
        parser.error("--weights needs --tokenizer and --config or --preset")
    if options.model is not None and (options.config or options.preset):
        parser.error("--config and --preset go with --weights")
    _refuse_output_among_inputs(parser, options)
    output_is_empty_folder = os.path.isdir(options.output) and not os.listdir(options.output)
    if os.path.exists(options.output) and not (options.overwrite or output_is_empty_folder):
        parser.fail(f"--output {options.output} exists; pass --overwrite to replace it")
    options = _resolve_model(parser, options)
    _refuse_output_among_inputs(parser, options)  # the model a run directory names
    for name in ("model", "weights", "tokenizer", "config"):
        value = getattr(options, name)
        if value is not None and not os.path.isfile(value):
            parser.fail(f"--{name} file not found: {value}")
    if options.tokenizer is not None:
        _check_tokenizer_file(parser, options.tokenizer)
    if options.quantization is not None and options.format != "ctranslate2":
        parser.error("--quantization goes with --format ctranslate2")
    if options.adapter is not None:
        from keras_transformer.export.lora_adapter import read_adapter_settings

        try:
            read_adapter_settings(options.adapter)  # an adapter file, before the backend loads
        except (OSError, ValueError) as error:
            parser.error(str(error))
    return options


def main(argv=None, prog=PROG):
    """Runs the command.

    Args:
        argv: list of str arguments; None reads `sys.argv`.
        prog: str, the command as typed, for usage and errors.

    Returns:
        int, the exit status (0 on success; a user error exits with 2 and one line).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, (added, decoding_added) = build_parser(prog)
    arguments = parser.parse_args(argv)
    options = parsed_config(parser, ExportOptions(), arguments, added)
    decoding = parsed_config(parser, DecodingConfig(), arguments, decoding_added)
    options = _check_options(parser, options)
    if decoding.quantize is not None and options.format == "ctranslate2":
        parser.error(
            "--quantize goes with --format saved_model or keras (ctranslate2: --quantization)"
        )
    if options.format == "ctranslate2":
        return _export_ctranslate2(parser, options)
    if options.format == "keras":
        return _export_keras(parser, options, decoding.quantize)
    # The backend loads here, once the arguments and paths are checked.
    from keras_transformer import backend
    from keras_transformer.export.tensorflow_export import TensorFlowExport

    export = TensorFlowExport(
        options.output,
        decoding.to_dict(),
        **{name: getattr(options, name) for name in MODEL_FILES},
        overwrite=options.overwrite,
        prog=parser.prog,
    )
    if not backend.is_tensorflow():
        print(
            f"KERAS_BACKEND is {backend.name()}: exporting with "
            "KERAS_BACKEND=tensorflow in a subprocess.",
            file=sys.stderr,
        )
        status = export.run().returncode
        if status != 0:
            return status
        path = os.path.abspath(options.output)
    else:
        try:
            path = export.export()
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


def _export_ctranslate2(parser, options):
    """`--format ctranslate2`: on any backend, since only the weights are read."""
    try:
        import_ctranslate2()  # before the (slow) model load
        from keras_transformer.export.ctranslate2_export import export_ctranslate2

        model, tokenizer = _load(options)
        path = export_ctranslate2(
            model,
            tokenizer,
            options.output,
            quantization=options.quantization,
            overwrite=options.overwrite,
        )
    except (ImportError, OSError, ValueError, TypeError) as error:
        parser.fail(error)
    weights = options.quantization or "float32"
    print(f"Exported a CTranslate2 model ({weights} weights) to {path}", file=sys.stderr)
    return 0


def _export_keras(parser, options, quantize):
    """`--format keras`: the model and tokenizer in one `.keras` file, on any backend."""
    if not options.output.endswith(".keras"):
        parser.error(f"--format keras writes a .keras file. Received: --output {options.output}")
    try:
        from keras_transformer.export.save_translation_model import save_translation_model
        from keras_transformer.models.quantization import quantize_model

        model, tokenizer = _load(options)
        if quantize is not None:
            quantize_model(model, quantize)
        path = save_translation_model(model, tokenizer, options.output)
    except (OSError, ValueError, TypeError) as error:
        parser.fail(error)
    weights = quantize or "float32"
    print(f"Exported the model ({weights} weights) and tokenizer to {path}", file=sys.stderr)
    return 0


def _resolve_model(parser, options):
    """`options` with `model` a .keras file (from --run-dir or a --model directory)."""
    try:
        if options.run_dir is not None:
            return options.replace(model=RunDirectory.existing(options.run_dir).model_file())
        if options.model is not None:
            model = resolve_model_file(
                options.model, "export", needs_tokenizer=options.tokenizer is None
            )
            return options.replace(model=model)
    except ValueError as error:
        parser.error(f"--{'run-dir' if options.run_dir is not None else 'model'} {error}")
    return options


def _check_tokenizer_file(parser, path):
    """Exits (status 2) unless `path` is a SentencePiece model with the package's ids."""
    from keras_transformer.text.sentencepiece_ids import check_special_ids

    with open(path, "rb") as file:
        proto = file.read()
    try:
        check_special_ids(proto)
    except ValueError as error:
        parser.fail(f"--tokenizer {path}: {' '.join(str(error).split())}")


def _refuse_output_among_inputs(parser, options):
    """Exits (status 2) when --output is, or holds, a file the export reads.

    `--overwrite` replaces the whole directory: a model, weights, tokenizer or
    config inside it would be deleted before (or while) it is read.
    """
    inputs = [
        ("--model", options.model),
        ("--weights", options.weights),
        ("--tokenizer", options.tokenizer),
        ("--config", options.config),
        ("--adapter", options.adapter),
    ]
    try:
        check_output_is_not_an_input(options.output, inputs)
        check_inputs_outside_output_dir(options.output, inputs)
    except ValueError as error:
        parser.error(str(error))
    try:
        check_output_writable(options.output)
    except PermissionError as error:
        parser.fail(error)


def _load(options):
    """(model, tokenizer) from the command's options."""
    from keras_transformer.export.model_files import load_model_files

    return load_model_files(**{name: getattr(options, name) for name in MODEL_FILES})
