"""`keras-transformer import FORMAT ...`: a published model as a translation model file.

FORMAT picks the command, one per format of the registry (pretrained/formats.py):
`import_marian.py`, `import_fairseq.py`, ..., each with its own options dataclass and `--help`.
"""

import importlib
import sys

from keras_transformer.pretrained.formats import FORMATS, command_module, summary
from keras_transformer.utils.command_line import OneLineErrorParser

PROG = "keras-transformer import"
# Each format's command module, imported when its format is chosen.
FORMAT_COMMANDS = {name: command_module(name) for name in FORMATS}


def main(argv=None, prog=PROG):
    """Runs `import FORMAT ...`; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = OneLineErrorParser(
        prog=prog,
        description=f"Write a published model ({', '.join(map(summary, FORMATS))}) as a "
        "translation model file that translate, evaluate, export and train --init-from take.",
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
    command = importlib.import_module(FORMAT_COMMANDS[arguments.format]).main
    return command(argv[1:], prog=f"{prog} {arguments.format}") or 0
