"""Paper Table 3: the base model's variations trained alike, compared on dev.

The `table3` recipe, as `keras-transformer train --recipe table3` runs it.
Its settings ship with the package: `CONFIG` in
keras_transformer/experiment/recipes/table3.py, which says where each value comes
from; `--help` lists every flag with its value.

    python recipes/table3.py --help
"""

import sys

from keras_transformer.experiment.recipes import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe("table3"))
