"""Post-LN on Multi30k: which setting keeps the encoder's positions apart?

Trains the Multi30k recipe's model (4+4 layers, d_model 128, dropout 0.3,
the recipe's optimizer, schedule and batches) for a few hundred updates,
once per variant from the same seed, and prints after every chunk of updates:

- the training loss and the valid perplexity (teacher-forced, no smoothing);
- how alike the encoder's outputs are across positions (also before the
  first update): the mean cosine similarity of every pair of positions,
  averaged over a few training sentences (1.0: every position carries the
  same vector);
- how peaked the encoder-decoder attention is, per decoder layer: the mean
  over heads and target positions of the largest weight times the source
  length (1.0: uniform over the source; larger: focused).

Variants (`--variants`, default the two baselines): "post-ln" (the paper's,
the package's defaults), "pre-ln", one fairseq setting switched on over
post-ln ("batch-8192": fairseq's 2 GPUs x 4,096 tokens; "clip-norm-25";
"adam-eps-1e-8"; "warmup-init-1e-7"; "attention-bias"; "fused-qkv-init":
Xavier over a fused (d, 3d) q/k/v matrix), "fairseq" (all of them, post-LN)
and "fairseq-without-X" (all but X). A summary table closes the run.

This is the measurement behind the Multi30k recipe's settings (docs/results.md).

Usage:

    python benchmarks/encoder_collapse.py --data-dir data/multi30k \
        --vocabulary /tmp/multi30k_vocabulary.model --variants post-ln pre-ln fairseq
"""

import argparse
import os
import time

import keras
import numpy as np

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, paper_optimizer
from keras_transformer.data import make_translation_dataset
from keras_transformer.evaluation import perplexity
from keras_transformer.experiment.recipes import load_recipe
from keras_transformer.models import get_preset
from keras_transformer.text import ParallelCorpus, SubwordTokenizer, train_vocabulary

MULTI30K = load_recipe("multi30k")
# Every variant starts from the recipe's model with Keras' attention initialization, the
# package's default: `fused-qkv-init` is fairseq's, which the recipe now uses.
BASE_OVERRIDES = {**MULTI30K.model.model_overrides, "attention_initializer": "glorot_uniform"}

# Training sentences whose encoder outputs and attention are inspected.
PROBE_SENTENCES = 8

# fairseq's settings of the published Multi30k baseline, each as a change to the recipe's:
# (model overrides, optimizer arguments, token budget per update).
FAIRSEQ_SETTINGS = {
    "batch-8192": ({}, {}, 8192),
    "clip-norm-25": ({}, {"global_clipnorm": 25.0}, None),
    "adam-eps-1e-8": ({}, {"epsilon": 1e-8}, None),
    "warmup-init-1e-7": ({}, {"initial_rate": 1e-7}, None),
    "attention-bias": ({"attention_bias": True}, {}, None),
    "fused-qkv-init": ({"attention_initializer": "xavier_fused_qkv"}, {}, None),
}


def variant_settings(name):
    """(normalize_first, model overrides, optimizer arguments, token budget) of a variant."""
    if name in ("post-ln", "pre-ln"):
        return name == "pre-ln", {}, {}, None
    if name in FAIRSEQ_SETTINGS:
        return (False, *FAIRSEQ_SETTINGS[name])
    left_out = name.removeprefix("fairseq-without-") if name != "fairseq" else None
    if name == "fairseq" or left_out in FAIRSEQ_SETTINGS:
        model, optimizer, budget = {}, {}, None
        for setting, (more_model, more_optimizer, more_budget) in FAIRSEQ_SETTINGS.items():
            if setting != left_out:
                model, optimizer = {**model, **more_model}, {**optimizer, **more_optimizer}
                budget = more_budget or budget
        return False, model, optimizer, budget
    raise argparse.ArgumentTypeError(
        f"unknown variant {name!r}; expected post-ln, pre-ln, {', '.join(FAIRSEQ_SETTINGS)}, "
        f"fairseq or fairseq-without-X with X one of {', '.join(FAIRSEQ_SETTINGS)}"
    )


def variant_name(name):
    variant_settings(name)  # a clear argparse error for an unknown name
    return name


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="folder with train.* and valid.*")
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="de")
    parser.add_argument(
        "--vocabulary", default=None,
        help="a SentencePiece .model to reuse (e.g. a recipe run's vocabulary.model); if the "
        "file does not exist, the recipe's 10,000-piece vocabulary is trained and saved there; "
        "default: train it and keep it in memory",
    )  # fmt: skip
    parser.add_argument(
        "--variants", nargs="+", type=variant_name, default=["post-ln", "pre-ln"],
        help="variants to train, in order (see the module docstring)",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=600, help="updates per variant")
    parser.add_argument("--chunks", type=int, default=6, help="measurements per variant")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def load_split(args, split):
    prefix = os.path.join(args.data_dir, split)
    return ParallelCorpus.from_files(f"{prefix}.{args.source}", f"{prefix}.{args.target}")


def tokenizer_for(args, corpus):
    if args.vocabulary and os.path.exists(args.vocabulary):
        with open(args.vocabulary, "rb") as file:
            return SubwordTokenizer(proto=file.read())
    tokenizer = train_vocabulary(
        corpus, vocabulary_size=MULTI30K.data.vocabulary_size, seed=args.seed
    )
    if args.vocabulary:
        tokenizer.save_to_file(args.vocabulary)
    return tokenizer


