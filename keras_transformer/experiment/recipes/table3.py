"""Paper Table 3: the base model's variations trained alike, compared on dev.

Trains each row (base, A1-A4, B1-B2, C1-C8, D1-D4, E) on the same corpus with the same
step budget, then prints the paper's columns: the row's settings, parameters (ours
and the paper's), dev perplexity per subword and dev BLEU. The paper trained every
row 100k steps on WMT14 en-de and used newstest2013 as dev.

    keras-transformer train --recipe table3 --data-dir data/wmt14 --valid-split ... \\
        --max-steps 100000
    keras-transformer train --recipe table3 --data-dir data/multi30k \\
        --valid-split valid --test-split test_2016_flickr --vocabulary-size 8000 \\
        --max-steps 2000 --variants base table3-A1 table3-B1
"""

from keras_transformer.experiment.recipes.wmt14_base import CONFIG as WMT14_BASE

# Every variant trained on the base recipe's data and budget; dev perplexity and BLEU.
CONFIG = WMT14_BASE.replace(
    output_dir="runs/table3",
    data={"valid_split": "newstest2013"},
    validation={"evaluate_valid": True},
    export=False,
)


def main(argv=None, prog=None, add_arguments=None):
    """Trains the `--variants` (default: every row) and prints the table; the exit code."""
    from keras_transformer.experiment.table3_comparison import table3_main

    return table3_main(CONFIG, __doc__, argv, prog=prog, add_arguments=add_arguments)
