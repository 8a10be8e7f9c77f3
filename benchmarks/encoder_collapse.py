"""Post-LN against pre-LN on Multi30k: does the encoder keep its positions apart?

Trains the Multi30k recipe's model (4+4 layers, d_model 128, dropout 0.3,
the recipe's optimizer, schedule and batches) for a few hundred updates,
once per layer-norm placement from the same seed, and prints after every
chunk of updates:

- the training loss and the valid perplexity (teacher-forced, no smoothing);
- how alike the encoder's outputs are across positions: the mean cosine
  similarity of every pair of positions, averaged over a few training
  sentences (1.0: every position carries the same vector);
- how peaked the encoder-decoder attention is, per decoder layer: the mean
  over heads and target positions of the largest weight times the source
  length (1.0: uniform over the source; larger: focused).

This is the measurement behind the Multi30k recipe's pre-LN (docs/results.md).

Usage:

    python benchmarks/encoder_collapse.py --data-dir ../shared/data/multi30k
"""

import argparse
import os
import time

import keras
import numpy as np

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, paper_optimizer
from keras_transformer.data import make_translation_dataset
from keras_transformer.evaluation import perplexity
from keras_transformer.experiment.recipes import MULTI30K
from keras_transformer.models import get_preset
from keras_transformer.text import ParallelCorpus, SubwordTokenizer, train_vocabulary

# Training sentences whose encoder outputs and attention are inspected.
PROBE_SENTENCES = 8


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="folder with train.* and valid.*")
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="de")
    parser.add_argument(
        "--vocabulary", default=None,
        help="a SentencePiece .model to reuse (e.g. a recipe run's vocabulary.model); "
        "default: train the recipe's 10,000-piece vocabulary",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=600, help="updates per variant")
    parser.add_argument("--chunks", type=int, default=6, help="measurements per variant")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def load_split(args, split):
    prefix = os.path.join(args.data_dir, split)
    return ParallelCorpus.from_files(f"{prefix}.{args.source}", f"{prefix}.{args.target}")


def tokenizer_for(args, corpus):
    if args.vocabulary:
        with open(args.vocabulary, "rb") as file:
            return SubwordTokenizer(proto=file.read())
    return train_vocabulary(corpus, vocabulary_size=MULTI30K.vocabulary_size, seed=args.seed)


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


def run_variant(args, normalize_first, tokenizer, train, valid, probes):
    keras.utils.set_random_seed(args.seed)
    overrides = {**MULTI30K.model_overrides, "normalize_first": normalize_first}
    config = get_preset(MULTI30K.preset).config(tokenizer.vocabulary_size(), **overrides)
    model = Seq2SeqTransformer(config)
    model.compile(
        optimizer=paper_optimizer(
            model.config.d_model,
            warmup_steps=MULTI30K.warmup_steps,
            scale=MULTI30K.learning_rate_scale,
        ),
        loss=LabelSmoothedCrossEntropy(label_smoothing=0.1),
    )
    name = "pre-LN" if normalize_first else "post-LN (paper)"
    chunk = args.steps // args.chunks
    start = time.time()
    for index in range(args.chunks):
        history = model.fit(
            train.dataset, steps_per_epoch=chunk, epochs=index + 1, initial_epoch=index, verbose=0
        )
        cosine, peaks = collapse_indicators(model, probes)
        peak_text = " ".join(f"{peak:5.2f}" for peak in peaks)
        print(
            f"{name:<16} {(index + 1) * chunk:>6} {history.history['loss'][-1]:>7.3f} "
            f"{perplexity(model, valid):>9.2f} {cosine:>8.3f}   {peak_text}",
            flush=True,
        )
    print(f"{name}: {time.time() - start:.0f} s", flush=True)


def main():
    args = parse_args()
    corpus = load_split(args, "train")
    tokenizer = tokenizer_for(args, corpus)
    train = make_translation_dataset(
        corpus, tokenizer, token_budget=MULTI30K.token_budget, seed=args.seed
    )
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
    print(f"{'variant':<16} {'update':>6} {'loss':>7} {'valid ppl':>9} {'enc cos':>8}   "
          "cross-attention peak per decoder layer")  # fmt: skip
    for normalize_first in (False, True):
        run_variant(args, normalize_first, tokenizer, train, valid, probes)


if __name__ == "__main__":
    main()
