"""`keras-transformer import fairseq CHECKPOINT --dictionary-dir DIR --output FILE.keras`."""

import argparse
import dataclasses
import os
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

PROG = "keras-transformer import fairseq"

DESCRIPTION = """\
Write a fairseq `transformer` checkpoint (architectures transformer, transformer_wmt_en_de,
transformer_vaswani_wmt_en_de_big and the other paper-layout variants) as a translation model
file that translate and evaluate take. fairseq itself is not needed; PyTorch is (to read the
checkpoint), and subword-nmt for BPE codes (pip install 'keras-transformer-mt[fairseq]').

The dictionaries are DIR/dict.SRC.txt and DIR/dict.TGT.txt (languages from the checkpoint or
--source-lang/--target-lang). The subword model is --bpe-codes (subword-nmt codes, applied after
Moses tokenization as fairseq's WMT models do) or --sentencepiece-model; by default DIR's
bpecodes or sentencepiece.bpe.model. A model with a Moses + BPE tokenizer translates in Python
(keras-transformer translate); it cannot be exported as a SavedModel or for CTranslate2.
"""


@dataclasses.dataclass(frozen=True)
class FairseqImportOptions(DataclassConfig):
    """The checkpoint, dictionaries and subword model `import fairseq` reads, and its output."""

    checkpoint: str | None = setting(
        None, "fairseq checkpoint (.pt).", metavar="CHECKPOINT", positional=True
    )
    dictionary_dir: str | None = setting(
        None,
        "Folder of dict.SRC.txt and dict.TGT.txt (and bpecodes).",
        metavar="DIR",
        required=True,
    )
    output: str | None = setting(None, "The .keras file to write.", metavar="FILE", required=True)
    overwrite: bool = setting(False, "Replace an existing --output.")
    source_lang: str | None = setting(
        None, "Source language (none: the checkpoint's).", metavar="LANG"
    )
    target_lang: str | None = setting(
        None, "Target language (none: the checkpoint's).", metavar="LANG"
    )
    bpe_codes: str | None = setting(
        None, "subword-nmt BPE codes.", metavar="FILE", group="subwords"
    )
    sentencepiece_model: str | None = setting(
        None, "SentencePiece model.", metavar="FILE", group="subwords"
    )
    tokenizer: str | None = setting(
        None,
        "Before BPE codes: Moses tokenization, or whitespace only (none: moses, unless the "
        "checkpoint says space; no tokenizer with a SentencePiece model).",
        choices=("moses", "space"),
    )

    def __post_init__(self):
        self.check_types()


def build_parser(prog=PROG):
    """`(parser, added)`: the parser and the `FairseqImportOptions` fields its flags set."""
    parser = OneLineErrorParser(
        prog=prog, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_verbose_flag(parser)
    return parser, add_config_arguments(parser, FairseqImportOptions())


def _looks_like_torch_checkpoint(path):
    # torch.save writes a zip archive; before torch 1.6, a pickle (protocol 2+ starts 0x80).
    # Checked here so that a wrong file is one line before torch loads.
    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as file:
        return file.read(1) == b"\x80"


def _check_paths(parser, options):
    """Exits with one line (status 2) for a path the import cannot use."""
    check_keras_output(parser, options.output, options.overwrite)
    check_input_files(
        parser,
        (
            ("CHECKPOINT", options.checkpoint),
            ("--bpe-codes", options.bpe_codes),
            ("--sentencepiece-model", options.sentencepiece_model),
        ),
    )
    if not os.path.isdir(options.dictionary_dir):
        parser.fail(f"--dictionary-dir {options.dictionary_dir}: not a folder")
    if not _looks_like_torch_checkpoint(options.checkpoint):
        parser.fail(
            f"CHECKPOINT {options.checkpoint}: not a torch checkpoint (neither a zip archive "
            "nor a pickle); expected the model.pt of a fairseq training run"
        )


def main(argv=None, prog=PROG):
    """Runs the command; returns the exit status (0, 2 for bad input, 1 if writing fails)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, added = build_parser(prog)
    options = parsed_config(parser, FairseqImportOptions(), parser.parse_args(argv), added)
    _check_paths(parser, options)
    moses = None if options.tokenizer is None else options.tokenizer == "moses"
    if options.sentencepiece_model and moses:
        parser.error("--tokenizer moses cannot be combined with --sentencepiece-model")
    from keras_transformer.pretrained.fairseq import import_fairseq

    return write_model_file(
        parser,
        lambda: import_fairseq(
            options.checkpoint,
            options.dictionary_dir,
            options.output,
            source_lang=options.source_lang,
            target_lang=options.target_lang,
            bpe_codes=options.bpe_codes,
            sentencepiece_model=options.sentencepiece_model,
            moses=moses,
        ),
        options.output,
    )
