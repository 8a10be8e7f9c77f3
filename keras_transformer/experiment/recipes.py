"""The settings of each recipe, by name, for `recipes/*.py` and `keras-transformer train`.

Each is an `ExperimentConfig`; the paper's runs change only what the paper changes.
See docs/reproducing.md for the section every value comes from.
"""

from keras_transformer.experiment.experiment_config import ExperimentConfig

# Paper 5.1-5.4 and 6.1: base model, WMT14 en-de, tested on newstest2014.
WMT14_BASE = ExperimentConfig(
    output_dir="runs/wmt14_base",
    source_language="en",
    target_language="de",
    test_split="newstest2014",
    vocabulary_size=37000,
    vocabulary_type="bpe",
    preset="base",
    token_budget=25000,
    warmup_steps=4000,
    checkpoint_every_minutes=10.0,
    metrics=("bleu", "chrf", "tokenized_bleu"),
)

# The big model (Table 3 "big"): 300k steps, 20 checkpoints averaged, dropout 0.3.
WMT14_BIG = WMT14_BASE.replace(output_dir="runs/wmt14_big", preset="big")

# En-fr big: dropout 0.1 (6.1) and a 32k shared vocabulary of word-pieces (5.1), for
# which SentencePiece's unigram model is the closest available.
WMT14_EN_FR_BIG = WMT14_BASE.replace(
    output_dir="runs/wmt14_en_fr_big",
    target_language="fr",
    vocabulary_size=32000,
    vocabulary_type="unigram",
    preset="big",
    model_overrides={"dropout": 0.1},
)

# The README's first command: the generated corpus and a small model, minutes on a CPU.
QUICKSTART = ExperimentConfig(
    output_dir="runs/quickstart",
    data_dir=None,
    synthetic_sizes=(20000, 500, 500),
    vocabulary_size=1000,
    preset="base",
    # No dropout (paper: 0.1): the generated corpus has no noise to overfit in 800 steps,
    # and without it the model learns the task in fewer of them.
    model_overrides={
        "num_layers": 2,
        "d_model": 128,
        "num_heads": 4,
        "intermediate_dim": 512,
        "dropout": 0.0,
    },
    token_budget=4096,
    # 8 passes over the 20,000 pairs, about 5 minutes on 2 CPU cores without AVX-512;
    # BLEU 96-98 on the 500 test sentences (docs/results.md).
    train_steps=800,
    # The paper's schedule with a warmup scaled to the short run (paper: 4,000 of 100,000).
    warmup_steps=400,
    checkpoint_every_minutes=None,
    checkpoint_every_steps=50,
    average_last=5,
    # Validation (greedy BLEU on 200 valid sentences) every 250 steps, not at each checkpoint.
    validate_every_steps=250,
    metrics=("bleu", "chrf"),
)

RECIPES = {
    "quickstart": QUICKSTART,
    "wmt14_base": WMT14_BASE,
    "wmt14_big": WMT14_BIG,
    "wmt14_en_fr_big": WMT14_EN_FR_BIG,
}

# Multi30k (Elliott et al., 2016): 29k captions. The paper's base model over-fits 29k pairs;
# this is the "tiny" Transformer of the strongest published text-only baselines (Wu et al.,
# 2021: 4+4 layers, d_model 128, d_ff 256, 4 heads, dropout 0.3, all embeddings shared,
# ~8k updates of 4,096 tokens, inverse-square-root rate peaking at 5e-3 after 2,000 steps,
# last 10 checkpoints averaged). Beam 4 and alpha 0.6 stay the paper's. Scored on
# test_2016_flickr with sacreBLEU, chrF and the literature's lowercased tokenized BLEU, with
# perplexity and BLEU on valid.
MULTI30K = ExperimentConfig(
    output_dir="runs/multi30k",
    source_language="en",
    target_language="de",
    valid_split="valid",
    test_split="test_2016_flickr",
    vocabulary_size=10000,
    preset="base",
    model_overrides={
        "num_layers": 4,
        "d_model": 128,
        "num_heads": 4,
        "intermediate_dim": 256,
        "dropout": 0.3,
        # Pre-LN: with the paper's post-LN this small model's encoder collapses
        # (every position's output the same vector, uniform encoder-decoder
        # attention) within 100 updates; docs/results.md has the measurements.
        "normalize_first": True,
    },
    token_budget=4096,
    train_steps=8000,
    warmup_steps=2000,
    # Eq. 3 peaks at d_model^-0.5 * warmup^-0.5 = 1.98e-3 here; x2.53 gives the 5e-3 peak.
    learning_rate_scale=2.53,
    checkpoint_every_minutes=None,
    checkpoint_every_steps=150,
    average_last=10,
    metrics=("bleu", "chrf", "multi30k_bleu"),
    evaluate_valid=True,
    select_on_valid=True,
)

# Table 3: every variant trained on the same data and budget; dev perplexity and BLEU.
TABLE3 = WMT14_BASE.replace(
    output_dir="runs/table3",
    valid_split="newstest2013",
    evaluate_valid=True,
    export=False,
)

RECIPES["multi30k"] = MULTI30K
RECIPES["table3"] = TABLE3
