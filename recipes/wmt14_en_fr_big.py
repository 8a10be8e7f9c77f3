"""The paper's big model on WMT 2014 English-French (Table 2: 41.8 BLEU).

The `wmt14_en_fr_big` recipe, as `keras-transformer train --recipe wmt14_en_fr_big` runs it.
Its settings ship with the package: `CONFIG` in
keras_transformer/experiment/recipes/wmt14_en_fr_big.py, which says where each value comes
from; `--help` lists every flag with its value.

    python recipes/wmt14_en_fr_big.py --help
"""

import sys

from keras_transformer.experiment.recipes import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe("wmt14_en_fr_big"))
