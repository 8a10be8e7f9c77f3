"""A real small benchmark: Multi30k English-German (or English-French) on one machine.

The `multi30k` recipe, as `keras-transformer train --recipe multi30k` runs it.
Its settings ship with the package: `CONFIG` in
keras_transformer/experiment/recipes/multi30k.py, which says where each value comes
from; `--help` lists every flag with its value.

    python recipes/multi30k.py --help
"""

import sys

from keras_transformer.experiment.recipes import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe("multi30k"))
