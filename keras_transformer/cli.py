"""`keras-transformer train | translate | evaluate | average | export | plot | import`.

Also `python -m keras_transformer COMMAND`.

Each subcommand's `--help` explains its flags. `train` runs a recipe's settings
(`--recipe`, default the quickstart) with the recipes' flags; `translate` reads
sentences from a file or stdin and writes translations to a file or stdout;
`evaluate`, `average`, `export` and `plot` are the package's `python -m
keras_transformer.{evaluation,checkpoints,export,figures}` commands.
"""

import sys

from keras_transformer import __version__
from keras_transformer.utils.command_line import OneLineErrorParser

COMMANDS = ("train", "translate", "evaluate", "average", "export", "plot", "import")
PROG = "keras-transformer"


def _train(argv):
    from keras_transformer.experiment.recipes import recipe_names, run_recipe

    names = recipe_names()
    parser = OneLineErrorParser(prog=f"{PROG} train", add_help=False)
    parser.add_argument("--recipe", choices=names, default="quickstart")
    known, rest = parser.parse_known_args(argv)

    def add_recipe(recipe_parser):  # shown in --help; the value was read above
        recipe_parser.add_argument(
            "--recipe",
            choices=names,
            default=known.recipe,
            metavar="NAME",
            help=f"The recipe whose settings the other flags override: {', '.join(names)} "
            "(default: quickstart). `train --recipe NAME --help` shows NAME's settings.",
        )

    return run_recipe(known.recipe, rest, prog=f"{PROG} train", add_arguments=add_recipe)


def _delegate(module_name, command=None):
    """Runs `module_name`'s `main`; passes it `prog` (the command as typed) if it takes one."""

    def run(argv):
        import importlib

        module = importlib.import_module(module_name)
        if command is None:
            return module.main(argv)
        return module.main(argv, prog=f"{PROG} {command}")

    return run


HANDLERS = {
    "train": _train,
    "translate": _delegate("keras_transformer.translate_command"),
    "evaluate": _delegate("keras_transformer.evaluation.__main__", "evaluate"),
    "average": _delegate("keras_transformer.checkpoints.__main__", "average"),
    "export": _delegate("keras_transformer.export.__main__", "export"),
    "plot": _delegate("keras_transformer.figures.__main__", "plot"),
    "import": _delegate("keras_transformer.pretrained.import_command", "import"),
}


def main(argv=None):
    """Runs one subcommand; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = OneLineErrorParser(prog=PROG, description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("command", choices=COMMANDS, help="What to do; COMMAND --help for more.")
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
        return HANDLERS[arguments.command](argv[1:]) or 0
    except KeyboardInterrupt:
        # Ctrl-C outside training (which saves and names its checkpoint itself): one line,
        # the status a SIGINT gives, no traceback. Outputs are written atomically.
        print(f"{PROG} {arguments.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
