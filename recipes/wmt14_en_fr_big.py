"""The paper's big model on WMT 2014 English-French (Table 2: 41.8 BLEU).

The big model with dropout 0.1 instead of 0.3 (paper 6.1), a shared 32,000-piece
vocabulary (the paper's word-pieces; SentencePiece's unigram model is used as the
closest available), 300,000 steps, the last 20 checkpoints averaged, beam 4, alpha 0.6.

    python recipes/wmt14_en_fr_big.py --data-dir data/wmt14_en_fr \\
        --test-split data/newstest2014/newstest2014
"""

import sys

from keras_transformer.experiment.recipe_main import recipe_main
from keras_transformer.experiment.recipes import WMT14_EN_FR_BIG

if __name__ == "__main__":
    sys.exit(
        recipe_main(WMT14_EN_FR_BIG, __doc__, language_pairs=[("en", "fr")], require_data=True)
    )
