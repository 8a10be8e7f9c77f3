"""`keras-transformer train`: run a recipe's settings (`--recipe`, default the quickstart).

The flags are generated from `ExperimentConfig`'s fields (`add_config_arguments`, through
`keras_transformer.experiment.recipe_main`), with the recipe's values as defaults.
"""

import sys

from keras_transformer.utils.command_line import OneLineErrorParser

PROG = "keras-transformer train"


def main(argv=None, prog=PROG):
    """Runs the command.

    Args:
        argv: list of str arguments; None reads `sys.argv`.
        prog: str, the command as typed, for usage and errors.

    Returns:
        int, the exit status (0 on success; a user error exits with 2 and one line).
    """
    from keras_transformer.experiment.recipes import recipe_names, run_recipe

    argv = sys.argv[1:] if argv is None else list(argv)
    names = recipe_names()
    parser = OneLineErrorParser(prog=prog, add_help=False)
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

    return run_recipe(known.recipe, rest, prog=prog, add_arguments=add_recipe)
