"""The whole pipeline in minutes on a laptop CPU, on a corpus the package generates itself.

The `quickstart` recipe, as `keras-transformer train --recipe quickstart` runs it.
Its settings ship with the package: `CONFIG` in
keras_transformer/experiment/recipes/quickstart.py, which says where each value comes
from; `--help` lists every flag with its value.

    python recipes/quickstart.py --help
"""

import sys

from keras_transformer.experiment.recipes import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe("quickstart"))
