"""`keras-transformer recipes`: the recipes and model presets, one line each."""

import sys

from keras_transformer.utils.command_line import OneLineErrorParser

PROG = "keras-transformer recipes"

DESCRIPTION = """\
List the recipes (train --recipe NAME) and the model presets (--preset NAME,
Seq2SeqTransformer.from_architecture) with one line each. train --recipe NAME --help shows a
recipe's settings; train --recipe NAME --print-config writes them as the JSON --config takes.
"""


def listing():
    """The command's output: a section of recipes and one of presets.

    Returns:
        str, lines of `NAME  description`.
    """
    from keras_transformer.experiment.recipes import recipe_names, recipe_summary
    from keras_transformer.models.presets import PRESETS

    recipes = {name: recipe_summary(name) for name in recipe_names()}
    presets = {
        name: f"Table 3 row {name.removeprefix('table3-')}: {preset.description}"
        if name.startswith("table3-")
        else preset.description
        for name, preset in PRESETS.items()
    }
    width = max(map(len, [*recipes, *presets])) + 2
    lines = ["Recipes (keras-transformer train --recipe NAME):"]
    lines += [f"  {name:<{width}}{summary}" for name, summary in recipes.items()]
    lines += ["", "Model presets (train --preset NAME; Seq2SeqTransformer.from_architecture):"]
    lines += [f"  {name:<{width}}{summary}" for name, summary in presets.items()]
    return "\n".join(lines)


def main(argv=None, prog=PROG):
    """Runs the command; returns the exit status (0; 2 for an unknown argument)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = OneLineErrorParser(prog=prog, description=DESCRIPTION)
    parser.parse_args(argv)
    print(listing())
    return 0
