"""The paper's base model on WMT 2014 English-German (Table 2: 27.3 BLEU).

The `wmt14_base` recipe, as `keras-transformer train --recipe wmt14_base` runs it.
Its settings ship with the package: `CONFIG` in
keras_transformer/experiment/recipes/wmt14_base.py, which says where each value comes
from; `--help` lists every flag with its value.

    python recipes/wmt14_base.py --help
"""

import sys

from keras_transformer.experiment.recipes import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe("wmt14_base"))
