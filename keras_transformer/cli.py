"""`keras-transformer train | translate | evaluate | average | export | plot | import | recipes`.

Also `python -m keras_transformer COMMAND`.

Each subcommand's `--help` explains its flags. `train` runs a recipe's settings
(`--recipe`, default the quickstart) with the recipes' flags; `translate` reads
sentences from a file or stdin and writes translations to a file or stdout;
`evaluate`, `average`, `export` and `plot` are the package's `python -m
keras_transformer.{evaluation,checkpoints,export,figures}` commands.
"""

import argparse
import sys

from keras_transformer import __version__
from keras_transformer.commands import (
    average,
    evaluate,
    export,
    import_model,
    plot,
    recipes,
    train,
    translate,
)
from keras_transformer.utils.backend_logs import quiet_backend_logs
from keras_transformer.utils.command_line import OneLineErrorParser
from keras_transformer.utils.process_exit import skip_collection_at_exit

# Each command and its line in the top-level --help.
COMMANDS = {
    "train": "Train a model with a recipe's settings (--recipe; default: the quickstart).",
    "translate": "Translate sentences from a file or stdin with a trained or published model.",
    "evaluate": "Score translations against references (BLEU, chrF, tokenized BLEU).",
    "average": "Average a run's last checkpoints into one model file (paper 6.1).",
    "export": "Export a model for serving: a TensorFlow Serving SavedModel or CTranslate2.",
    "plot": "Draw a run's training curves, learning-rate schedule and attention as PNG files.",
    "import": "Convert a published Marian / OPUS-MT or fairseq model into a model file.",
    "recipes": "List the recipes and model presets, one line each.",
}
PROG = "keras-transformer"
HELP_END = (
    "keras-transformer COMMAND --help explains a command's flags;\n"
    "python -m keras_transformer COMMAND runs the same."
)
# Each command's front end (keras_transformer/commands/): main(argv, prog).
HANDLERS = {
    "train": train.main,
    "translate": translate.main,
    "evaluate": evaluate.main,
    "average": average.main,
    "export": export.main,
    "plot": plot.main,
    "import": import_model.main,
    "recipes": recipes.main,
}


# Module -> the package extra that installs it, for a Keras backend chosen but not installed.
BACKEND_EXTRAS = {"jax": "jax", "jaxlib": "jax", "torch": "torch"}


def main(argv=None):
    """Runs one subcommand; returns its exit code."""
    skip_collection_at_exit()
    argv = sys.argv[1:] if argv is None else list(argv)
    quiet_backend_logs(argv)
    width = max(map(len, COMMANDS)) + 2
    listing = "\n".join(f"  {name:<{width}}{line}" for name, line in COMMANDS.items())
    parser = OneLineErrorParser(
        prog=PROG,
        description=f"commands:\n{listing}\n\n{HELP_END}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "command",
        choices=tuple(COMMANDS),
        metavar="COMMAND",
        help="What to do; COMMAND --help for more.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    if not argv:
        parser.error(f"a command is needed: one of {', '.join(COMMANDS)}")
    if argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    if argv[0] == "--version":
        parser.parse_args(argv[:1])  # prints the version, exits 0
    arguments = parser.parse_args(argv[:1])
    try:
        return HANDLERS[arguments.command](argv[1:], prog=f"{PROG} {arguments.command}") or 0
    except ModuleNotFoundError as error:
        backend = (error.name or "").split(".")[0]
        if backend not in BACKEND_EXTRAS:
            raise
        # KERAS_BACKEND (or ~/.keras/keras.json) names a backend that is not installed.
        print(
            f"{PROG} {arguments.command}: error: the Keras backend {backend} is not installed: "
            f"pip install 'keras-transformer-mt[{BACKEND_EXTRAS[backend]}]', or set "
            "KERAS_BACKEND to an installed one (tensorflow is always installed)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        # Ctrl-C outside training (which saves and names its checkpoint itself): one line,
        # the status a SIGINT gives, no traceback. Outputs are written atomically.
        print(f"{PROG} {arguments.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
