"""Paper Table 3: the base model's variations trained alike, compared on dev.

Trains each row (base, A1-A4, B1-B2, C1-C8, D1-D4, E) on the same corpus with the same
step budget, then prints the paper's columns: the row's settings, parameters (ours
and the paper's), dev perplexity per subword and dev BLEU. The paper trained every
row 100k steps on WMT14 en-de and used newstest2013 as dev.

    python recipes/table3.py --data-dir data/wmt14 --valid-split ... --max-steps 100000
    python recipes/table3.py --data-dir ../shared/data/multi30k --valid-split valid \\
        --test-split test_2016_flickr --vocabulary-size 8000 --max-steps 2000 \\
        --variants base table3-A1 table3-B1
"""

import sys

from keras_transformer.experiment.recipes import load_recipe
from keras_transformer.experiment.table3 import table3_main

# Every variant trained on the base recipe's data and budget; dev perplexity and BLEU.
CONFIG = load_recipe("wmt14_base").replace(
    output_dir="runs/table3",
    valid_split="newstest2013",
    evaluate_valid=True,
    export=False,
)

if __name__ == "__main__":
    sys.exit(table3_main(CONFIG, __doc__))
