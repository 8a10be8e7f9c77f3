"""The recipes of the checkout's `recipes/` folder, by name, for `keras-transformer train`.

Each `recipes/NAME.py` holds its settings as `CONFIG`, an `ExperimentConfig`; the paper's
runs change only what the paper changes (docs/reproducing.md has the section every value
comes from).
"""

import functools
import glob
import importlib.util
import os

# The repository's recipes/ folder, beside the package (an editable install's checkout).
RECIPES_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "recipes"
)


def recipe_names():
    """The names of the recipes (`recipes/NAME.py`), sorted.

    Returns:
        list of str.
    """
    paths = glob.glob(os.path.join(RECIPES_DIR, "*.py"))
    return sorted(os.path.basename(path).removesuffix(".py") for path in paths)


@functools.cache
def load_recipe(name):
    """The settings of `recipes/NAME.py`: its `CONFIG`.

    Args:
        name: str, a recipe name ("quickstart", "wmt14_base", ...).

    Returns:
        An `ExperimentConfig` (frozen, so sharing one is safe).

    Raises:
        ValueError: no such recipe.
    """
    path = os.path.join(RECIPES_DIR, f"{name}.py")
    if not os.path.isfile(path):
        raise ValueError(
            f"No recipe {name!r}: {path} does not exist. The recipes are the files of the "
            f"source checkout's recipes/ folder: {', '.join(recipe_names()) or 'none found'}."
        )
    spec = importlib.util.spec_from_file_location(f"keras_transformer_recipe_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CONFIG
