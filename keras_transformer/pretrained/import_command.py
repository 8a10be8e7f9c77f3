"""`keras-transformer import FORMAT ...`: a published model as a translation model file."""

import sys

from keras_transformer.utils.command_line import OneLineErrorParser

# Each format's command module, imported only when that format is asked for.
FORMAT_COMMANDS = {
    "marian": "keras_transformer.pretrained.marian_command",
    "fairseq": "keras_transformer.pretrained.fairseq_command",
}


def main(argv=None, prog="keras-transformer import"):
    """Runs `import FORMAT ...`; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = OneLineErrorParser(
        prog=prog,
        description="Write a published model (Marian / OPUS-MT, fairseq) as a translation "
        "model file that translate, evaluate, export and train --init-from take.",
    )
    parser.add_argument(
        "format", choices=tuple(FORMAT_COMMANDS), help="The model's format; FORMAT --help for more."
    )
    if not argv:
        parser.error(f"a format is needed: one of {', '.join(FORMAT_COMMANDS)}")
    if argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    arguments = parser.parse_args(argv[:1])
    import importlib

    command = importlib.import_module(FORMAT_COMMANDS[arguments.format])
    return command.main(argv[1:], prog=f"{prog} {arguments.format}") or 0


if __name__ == "__main__":
    sys.exit(main())
