"""`keras-transformer import marian DIR --output MODEL.keras`: a Marian / OPUS-MT folder."""

import os
import sys

from keras_transformer.utils.command_line import OneLineErrorParser

DESCRIPTION = """\
Write a Hugging Face Marian / OPUS-MT folder (what save_pretrained writes: config.json,
model.safetensors or pytorch_model.bin, source.spm, target.spm, vocab.json) as a translation
model file that translate, evaluate, export and train --init-from take. transformers is not
needed; pytorch_model.bin needs torch. translate --length-penalty-rule average --alpha 1 ranks
beams as transformers' generate does.
"""


# What a save_pretrained folder must hold; checked before the backend loads.
FOLDER_FILES = ("config.json", "source.spm", "target.spm", "vocab.json")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def _missing_files(directory):
    missing = [name for name in FOLDER_FILES if not os.path.isfile(os.path.join(directory, name))]
    if not any(os.path.isfile(os.path.join(directory, name)) for name in WEIGHT_FILES):
        missing.append(f"{WEIGHT_FILES[0]} (or {WEIGHT_FILES[1]})")
    return missing


def build_parser(prog=None):
    parser = OneLineErrorParser(prog=prog, description=DESCRIPTION)
    parser.add_argument("directory", metavar="DIR", help="The save_pretrained folder.")
    parser.add_argument(
        "--output", required=True, metavar="MODEL.keras", help="The model file to write."
    )
    parser.add_argument("--overwrite", action="store_true", help="Replace an existing --output.")
    return parser


def main(argv=None, prog=None):
    """Runs the command; returns the exit status (2 and one line for a user error)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if not os.path.isdir(args.directory):
        parser.fail(f"{args.directory}: not a folder")
    missing = _missing_files(args.directory)
    if missing:
        parser.fail(
            f"{args.directory}: missing {', '.join(missing)}; expected a Marian folder as "
            "save_pretrained writes it"
        )
    if not args.output.endswith(".keras"):
        parser.fail(f"--output must end with .keras. Received: {args.output}")
    if os.path.exists(args.output) and not args.overwrite:
        parser.fail(f"--output {args.output} exists; pass --overwrite to replace it")
    # The backend loads here, once the arguments are checked.
    from keras_transformer.pretrained.marian import import_marian

    try:
        path = import_marian(args.directory, args.output)
    except (OSError, ValueError, ImportError) as error:
        parser.fail(error)
    print(f"Wrote {path}", file=sys.stderr)  # a message, not data: stdout stays empty
    return 0


if __name__ == "__main__":
    sys.exit(main())
