"""The paper's big model on WMT 2014 English-French (Table 2: 41.8 BLEU).

The big model with dropout 0.1 instead of 0.3 (paper 6.1), a shared 32,000-piece
vocabulary (the paper's word-pieces; SentencePiece's unigram model is used as the
closest available), 300,000 steps, the last 20 checkpoints averaged, beam 4, alpha 0.6.

    keras-transformer train --recipe wmt14_en_fr_big --data-dir data/wmt14_en_fr

data/wmt14_en_fr holds train, valid and newstest2014 .en and .fr (about 36M training pairs);
docs/own-data.md, "Where to get the data", has the steps.
"""

from keras_transformer.experiment.recipes.wmt14_base import CONFIG as WMT14_BASE

# The base recipe with the big model, dropout 0.1 (6.1) and a 32k shared vocabulary of
# word-pieces (5.1), for which SentencePiece's unigram model is the closest available.
CONFIG = WMT14_BASE.replace(
    output_dir="runs/wmt14_en_fr_big",
    data={"target_language": "fr", "vocabulary_size": 32000, "vocabulary_type": "unigram"},
    model={"preset": "big", "model_overrides": {"dropout": 0.1}},
)

LANGUAGE_PAIRS = (("en", "fr"),)
REQUIRES_DATA = True
