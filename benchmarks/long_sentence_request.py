"""What one long sentence costs a SavedModel request, with and without sub-batches by length.

Builds the exported decoding graph (`TranslationModule`, TensorFlow, no XLA) of an untrained
model and times its `serving_default` signature on a request of Multi30k valid sentences,
then on the same request plus one sentence of about `--long-tokens` subword tokens (valid
sentences joined). It does so twice in one run: decoding the request as one padded batch
(`batch_tokens` larger than any request) and in sub-batches by length (`--batch-tokens`,
the default of the export; `--modes` picks one of the two), and prints each time and the
ratio with / without the long sentence. An untrained model never emits EOS, so every row
runs to its limit of source length + `--max-extra-length` tokens: the long sentence's loop
is as long as it can be. The two modes must return the same translations: the script exits
with an error otherwise.

    python benchmarks/long_sentence_request.py --data-dir data/multi30k
"""

import argparse
import os
import sys
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="Folder with valid.en and train.{en,de}.")
    parser.add_argument("--num-sentences", type=int, default=256, help="Sentences per request.")
    parser.add_argument("--long-tokens", type=int, default=480, help="Subword tokens, long one.")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="Sub-batch budget.")
    parser.add_argument("--max-extra-length", type=int, default=50, help="Paper: 50.")
    parser.add_argument("--vocabulary-size", type=int, default=1000, help="Shared BPE size.")
    parser.add_argument("--d-model", type=int, default=128, help="Model width.")
    parser.add_argument("--num-layers", type=int, default=2, help="Encoder and decoder layers.")
    parser.add_argument("--num-heads", type=int, default=4, help="Attention heads.")
    parser.add_argument("--intermediate-dim", type=int, default=512, help="Feed-forward width.")
    parser.add_argument("--repeats", type=int, default=1, help="Timed runs per case (best).")
    parser.add_argument(
        "--modes",
        default="one-batch,sub-batches",
        help="Comma list of one-batch and sub-batches (one batch of the full request with its "
        "~480-token sentence runs for many minutes; `--modes sub-batches` skips it).",
    )
    return parser.parse_args()


def main():
    args = parse_args()
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    import tensorflow as tf

    if keras.backend.backend() != "tensorflow":
        sys.exit("error: the SavedModel graph is traced on the tensorflow backend")
    from keras_transformer import Seq2SeqTransformer, TransformerConfig
    from keras_transformer.decoding.translator import to_token_lists
    from keras_transformer.export.translation_module import TranslationModule
    from keras_transformer.text import read_lines, train_vocabulary

    def lines(split, language):
        path = os.path.join(args.data_dir, f"{split}.{language}")
        if not os.path.exists(path):
            sys.exit(f"error: {path} does not exist (--data-dir {args.data_dir})")
        return read_lines(path)

    tokenizer = train_vocabulary(
        lines("train", "en") + lines("train", "de"),
        vocabulary_size=args.vocabulary_size,
        max_sentences=40000,
    )
    valid = lines("valid", "en")
    request = valid[: args.num_sentences]
    pieces, long_sentence = 0, []
    for sentence in valid[args.num_sentences :]:
        if pieces >= args.long_tokens:
            break
        long_sentence.append(sentence)
        pieces = len(to_token_lists(tokenizer([" ".join(long_sentence)]))[0])
    long_sentence = " ".join(long_sentence)
    # The long sentence in the middle of the request, where sorting must find it.
    with_long = request[: len(request) // 2] + [long_sentence] + request[len(request) // 2 :]

    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(
        TransformerConfig(
            vocabulary_size=args.vocabulary_size,
            num_layers=args.num_layers,
            d_model=args.d_model,
            num_heads=args.num_heads,
            intermediate_dim=args.intermediate_dim,
            dropout=0.0,
        )
    )
    model.build()
    print(
        f"params={model.count_params() / 1e6:.1f}M sentences={len(request)} "
        f"long sentence={pieces} tokens beam=4 max_extra_length={args.max_extra_length}",
        flush=True,
    )
    all_modes = {"one-batch": 10**9, "sub-batches": args.batch_tokens}
    chosen = args.modes.split(",")
    unknown = sorted(set(chosen) - set(all_modes))
    if unknown or not chosen:
        sys.exit(f"error: --modes takes one-batch and/or sub-batches, not {args.modes!r}")
    modes = {mode: all_modes[mode] for mode in chosen}
    translations = {}
    for mode, batch_tokens in modes.items():
        module = TranslationModule(
            model,
            tokenizer,
            max_extra_length=args.max_extra_length,
            max_source_length=max(512, pieces + 1),
            batch_tokens=batch_tokens,
        )
        module.translate(tf.constant(request[:2]))  # traces the graph
        seconds = {}
        for name, sentences in (("without", request), ("with", with_long)):
            timings = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                outputs = module.translate(tf.constant(sentences))["translations"].numpy()
                timings.append(time.perf_counter() - start)
            seconds[name] = min(timings)
            translations[mode, name] = outputs.tolist()
        print(
            f"{mode} ({batch_tokens} tokens): without {seconds['without']:7.2f}s, "
            f"with the long sentence {seconds['with']:7.2f}s: "
            f"{seconds['with'] / seconds['without']:.2f}x (target <= 2x)",
            flush=True,
        )
    if len(modes) == 2:
        for name in ("without", "with"):
            if translations["one-batch", name] != translations["sub-batches", name]:
                sys.exit(f"error: one batch and sub-batches translate differently ({name})")
        print("one batch == sub-batches: same translations")


if __name__ == "__main__":
    main()
