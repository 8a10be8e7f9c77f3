"""The paper's big model on WMT 2014 English-German (Table 2: 28.4 BLEU).

As `wmt14_base.py` with the big model: d_model=1024, d_ff=4096, h=16, dropout 0.3,
300,000 steps, the last 20 checkpoints averaged (paper 5.2, 6.1, Table 3).

    keras-transformer train --recipe wmt14_big --data-dir data/wmt14   # as wmt14_base's
"""

from keras_transformer.experiment.recipes.wmt14_base import CONFIG as WMT14_BASE

# The base recipe with the big model (Table 3 "big"): 300k steps, 20 checkpoints averaged,
# dropout 0.3, all from the preset.
CONFIG = WMT14_BASE.replace(output_dir="runs/wmt14_big", model={"preset": "big"})

LANGUAGE_PAIRS = (("en", "de"),)
REQUIRES_DATA = True
