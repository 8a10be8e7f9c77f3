"""Beam-search throughput with and without the key/value cache, measured in one run.

Decodes the same batch of real sentences (Multi30k valid, 20+ subword tokens) with a
base-size model (d_model 512, 6+6 layers, h 8), beam 4, alpha 0.6, once with the cache
and once rerunning the whole decoder every step, and prints sentences/s, target tokens/s
and their ratio. The model is untrained (speed does not depend on the weights); an
untrained model never emits EOS, so `--max-extra-length 0` (the default here) caps each
output at its source length, a realistic en-de translation length. The two searches must
return the same tokens (and scores within float32 rounding): the script exits with an error
if they do not, since the cache would then not be a speed-up of the same search.

    python benchmarks/decoding_speed.py --data-dir ../shared/data/multi30k
"""

import argparse
import os
import sys
import time

# Largest |cached - uncached| / max(1, |score|) accepted: scores are sums of float32
# log-probabilities that the two searches compute in a different order.
SCORE_TOLERANCE = 1e-4


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="Folder with valid.en and train.{en,de}.")
    parser.add_argument("--source-language", default="en", help="Source file suffix.")
    parser.add_argument("--target-language", default="de", help="Target file suffix.")
    parser.add_argument("--num-sentences", type=int, default=16, help="Sentences decoded.")
    parser.add_argument("--min-tokens", type=int, default=20, help="Minimum source tokens.")
    parser.add_argument("--beam-size", type=int, default=4, help="Beam size (paper: 4).")
    parser.add_argument("--max-extra-length", type=int, default=0, help="See the docstring.")
    parser.add_argument("--vocabulary-size", type=int, default=8000, help="Shared BPE size.")
    parser.add_argument("--repeats", type=int, default=2, help="Timed runs per variant.")
    return parser.parse_args()


def main():
    args = parse_args()
    import keras
    import numpy as np

    from keras_transformer import Seq2SeqTransformer
    from keras_transformer.decoding import build_beam_search
    from keras_transformer.decoding.translator import to_token_lists
    from keras_transformer.text import read_lines, train_vocabulary

    def lines(split, language):
        path = os.path.join(args.data_dir, f"{split}.{language}")
        if not os.path.exists(path):
            sys.exit(f"error: {path} does not exist (--data-dir {args.data_dir})")
        return read_lines(path)

    train = lines("train", args.source_language) + lines("train", args.target_language)
    tokenizer = train_vocabulary(train, vocabulary_size=args.vocabulary_size, max_sentences=40000)
    valid = lines("valid", args.source_language)
    token_lists = [ids + [tokenizer.eos_id] for ids in to_token_lists(tokenizer(valid))]
    chosen = [ids for ids in token_lists if len(ids) >= args.min_tokens][: args.num_sentences]
    if len(chosen) < args.num_sentences:
        sys.exit(f"error: only {len(chosen)} sentences have >= {args.min_tokens} tokens")
    length = max(map(len, chosen))
    source = np.zeros((len(chosen), length), "int32")
    for row, ids in enumerate(chosen):
        source[row, : len(ids)] = ids
    real_tokens = int((source != 0).sum())

    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer.from_preset("base", vocabulary_size=args.vocabulary_size)
    model.build()
    print(
        f"backend={keras.backend.backend()} params={model.count_params() / 1e6:.1f}M "
        f"sentences={len(chosen)} source tokens/sentence={real_tokens / len(chosen):.1f} "
        f"beam={args.beam_size}"
    )
    results = {}
    outputs = {}
    for use_cache in (True, False):
        search = build_beam_search(
            model,
            bos_id=tokenizer.bos_id,
            eos_id=tokenizer.eos_id,
            beam_size=args.beam_size,
            max_extra_length=args.max_extra_length,
            use_cache=use_cache,
        )
        start = time.perf_counter()
        tokens, scores = search(source)  # compiles
        tokens = keras.ops.convert_to_numpy(tokens)
        compile_seconds = time.perf_counter() - start
        timings = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            tokens, scores = search(source)
            tokens = keras.ops.convert_to_numpy(tokens)
            timings.append(time.perf_counter() - start)
        seconds = min(timings)
        target_tokens = int((tokens[:, 0] != 0).sum()) + len(chosen)  # + EOS
        name = "cached" if use_cache else "uncached"
        results[name] = (seconds, target_tokens)
        outputs[name] = (tokens, keras.ops.convert_to_numpy(scores))
        print(
            f"{name:>9}: {len(chosen) / seconds:7.2f} sentences/s "
            f"{target_tokens / seconds:8.1f} target tokens/s "
            f"(best of {args.repeats}: {seconds:.2f}s; first call {compile_seconds:.1f}s)"
        )
    check_same_output(outputs["cached"], outputs["uncached"])
    speedup = results["uncached"][0] / results["cached"][0]
    print(f"cached / uncached throughput: {speedup:.2f}x (target >= 3x)")


def check_same_output(cached, uncached):
    """Exits with an error unless both searches found the same tokens and scores."""
    import numpy as np

    (tokens, scores), (uncached_tokens, uncached_scores) = cached, uncached
    if tokens.shape != uncached_tokens.shape:
        sys.exit(
            "error: cached and uncached beam search differ: token shapes "
            f"{tokens.shape} != {uncached_tokens.shape}"
        )
    differing = np.flatnonzero((tokens != uncached_tokens).reshape(len(tokens), -1).any(axis=1))
    if differing.size:
        sys.exit(
            "error: cached and uncached beam search differ: different tokens in "
            f"{differing.size} of {len(tokens)} sentences (rows {differing.tolist()[:10]})"
        )
    same = scores == uncached_scores  # equal infinities too
    with np.errstate(invalid="ignore"):  # inf - inf where both are -inf (masked by `same`)
        relative = np.abs(scores - uncached_scores) / np.maximum(1.0, np.abs(scores))
    score_difference = float(np.max(np.where(same, 0.0, relative)))
    if not score_difference <= SCORE_TOLERANCE:  # NaN fails too
        sys.exit(
            "error: cached and uncached beam search differ: scores differ by up to "
            f"{score_difference:.2e} relative (tolerance {SCORE_TOLERANCE:g})"
        )
    print(
        f"cached == uncached: same tokens in all {len(tokens)} sentences, "
        f"scores within {score_difference:.1e} relative"
    )


if __name__ == "__main__":
    main()
