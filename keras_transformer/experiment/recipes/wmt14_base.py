"""The paper's base model on WMT 2014 English-German (Table 2: 27.3 BLEU).

Every setting is the paper's (see docs/reproducing.md for the section of each):
37k shared BPE vocabulary, N=6, d_model=512, d_ff=2048, h=8, dropout 0.1, label
smoothing 0.1, batches of about 25,000 source + 25,000 target tokens, Adam
(0.9, 0.98, 1e-9) with 4,000 warmup steps, 100,000 steps, a checkpoint every 10
minutes, the last 5 averaged, beam 4, alpha 0.6, outputs up to input + 50. Tested on
newstest2014 with sacreBLEU and the paper's tokenized BLEU; exported at the end.

The paper trained on 8 GPUs. On one device, `--accumulation-steps 8` gives the same
batch per update; `--distribution mirrored` uses all local GPUs (the token budget is
per device); `--distribution multi_worker` with TF_CONFIG spans machines.

    keras-transformer train --recipe wmt14_base --data-dir data/wmt14
    keras-transformer train --recipe wmt14_base --tfds wmt14_translate/de-en \\
        --test-split data/wmt14/newstest2014

data/wmt14 holds train.{en,de} (the WMT14 training corpus, about 4.5M pairs), valid
(newstest2013) and newstest2014; docs/own-data.md, "Where to get the data", has the steps.
"""

from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.experiment.settings.checkpoint_config import CheckpointConfig
from keras_transformer.experiment.settings.data_config import DataConfig
from keras_transformer.experiment.settings.experiment_config import ExperimentConfig
from keras_transformer.experiment.settings.model_settings import ModelSettings
from keras_transformer.experiment.settings.optimization_config import OptimizationConfig
from keras_transformer.experiment.settings.validation_config import ValidationConfig

# Paper 5.1-5.4 and 6.1: base model, WMT14 en-de, tested on newstest2014.
CONFIG = ExperimentConfig(
    output_dir="runs/wmt14_base",
    data=DataConfig(
        source_language="en",
        target_language="de",
        test_split="newstest2014",
        vocabulary_size=37000,
        vocabulary_type="bpe",
        token_budget=25000,
    ),
    model=ModelSettings(preset="base"),
    optimization=OptimizationConfig(warmup_steps=4000),
    checkpoint=CheckpointConfig(checkpoint_every_minutes=10.0),
    validation=ValidationConfig(metrics=("bleu", "chrf", "tokenized_bleu")),
    decoding=DecodingConfig(beam_size=4, alpha=0.6, max_extra_length=50),
)

LANGUAGE_PAIRS = (("en", "de"),)
REQUIRES_DATA = True
