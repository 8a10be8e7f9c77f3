"""`keras-transformer import fairseq CHECKPOINT --dictionary-dir DIR --output FILE.keras`."""

import argparse
import contextlib
import os
import sys
import zipfile

from keras_transformer.utils.command_line import OneLineErrorParser

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


def build_parser(prog):
    parser = OneLineErrorParser(
        prog=prog, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint", metavar="CHECKPOINT", help="fairseq checkpoint (.pt).")
    parser.add_argument(
        "--dictionary-dir",
        required=True,
        metavar="DIR",
        help="Folder of dict.SRC.txt and dict.TGT.txt (and bpecodes).",
    )
    parser.add_argument("--output", required=True, metavar="FILE", help="The .keras file to write.")
    parser.add_argument("--overwrite", action="store_true", help="Replace an existing --output.")
    parser.add_argument("--source-lang", metavar="LANG", help="Default: the checkpoint's.")
    parser.add_argument("--target-lang", metavar="LANG", help="Default: the checkpoint's.")
    subwords = parser.add_mutually_exclusive_group()
    subwords.add_argument("--bpe-codes", metavar="FILE", help="subword-nmt BPE codes.")
    subwords.add_argument("--sentencepiece-model", metavar="FILE", help="SentencePiece model.")
    parser.add_argument(
        "--tokenizer",
        choices=("moses", "space"),
        help="Before BPE codes: Moses tokenization, or whitespace only. Default: moses, unless "
        "the checkpoint says space; none with a SentencePiece model.",
    )
    return parser


def _looks_like_torch_checkpoint(path):
    # torch.save writes a zip archive; before torch 1.6, a pickle (protocol 2+ starts 0x80).
    # Checked here so that a wrong file is one line before torch loads.
    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as file:
        return file.read(1) == b"\x80"


def main(argv=None, prog="keras-transformer import fairseq"):
    """Runs the command; returns the exit status (0, 2 for bad input, 1 if writing fails)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if not args.output.endswith(".keras"):
        parser.error(f"--output must end with .keras. Received: {args.output}")
    if os.path.exists(args.output) and not args.overwrite:
        parser.fail(f"--output {args.output} exists; pass --overwrite to replace it")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        parser.fail(f"--output {args.output}: its folder does not exist")
    for flag, path in (
        ("CHECKPOINT", args.checkpoint),
        ("--bpe-codes", args.bpe_codes),
        ("--sentencepiece-model", args.sentencepiece_model),
    ):
        if path is not None and not os.path.isfile(path):
            parser.fail(f"{flag} {path}: no such file")
    if not os.path.isdir(args.dictionary_dir):
        parser.fail(f"--dictionary-dir {args.dictionary_dir}: not a folder")
    if not _looks_like_torch_checkpoint(args.checkpoint):
        parser.fail(
            f"CHECKPOINT {args.checkpoint}: not a torch checkpoint (neither a zip archive nor "
            "a pickle); expected the model.pt of a fairseq training run"
        )
    moses = None if args.tokenizer is None else args.tokenizer == "moses"
    if args.sentencepiece_model and moses:
        parser.error("--tokenizer moses cannot be combined with --sentencepiece-model")
    from keras_transformer.pretrained.fairseq import import_fairseq

    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries no data here
            import_fairseq(
                args.checkpoint,
                args.dictionary_dir,
                args.output,
                source_lang=args.source_lang,
                target_lang=args.target_lang,
                bpe_codes=args.bpe_codes,
                sentencepiece_model=args.sentencepiece_model,
                moses=moses,
            )
    except (ValueError, ImportError, FileNotFoundError, IsADirectoryError) as error:
        parser.fail(error)
    except OSError as error:
        from keras_transformer.utils.command_line import one_line

        print(f"{prog}: error: {one_line(error)}", file=sys.stderr)
        return 1
    print(f"{prog}: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
