"""A real small benchmark: Multi30k English-German (or English-French) on one machine.

29,000 image-caption pairs (Elliott et al., 2016). The paper's base model over-fits them;
this is the tiny Transformer of the strongest published text-only baselines: 4+4 layers,
d_model 128, d_ff 256, 4 heads, dropout 0.3, a 10,000-piece shared BPE vocabulary, 8,000
updates of about 4,096 tokens with the paper's optimizer and schedule (2,000 warmup steps,
peak rate 5e-3), beam 4 and alpha 0.6. Two departures from the paper, both measured in
docs/results.md: pre-LN sublayers (with the paper's post-LN this small encoder collapses
to one vector per sentence), and selection on valid: of the last 10 checkpoints (every 150
updates) and their average, the one with the lowest valid perplexity is kept. Reports valid
perplexity and BLEU, then test_2016_flickr with cased detokenized
sacreBLEU, chrF and the Multi30k literature's lowercased Moses-tokenized BLEU on the same
outputs.

    python recipes/multi30k.py --data-dir ../shared/data/multi30k
    python recipes/multi30k.py --data-dir ../shared/data/multi30k --target-language fr
"""

import sys

from keras_transformer.experiment.recipe_main import recipe_main
from keras_transformer.experiment.recipes import MULTI30K

if __name__ == "__main__":
    pairs = [("en", "de"), ("en", "fr")]
    sys.exit(recipe_main(MULTI30K, __doc__, language_pairs=pairs, require_data=True))
