"""The recipes: named training settings that `keras-transformer train --recipe NAME` runs.

Each recipe is a module of this package holding its settings as `CONFIG`, an
`ExperimentConfig` (one config per concern: data, model, optimization, checkpoints,
validation, decoding); its docstring is its `--help` text. A recipe may also set
`LANGUAGE_PAIRS` (the (source, target) pairs it accepts), `REQUIRES_DATA` (True: it has
no built-in data, so `--data-dir` or `--tfds` is needed) and `main(argv, prog)` (its own
command line, as table3's `--variants`). The paper's runs change only what the paper
changes (docs/reproducing.md has the section every value comes from). The repository's
`recipes/NAME.py` scripts run the same settings: `python recipes/NAME.py` equals
`keras-transformer train --recipe NAME`.
"""

import functools
import importlib
import pkgutil

from keras_transformer.utils.backend_logs import quiet_backend_logs
from keras_transformer.utils.process_exit import skip_collection_at_exit


def recipe_names():
    """The names of the recipes, sorted.

    Returns:
        list of str.
    """
    return sorted(module.name for module in pkgutil.iter_modules(__path__))


def recipe_module(name):
    """The module of recipe `name`.

    Raises:
        ValueError: no such recipe.
    """
    if name not in recipe_names():
        raise ValueError(f"No recipe {name!r}: the recipes are {', '.join(recipe_names())}.")
    return importlib.import_module(f"{__name__}.{name}")


@functools.cache
def load_recipe(name):
    """The settings of recipe `name`: its `CONFIG`.

    Args:
        name: str, a recipe name ("quickstart", "wmt14_base", ...).

    Returns:
        An `ExperimentConfig` (frozen, so sharing one is safe).

    Raises:
        ValueError: no such recipe.
    """
    return recipe_module(name).CONFIG


def recipe_summary(name):
    """The first line of recipe `name`'s docstring."""
    return (recipe_module(name).__doc__ or "").strip().split("\n", 1)[0]


def run_recipe(name, argv=None, prog=None, add_arguments=None):
    """Parses `argv` over recipe `name`'s settings and runs it, as its script does.

    Like the commands, the process then exits without the interpreter's last garbage
    collection (`keras_transformer.utils.process_exit`).

    Args:
        name: str, a recipe name.
        argv: list of str, or None for `sys.argv[1:]`.
        prog: str or None, the command as typed, for usage and errors.
        add_arguments: callable adding flags to the parser (the `--recipe` of
            `keras-transformer train`, for its help), or None.

    Returns:
        int, the exit code (see `recipe_main`).
    """
    skip_collection_at_exit()
    quiet_backend_logs(argv)
    module = recipe_module(name)
    if hasattr(module, "main"):
        return module.main(argv, prog=prog, add_arguments=add_arguments)
    from keras_transformer.experiment.recipe_main import recipe_main

    return recipe_main(
        module.CONFIG,
        module.__doc__,
        argv=argv,
        language_pairs=getattr(module, "LANGUAGE_PAIRS", None),
        require_data=getattr(module, "REQUIRES_DATA", False),
        prog=prog,
        add_arguments=add_arguments,
    )
