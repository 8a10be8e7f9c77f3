"""The whole pipeline in minutes on a laptop CPU, on a corpus the package generates itself.

Writes a synthetic English-German corpus (reordering, compounding, agreement, numbers
and dates in words), trains a shared subword vocabulary, trains a small Transformer
with the paper's optimizer, schedule and label smoothing, averages its last
checkpoints, translates the held-out test set with beam search, reports BLEU and
exports a SavedModel for TF Serving. `--data-dir` points the same script at real
line-aligned files instead.

    python recipes/quickstart.py                       # built-in generated corpus
    python recipes/quickstart.py --data-dir ../shared/data/multi30k --max-steps 3000
"""

import sys

from keras_transformer.experiment.recipe_main import recipe_main
from keras_transformer.experiment.recipes import QUICKSTART

if __name__ == "__main__":
    sys.exit(recipe_main(QUICKSTART, __doc__))
