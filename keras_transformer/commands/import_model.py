"""`keras-transformer import FORMAT ...`: a published model as a translation model file.

FORMAT picks the command: `marian` (`import_marian.py`) or `fairseq` (`import_fairseq.py`),
each with its own options dataclass and `--help`.
"""

import sys

from keras_transformer.commands import import_fairseq, import_marian
from keras_transformer.utils.command_line import OneLineErrorParser

PROG = "keras-transformer import"
# Each format's command.
FORMAT_COMMANDS = {"marian": import_marian.main, "fairseq": import_fairseq.main}


def main(argv=None, prog=PROG):
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
    command = FORMAT_COMMANDS[arguments.format]
    return command(argv[1:], prog=f"{prog} {arguments.format}") or 0
