"""A real small benchmark: Multi30k English-German (or English-French) on one machine.

29,000 image-caption pairs (Elliott et al., 2016). The paper's base model over-fits them;
this is the tiny Transformer of the strongest published text-only baselines: 4+4 layers,
d_model 128, d_ff 256, 4 heads, dropout 0.3, a 10,000-piece shared BPE vocabulary, 8,000
updates of about 4,096 tokens with the paper's optimizer and schedule (2,000 warmup steps,
peak rate 5e-3), the paper's post-LN sublayers, beam 4 and alpha 0.6. W^Q, W^K and W^V start
as fairseq draws them, one (d, 3d) Xavier-uniform matrix (the paper gives no initialization;
with Keras' per-projection one this small post-LN encoder collapses to one vector per
sentence, docs/results.md). One departure from the paper: selection on valid. Of the last
10 checkpoints (every 150 updates) and their average, the one with the lowest valid
perplexity is kept. Reports valid perplexity and BLEU, then test_2016_flickr with cased
detokenized sacreBLEU, chrF and the Multi30k literature's lowercased Moses-tokenized BLEU on
the same outputs.

    keras-transformer train --recipe multi30k --data-dir data/multi30k
    keras-transformer train --recipe multi30k --data-dir data/multi30k \\
        --target-language fr

data/multi30k holds train, valid and test_2016_flickr .en and .de (and .fr): Multi30k
task 1, from the multi30k/dataset repository on GitHub with `val` renamed `valid`
(docs/own-data.md, "Where to get the data", has the commands).

With the published baseline's batch of 8,192 tokens and its optimizer settings, for 2.5 times
the training tokens, the same model reaches 40.56 cased sacreBLEU on test_2016_flickr en-de
(docs/results.md, "With the published baseline's batch and optimizer settings", has the flags).
`--vocabulary-lowercase` trains on lowercased text, as that baseline did, for the literature's
lowercased comparison only.
"""

from keras_transformer.experiment.settings.checkpoint_config import CheckpointConfig
from keras_transformer.experiment.settings.data_config import DataConfig
from keras_transformer.experiment.settings.experiment_config import ExperimentConfig
from keras_transformer.experiment.settings.model_settings import ModelSettings
from keras_transformer.experiment.settings.optimization_config import OptimizationConfig
from keras_transformer.experiment.settings.validation_config import ValidationConfig

# The "tiny" Transformer of the strongest published text-only baselines (Wu et al., 2021):
# 4+4 layers, d_model 128, d_ff 256, 4 heads, dropout 0.3, all embeddings shared, ~8k
# updates of 4,096 tokens, inverse-square-root rate peaking at 5e-3 after 2,000 steps, last
# 10 checkpoints averaged. Beam 4 and alpha 0.6 stay the paper's (the default decoding).
CONFIG = ExperimentConfig(
    output_dir="runs/multi30k",
    data=DataConfig(
        source_language="en",
        target_language="de",
        valid_split="valid",
        test_split="test_2016_flickr",
        vocabulary_size=10000,
        token_budget=4096,
    ),
    model=ModelSettings(
        preset="base",
        model_overrides={
            "num_layers": 4,
            "d_model": 128,
            "num_heads": 4,
            "intermediate_dim": 256,
            "dropout": 0.3,
            # fairseq's q/k/v initialization: with Keras' (each projection its own Xavier
            # matrix, twice the variance) this post-LN encoder collapses (every position's
            # output the same vector, uniform encoder-decoder attention) within 100
            # updates; docs/results.md has the measurements. Pre-LN
            # (`normalize_first=True`) trains as well with either.
            "attention_initializer": "xavier_fused_qkv",
        },
    ),
    optimization=OptimizationConfig(
        train_steps=8000,
        warmup_steps=2000,
        # Eq. 3 peaks at d_model^-0.5 * warmup^-0.5 = 1.98e-3 here; x2.53 gives the 5e-3 peak.
        learning_rate_scale=2.53,
    ),
    checkpoint=CheckpointConfig(
        checkpoint_every_minutes=None, checkpoint_every_steps=150, average_last=10
    ),
    validation=ValidationConfig(
        metrics=("bleu", "chrf", "multi30k_bleu"), evaluate_valid=True, select_on_valid=True
    ),
)

# The pairs the recipe"s data has: Multi30k"s English-German and English-French.
LANGUAGE_PAIRS = (("en", "de"), ("en", "fr"))
REQUIRES_DATA = True
