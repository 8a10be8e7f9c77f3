"""Padding efficiency and throughput of the token-budget pipeline on Multi30k.

Compares, on the Multi30k training set:

- the bucketed pipeline (`make_translation_dataset`) at several token
  budgets and bucket growth ratios: real tokens / padded tokens per side,
  measured on the batches it yields (all-padding rows included);
- fixed-size random batches of the same mean number of pairs, padded to
  their longest sequence (the usual `padded_batch`: one shape per distinct
  length pair) or to `max_length` (one shape);
- pipeline throughput in pairs/s, with tf.data's default thread pool and
  with a single thread;
- optionally, training throughput of a small Transformer on the CPU fed by
  the live pipeline versus fed by cached batches: if both match, the
  pipeline is not the bottleneck.

Usage:

    python benchmarks/pipeline_padding.py --data-dir data/multi30k
"""

import argparse
import os
import resource
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, TransformerConfig
from keras_transformer.data import PipelineConfig, TokenizedCorpus, make_translation_dataset
from keras_transformer.text import ParallelCorpus, clean_parallel_corpus, train_vocabulary


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="folder with train.en and train.de")
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="de")
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--budgets", type=int, nargs="+", default=[4096, 25000])
    parser.add_argument("--growths", type=float, nargs="+", default=[1.05, 1.1])
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=5, help="epochs timed for throughput")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--train-steps", type=int, default=0,
        help="if > 0, also time this many training steps of a small model (budget: first)",
    )  # fmt: skip
    return parser.parse_args()


def measure_batches(dataset, steps):
    """Real and padded tokens per side, and distinct shapes, over `steps` batches."""
    source_real = target_real = padded = 0
    shapes = set()
    for inputs, labels in dataset.take(steps):
        encoder = inputs["encoder_token_ids"].numpy()
        labels = labels.numpy()
        source_real += int((encoder != 0).sum())
        target_real += int((labels != 0).sum())
        padded += labels.size
        shapes.add(labels.shape)
    return source_real / padded, target_real / padded, len(shapes)


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def throughput(dataset, pairs_per_epoch, steps_per_epoch, epochs, threads=None):
    if threads:
        options = tf.data.Options()
        options.threading.private_threadpool_size = threads
        dataset = dataset.with_options(options)
    iterator = iter(dataset)
    next(iterator)  # builds the pipeline
    start, start_cpu = time.perf_counter(), cpu_seconds()
    for _ in range(epochs * steps_per_epoch):
        next(iterator)
    elapsed, cpu = time.perf_counter() - start, cpu_seconds() - start_cpu
    pairs = epochs * pairs_per_epoch
    return pairs / elapsed, pairs / cpu


def random_batches(source_lengths, target_lengths, batch_size, max_length, seed):
    """Efficiency of fixed-size random batches padded to their longest member or max_length."""
    order = np.random.default_rng(seed).permutation(len(source_lengths))
    source_padded = target_padded = fixed = 0
    shapes = set()
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        source_longest = int(source_lengths[rows].max())
        target_longest = int(target_lengths[rows].max())
        source_padded += batch_size * source_longest  # a final partial batch counted full
        target_padded += batch_size * target_longest
        fixed += batch_size * max_length
        shapes.add((source_longest, target_longest))
    real_source, real_target = source_lengths.sum(), target_lengths.sum()
    return {
        "dynamic": (real_source / source_padded, real_target / target_padded, len(shapes)),
        "max_length": (real_source / fixed, real_target / fixed, 1),
    }


class EpochTimer(keras.callbacks.Callback):
    """Records the wall time of every epoch."""

    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.start)


def training_throughput(train, vocabulary_size, steps):
    """Pairs/s of a small model fed by the live pipeline and by cached batches.

    Every shape is compiled in a warm-up epoch first; each feed then runs two
    epochs and only the second is timed, so neither tracing nor XLA
    compilation is counted. Both feeds see the same bucket mix per epoch.
    """
    # The Multi30k-sized model of the field notes: 4+4 layers, d_model 128.
    config = TransformerConfig(vocabulary_size=vocabulary_size, num_layers=4, d_model=128,
                               num_heads=4, intermediate_dim=256, dropout=0.3)  # fmt: skip
    model = Seq2SeqTransformer(config)
    model.compile(optimizer=keras.optimizers.Adam(5e-4), loss=LabelSmoothedCrossEntropy())
    cached = train.dataset.take(steps).cache().repeat()
    pairs_per_step = train.summary.kept / train.steps_per_epoch
    model.fit(cached, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)  # warm-up
    rates = {}
    for name, dataset in (("live pipeline", train.dataset), ("cached batches", cached)):
        timer = EpochTimer()
        model.fit(dataset, steps_per_epoch=steps, epochs=2, verbose=0, shuffle=False,
                  callbacks=[timer])  # fmt: skip
        rates[name] = steps * pairs_per_step / timer.seconds[-1]
    return rates


