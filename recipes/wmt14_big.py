"""The paper's big model on WMT 2014 English-German (Table 2: 28.4 BLEU).

As `wmt14_base.py` with the big model: d_model=1024, d_ff=4096, h=16, dropout 0.3,
300,000 steps, the last 20 checkpoints averaged (paper 5.2, 6.1, Table 3).

    python recipes/wmt14_big.py --data-dir data/wmt14 \\
        --test-split data/newstest2014/newstest2014
"""

import sys

from keras_transformer.experiment.recipe_main import recipe_main
from keras_transformer.experiment.recipes import WMT14_BIG

if __name__ == "__main__":
    sys.exit(recipe_main(WMT14_BIG, __doc__, language_pairs=[("en", "de")], require_data=True))