def pairwise_cosine(vectors):
    """Mean cosine similarity over distinct pairs of rows of (length, d_model)."""
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    cosines = unit @ unit.T  # (length, length)
    length = len(unit)
    return (cosines.sum() - length) / (length * (length - 1))


def collapse_indicators(model, probes):
    """(mean pairwise cosine of encoder outputs, per-layer cross-attention peak)."""
    cosines, peaks = [], []
    for source, target in probes:
        inputs = {"encoder_token_ids": source[None], "decoder_token_ids": target[None]}
        weights = model.attention_weights(inputs)["decoder_cross_attention"]
        # (batch, heads, target, source) -> largest weight per row, times the source length.
        peaks.append([float(np.asarray(w)[0].max(-1).mean()) * len(source) for w in weights])
        encoded = keras.ops.convert_to_numpy(model.encode(source[None]))[0]
        cosines.append(pairwise_cosine(encoded))
    return float(np.mean(cosines)), np.mean(peaks, axis=0)


def run_variant(args, name, tokenizer, train_for, valid, probes):
    """Trains variant `name`; returns its (update, encoder cosine, valid perplexity) rows."""
    normalize_first, model_changes, optimizer_changes, budget = variant_settings(name)
    train = train_for(budget or MULTI30K.data.token_budget)
    keras.utils.set_random_seed(args.seed)
    overrides = {**BASE_OVERRIDES, **model_changes, "normalize_first": normalize_first}
    config = get_preset(MULTI30K.model.preset).config(tokenizer.vocabulary_size(), **overrides)
    model = Seq2SeqTransformer(config)
    model.compile(
        optimizer=paper_optimizer(
            model.config.d_model,
            warmup_steps=MULTI30K.optimization.warmup_steps,
            scale=MULTI30K.optimization.learning_rate_scale,
            **optimizer_changes,
        ),
        loss=LabelSmoothedCrossEntropy(label_smoothing=0.1),
    )
    chunk = args.steps // args.chunks
    start = time.time()
    rows = []

    def measure(epoch, logs):
        cosine, peaks = collapse_indicators(model, probes)
        valid_perplexity = perplexity(model, valid)
        rows.append(((epoch + 1) * chunk, cosine, valid_perplexity))
        peak_text = " ".join(f"{peak:5.2f}" for peak in peaks)
        print(
            f"{name:<28} {(epoch + 1) * chunk:>6} {logs['loss']:>7.3f} "
            f"{valid_perplexity:>9.2f} {cosine:>8.3f}   {peak_text}",
            flush=True,
        )

    cosine, peaks = collapse_indicators(model, probes)
    rows.append((0, cosine, None))
    peak_text = " ".join(f"{peak:5.2f}" for peak in peaks)
    print(f"{name:<28} {0:>6} {'':>7} {'':>9} {cosine:>8.3f}   {peak_text}", flush=True)

    # One `fit`, so the batches run on through the data (a new `fit` restarts the dataset).
    model.fit(
        train.dataset,
        steps_per_epoch=chunk,
        epochs=args.chunks,
        callbacks=[keras.callbacks.LambdaCallback(on_epoch_end=measure)],
        verbose=0,
    )
    print(f"{name}: {time.time() - start:.0f} s", flush=True)
    return rows


def main():
    args = parse_args()
    corpus = load_split(args, "train")
    tokenizer = tokenizer_for(args, corpus)
    datasets = {}

    def train_for(token_budget):
        if token_budget not in datasets:
            datasets[token_budget] = make_translation_dataset(
                corpus, tokenizer, token_budget=token_budget, seed=args.seed
            )
        return datasets[token_budget]

    valid = make_translation_dataset(
        load_split(args, "valid"), tokenizer, token_budget=4096, shuffle=False, repeat=False
    ).dataset.cache()
    eos, bos = tokenizer.eos_id, tokenizer.bos_id
    probes = [
        (
            np.asarray([*np.asarray(tokenizer.tokenize(source)), eos], "int32"),
            np.asarray([bos, *np.asarray(tokenizer.tokenize(target))], "int32"),
        )
        for source, target in zip(
            corpus.sources[:PROBE_SENTENCES], corpus.targets[:PROBE_SENTENCES], strict=True
        )
    ]
    print(f"backend: {keras.backend.backend()}; {args.steps} updates per variant")
    print(f"{'variant':<28} {'update':>6} {'loss':>7} {'valid ppl':>9} {'enc cos':>8}   "
          "cross-attention peak per decoder layer")  # fmt: skip
    results = {
        name: run_variant(args, name, tokenizer, train_for, valid, probes) for name in args.variants
    }
    chunk = args.steps // args.chunks
    print(f"\n| variant | encoder cosine at init | at {chunk} updates | at {args.steps} updates "
          f"| valid perplexity at {args.steps} |\n|---|---|---|---|---|")  # fmt: skip
    for name, rows in results.items():
        print(
            f"| {name} | {rows[0][1]:.3f} | {rows[1][1]:.3f} | {rows[-1][1]:.3f} "
            f"| {rows[-1][2]:.1f} |"
        )


if __name__ == "__main__":
    main()
