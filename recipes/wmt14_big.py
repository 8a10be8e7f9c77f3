"""The paper's big model on WMT 2014 English-German (Table 2: 28.4 BLEU).

The `wmt14_big` recipe, as `keras-transformer train --recipe wmt14_big` runs it.
Its settings ship with the package: `CONFIG` in
keras_transformer/experiment/recipes/wmt14_big.py, which says where each value comes
from; `--help` lists every flag with its value.

    python recipes/wmt14_big.py --help
"""

import sys

from keras_transformer.experiment.recipes import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe("wmt14_big"))