def main():
    args = parse_args()
    directory = os.path.expanduser(args.data_dir)
    corpus = ParallelCorpus.from_files(
        os.path.join(directory, f"train.{args.source}"),
        os.path.join(directory, f"train.{args.target}"),
    )
    corpus, cleaning = clean_parallel_corpus(corpus)
    print(cleaning)
    print(f"cpus: {os.cpu_count()}, tensorflow {tf.__version__}")

    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        tokenizer = train_vocabulary(
            corpus, args.vocabulary_size, seed=args.seed,
            output_path=os.path.join(scratch, "vocabulary.model"),
        )  # fmt: skip
        print(f"vocabulary: {args.vocabulary_size} BPE pieces in "
              f"{time.perf_counter() - start:.1f} s")  # fmt: skip
    start = time.perf_counter()
    tokenized = TokenizedCorpus.from_corpus(corpus, tokenizer)
    elapsed = time.perf_counter() - start
    print(f"tokenized {len(tokenized)} pairs in {elapsed:.2f} s "
          f"({len(tokenized) / elapsed:,.0f} pairs/s)")  # fmt: skip

    rows = []
    first = None
    for budget in args.budgets:
        for growth in args.growths:
            config = PipelineConfig(token_budget=budget, bucket_growth=growth,
                                    max_length=args.max_length, seed=args.seed)  # fmt: skip
            train = make_translation_dataset(tokenized, config=config)
            first = first or train
            summary = train.summary
            source_eff, target_eff, shapes = measure_batches(train.dataset, train.steps_per_epoch)
            assert abs(source_eff - summary.source_efficiency) < 1e-9, "summary disagrees"
            rate, rate_per_cpu = throughput(
                train.dataset, summary.kept, train.steps_per_epoch, args.epochs
            )
            rate_one, _ = throughput(
                train.dataset, summary.kept, train.steps_per_epoch, args.epochs, threads=1
            )
            mean_batch = summary.kept / train.steps_per_epoch
            source_lengths = tokenized.source_lengths + 1
            target_lengths = tokenized.target_lengths + 1
            keep = np.maximum(source_lengths, target_lengths) <= args.max_length
            baselines = random_batches(source_lengths[keep], target_lengths[keep],
                                       round(mean_batch), args.max_length, args.seed)  # fmt: skip
            rows.append((budget, growth, train, source_eff, target_eff, shapes, rate, rate_one,
                         rate_per_cpu, mean_batch, baselines))  # fmt: skip

    print()
    print("| budget | growth | batches/epoch | mean pairs/batch | shapes | source eff. | "
          "target eff. | random, padded to batch max (src / tgt, shapes) | "
          "random, padded to max_length | pairs/s (default threads) | pairs/s (1 thread) | "
          "pairs per CPU-second |")  # fmt: skip
    print("|" + "---|" * 12)
    for (budget, growth, train, source_eff, target_eff, shapes, rate, rate_one, rate_per_cpu,
         mean_batch, baselines) in rows:  # fmt: skip
        dynamic, fixed = baselines["dynamic"], baselines["max_length"]
        print(f"| {budget} | {growth} | {train.steps_per_epoch} | {mean_batch:.0f} | {shapes} | "
              f"{source_eff:.3f} | {target_eff:.3f} | "
              f"{dynamic[0]:.3f} / {dynamic[1]:.3f}, {dynamic[2]} | "
              f"{fixed[0]:.3f} / {fixed[1]:.3f} | {rate:,.0f} | {rate_one:,.0f} | "
              f"{rate_per_cpu:,.0f} |")  # fmt: skip

    if args.train_steps:
        steps = min(args.train_steps, first.steps_per_epoch)
        rates = training_throughput(first, tokenizer.vocabulary_size(), steps)
        print()
        print(f"training a 4+4-layer d_model=128 model at budget {first.config.token_budget} "
              f"(growth {first.config.bucket_growth}), {steps} steps:")  # fmt: skip
        for name, rate in rates.items():
            print(f"  {name}: {rate:,.0f} pairs/s")


if __name__ == "__main__":
    main()
