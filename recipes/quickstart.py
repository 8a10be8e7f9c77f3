"""The whole pipeline in minutes on a laptop CPU, on a corpus the package generates itself.

Writes a synthetic English-German corpus (reordering, compounding, agreement, numbers
and dates in words), trains a shared subword vocabulary, trains a small Transformer
with the paper's optimizer, schedule and label smoothing, averages its last
checkpoints, translates the held-out test set with beam search and reports BLEU.
`--data-dir` points the same script at real line-aligned files instead.

    python recipes/quickstart.py                       # built-in generated corpus
    python recipes/quickstart.py --data-dir ../shared/data/multi30k --train-steps 3000
"""

import argparse
import os
import sys
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--output-dir", default="runs/quickstart", help="Where everything is written."
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="Folder with {train,valid,test}.{SRC,TGT} files; default: generate a corpus.",
    )
    parser.add_argument("--source-language", default="en", help="Source file suffix.")
    parser.add_argument("--target-language", default="de", help="Target file suffix.")
    parser.add_argument(
        "--test-split",
        default="test",
        help="Split translated and scored at the end (e.g. test_2016_flickr for Multi30k).",
    )
    parser.add_argument("--train-steps", type=int, default=2500, help="Optimizer steps.")
    parser.add_argument("--token-budget", type=int, default=4096, help="Tokens per batch.")
    parser.add_argument("--vocabulary-size", type=int, default=1000, help="Shared BPE size.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of data, shuffling, weights.")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    start = time.time()
    import keras

    from keras_transformer import (
        LabelSmoothedCrossEntropy,
        Seq2SeqTransformer,
        TransformerConfig,
        paper_optimizer,
    )
    from keras_transformer.checkpoints import PeriodicCheckpoint
    from keras_transformer.data import make_translation_dataset
    from keras_transformer.decoding import Translator
    from keras_transformer.evaluation import chrf, sacre_bleu
    from keras_transformer.text import (
        ParallelCorpus,
        read_lines,
        train_vocabulary_from_files,
        write_synthetic_corpus,
    )

    keras.utils.set_random_seed(args.seed)
    output_dir = os.path.abspath(args.output_dir)
    os.makedirs(output_dir, exist_ok=True)
    src, tgt = args.source_language, args.target_language

    # 1. Data: the built-in generated corpus, or the user's files.
    if args.data_dir is None:
        data_dir = os.path.join(output_dir, "data")
        write_synthetic_corpus(
            data_dir, train_size=20000, valid_size=500, test_size=500, seed=args.seed
        )
    else:
        data_dir = args.data_dir

    def split(name):
        return os.path.join(data_dir, f"{name}.{src}"), os.path.join(data_dir, f"{name}.{tgt}")

    train_corpus = ParallelCorpus.from_files(*split("train"))

    # 2. One shared subword vocabulary for both languages (paper 5.1).
    tokenizer = train_vocabulary_from_files(
        list(split("train")),
        vocabulary_size=args.vocabulary_size,
        seed=args.seed,
        output_path=os.path.join(output_dir, "vocabulary.model"),
    )

    # 3. Batches of similar length within a token budget (paper 5.1).
    train = make_translation_dataset(
        train_corpus, tokenizer, token_budget=args.token_budget, seed=args.seed
    )
    print(train.summary)

    # 4. A small Transformer trained with the paper's optimizer, schedule and loss.
    config = TransformerConfig(
        vocabulary_size=args.vocabulary_size,
        num_layers=2,
        d_model=128,
        num_heads=4,
        intermediate_dim=512,
        dropout=0.1,
    )
    model = Seq2SeqTransformer(config)
    model.compile(
        optimizer=paper_optimizer(config.d_model, warmup_steps=400, scale=2.0),
        loss=LabelSmoothedCrossEntropy(label_smoothing=0.1),
    )
    checkpoints = PeriodicCheckpoint(
        os.path.join(output_dir, "checkpoints"),
        every_steps=max(1, args.train_steps // 10),
        every_minutes=None,
        keep=5,
        average_last=5,
    )
    steps_per_epoch = min(train.steps_per_epoch, args.train_steps)
    model.fit(
        train.dataset,
        steps_per_epoch=steps_per_epoch,
        epochs=max(1, args.train_steps // steps_per_epoch),
        callbacks=[checkpoints],
        verbose=2 if os.environ.get("CI") else 1,
    )
    model_path = os.path.join(output_dir, "model.keras")
    model.save(model_path)

    # 5. Beam search (beam 4, alpha 0.6) on the held-out split, then BLEU.
    sources = read_lines(split(args.test_split)[0])
    references = read_lines(split(args.test_split)[1])
    translator = Translator(model, tokenizer)
    hypotheses = translator.translate(sources, verbose=1)
    bleu, signature = sacre_bleu(hypotheses, [references])
    chrf_score, _ = chrf(hypotheses, [references])
    hypotheses_path = os.path.join(output_dir, f"{args.test_split}.hyp.{tgt}")
    with open(hypotheses_path, "w", encoding="utf-8") as f:
        f.write("\n".join(hypotheses) + "\n")

    print("\nExamples:")
    examples = zip(sources[:3], hypotheses[:3], references[:3], strict=True)
    for source, hypothesis, reference in examples:
        print(f"  {src}:  {source}\n  out: {hypothesis}\n  ref: {reference}\n")
    print(f"BLEU {bleu:.1f} chrF {chrf_score:.1f} on {len(sources)} held-out sentences")
    print(f"  ({signature})")
    print(f"Written under {output_dir}:")
    print(f"  data            {data_dir}")
    print(f"  vocabulary      {os.path.join(output_dir, 'vocabulary.model')}")
    print(f"  checkpoints     {checkpoints.directory}")
    print(f"  averaged model  {model_path}")
    print(f"  translations    {hypotheses_path}")
    print(f"Finished in {(time.time() - start) / 60:.1f} minutes.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
