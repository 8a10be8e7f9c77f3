"""`keras-transformer train | translate | evaluate | average | export | plot | import`.

Also `python -m keras_transformer COMMAND`.

Each subcommand's `--help` explains its flags. `train` runs a recipe's settings
(`--recipe`, default the quickstart) with the recipes' flags; `translate` reads
sentences from a file or stdin and writes translations to a file or stdout;
`evaluate`, `average`, `export` and `plot` are the package's `python -m
keras_transformer.{evaluation,checkpoints,export,figures}` commands.
"""

import sys

from keras_transformer.utils.command_line import OneLineErrorParser

COMMANDS = ("train", "translate", "evaluate", "average", "export", "plot", "import")
PROG = "keras-transformer"


def _train(argv):
    from keras_transformer.experiment.recipe_main import recipe_main
    from keras_transformer.experiment.recipes import load_recipe, recipe_names

    parser = OneLineErrorParser(prog=f"{PROG} train", add_help=False)
    parser.add_argument("--recipe", choices=recipe_names(), default="quickstart")
    known, rest = parser.parse_known_args(argv)
    needs_data = known.recipe != "quickstart"
    description = (
        f"Train with the {known.recipe!r} recipe's settings (--recipe: "
        f"{', '.join(recipe_names())}); every flag below overrides one of them."
    )
    return recipe_main(
        load_recipe(known.recipe),
        description,
        argv=rest,
        require_data=needs_data,
        prog=f"{PROG} train [--recipe NAME]",
    )


def _delegate(module_name):
    def run(argv):
        import importlib

        return importlib.import_module(module_name).main(argv)

    return run


HANDLERS = {
    "train": _train,
    "translate": _delegate("keras_transformer.translate_command"),
    "evaluate": _delegate("keras_transformer.evaluation.__main__"),
    "average": _delegate("keras_transformer.checkpoints.__main__"),
    "export": _delegate("keras_transformer.export.__main__"),
    "plot": _delegate("keras_transformer.figures.__main__"),
    "import": _delegate("keras_transformer.pretrained.import_command"),
}


def main(argv=None):
    """Runs one subcommand; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = OneLineErrorParser(prog=PROG, description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("command", choices=COMMANDS, help="What to do; COMMAND --help for more.")
    if not argv:
        parser.error(f"a command is needed: one of {', '.join(COMMANDS)}")
    if argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    arguments = parser.parse_args(argv[:1])
    return HANDLERS[arguments.command](argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
