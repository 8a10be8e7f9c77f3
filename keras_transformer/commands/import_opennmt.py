"""`keras-transformer import opennmt CHECKPOINT.pt --output MODEL.keras`: an OpenNMT-py model."""

import argparse
import dataclasses
import sys
import zipfile

from keras_transformer.utils.command_line import (
    OneLineErrorParser,
    add_verbose_flag,
    check_input_files,
    check_keras_output,
    write_model_file,
)
from keras_transformer.utils.config_arguments import add_config_arguments, parsed_config
from keras_transformer.utils.dataclass_config import DataclassConfig, setting

PROG = "keras-transformer import opennmt"

DESCRIPTION = """\
Write an OpenNMT-py (v3) Transformer checkpoint (a .pt file of onmt_train) as a translation
model file that translate, evaluate, export and train --init-from take. OpenNMT-py itself is
not needed; PyTorch is, and reads the checkpoint with its weights-only loader (no code from
the file runs). The vocabularies come from the checkpoint; the text is cut into pieces by the
SentencePiece models of its sentencepiece transform (found where its options say, or beside
the checkpoint), or by --src-subword-model and --tgt-subword-model.
"""


@dataclasses.dataclass(frozen=True)
class OpenNMTImportOptions(DataclassConfig):
    """The checkpoint and SentencePiece models `import opennmt` reads, and its output."""

    checkpoint: str | None = setting(
        None, "OpenNMT-py checkpoint (.pt).", metavar="CHECKPOINT", positional=True
    )
    output: str | None = setting(None, "The .keras file to write.", metavar="FILE", required=True)
    overwrite: bool = setting(False, "Replace an existing --output.")
    src_subword_model: str | None = setting(
        None,
        "Source SentencePiece model (none: the checkpoint's src_subword_model).",
        metavar="FILE",
    )
    tgt_subword_model: str | None = setting(
        None,
        "Target SentencePiece model (none: the checkpoint's tgt_subword_model, or "
        "--src-subword-model).",
        metavar="FILE",
    )

    def __post_init__(self):
        self.check_types()


def build_parser(prog=PROG):
    """`(parser, added)`: the parser and the `OpenNMTImportOptions` fields its flags set."""
    parser = OneLineErrorParser(
        prog=prog, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_verbose_flag(parser)
    return parser, add_config_arguments(parser, OpenNMTImportOptions())


def _check_paths(parser, options):
    """Exits with one line (status 2) for a path the import cannot use, before torch loads."""
    check_keras_output(parser, options.output, options.overwrite)
    check_input_files(
        parser,
        (
            ("CHECKPOINT", options.checkpoint),
            ("--src-subword-model", options.src_subword_model),
            ("--tgt-subword-model", options.tgt_subword_model),
        ),
    )
    if not zipfile.is_zipfile(options.checkpoint):
        parser.fail(
            f"CHECKPOINT {options.checkpoint}: not a torch checkpoint (not a zip archive); "
            "expected the .pt file of an OpenNMT-py training run"
        )


def main(argv=None, prog=PROG):
    """Runs the command; returns the exit status (0, 2 for bad input, 1 if writing fails)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, added = build_parser(prog)
    options = parsed_config(parser, OpenNMTImportOptions(), parser.parse_args(argv), added)
    _check_paths(parser, options)
    from keras_transformer.pretrained.opennmt import import_opennmt

    return write_model_file(
        parser,
        lambda: import_opennmt(
            options.checkpoint,
            options.output,
            src_subword_model=options.src_subword_model,
            tgt_subword_model=options.tgt_subword_model,
        ),
        options.output,
    )
