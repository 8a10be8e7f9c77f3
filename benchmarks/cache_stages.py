"""Beam search on JAX with the self-attention buffers filled in two stages against one.

Under `jax.jit` the decoding cache has fixed-length buffers; a search fills them in the
stages of `keras_transformer.decoding.search_state.cache_stages` (about half the steps, then
all of them). This script times the same search with those stages and with one buffer of every
step, on the same untrained model and source ids, alternating the two so that machine noise hits
both alike, and prints the median times and their ratio. An untrained model never emits EOS, so
every row decodes to its limit (source length + `--max-extra-length`): the most steps a search
can run, and the most the second stage can cost. Both must return the same tokens and scores;
the script exits with an error otherwise. Compilation (the first call) is timed separately.

    KERAS_BACKEND=jax python benchmarks/cache_stages.py
    KERAS_BACKEND=jax python benchmarks/cache_stages.py --max-extra-length 16  # 31 steps
"""

import argparse
import sys
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32, help="Sources per batch.")
    parser.add_argument("--source-length", type=int, default=14, help="Source ids, EOS included.")
    parser.add_argument("--max-extra-length", type=int, default=50, help="Paper: 50.")
    parser.add_argument("--beam-size", type=int, default=4, help="Paper: 4.")
    parser.add_argument("--num-layers", type=int, default=6, help="N (base: 6).")
    parser.add_argument("--d-model", type=int, default=512, help="d_model (base: 512).")
    parser.add_argument("--num-heads", type=int, default=8, help="h (base: 8).")
    parser.add_argument("--intermediate-dim", type=int, default=2048, help="d_ff (base: 2048).")
    parser.add_argument("--vocabulary-size", type=int, default=8000, help="Shared vocabulary.")
    parser.add_argument("--repeats", type=int, default=4, help="Timed calls of each search.")
    return parser.parse_args()


def main():
    args = parse_args()
    import keras
    import numpy as np

    if keras.backend.backend() != "jax":
        sys.exit("error: cache stages exist on JAX only: run with KERAS_BACKEND=jax")
    from keras_transformer import Seq2SeqTransformer, TransformerConfig
    from keras_transformer.decoding import build_beam_search, search_state

    keras.utils.set_random_seed(0)
    config = TransformerConfig(
        vocabulary_size=args.vocabulary_size,
        num_layers=args.num_layers,
        d_model=args.d_model,
        num_heads=args.num_heads,
        intermediate_dim=args.intermediate_dim,
        dropout=0.0,
    )
    model = Seq2SeqTransformer(config)
    model.build()
    eos_id = 3
    rng = np.random.default_rng(0)
    ids = rng.integers(4, args.vocabulary_size, (args.batch_size, args.source_length), "int32")
    ids[:, -1] = eos_id
    num_steps = args.source_length + args.max_extra_length + 1
    staged = search_state.cache_stages
    searches, outputs = {}, {}
    for name, stages in (("one stage", lambda n: (n,)), ("two stages", staged)):
        search_state.cache_stages = stages  # read when the search is traced, in its first call
        try:
            search = build_beam_search(
                model,
                bos_id=2,
                eos_id=eos_id,
                beam_size=args.beam_size,
                max_extra_length=args.max_extra_length,
            )
            start = time.perf_counter()
            outputs[name] = [keras.ops.convert_to_numpy(x) for x in search(ids)]
            print(
                f"{name:>10}: buffers {stages(num_steps)}, first call (compilation) "
                f"{time.perf_counter() - start:.1f}s",
                file=sys.stderr,
            )
        finally:
            search_state.cache_stages = staged
        searches[name] = search
    (tokens, scores), (staged_tokens, staged_scores) = outputs.values()
    if not (
        np.array_equal(tokens, staged_tokens) and np.allclose(scores, staged_scores, atol=1e-4)
    ):
        sys.exit("error: the two searches returned different outputs")
    timings = {name: [] for name in searches}
    for repeat in range(args.repeats):
        order = list(searches) if repeat % 2 == 0 else list(searches)[::-1]
        for name in order:
            start = time.perf_counter()
            keras.ops.convert_to_numpy(searches[name](ids)[0])
            timings[name].append(time.perf_counter() - start)
    print(
        f"batch={args.batch_size} beam={args.beam_size} steps={num_steps} "
        f"d_model={args.d_model} layers={args.num_layers}+{args.num_layers}"
    )
    medians = {name: float(np.median(values)) for name, values in timings.items()}
    for name, values in timings.items():
        print(f"{name:>10}: median {medians[name]:.2f}s ({', '.join(f'{v:.2f}' for v in values)})")
    print("same tokens and scores in both searches")
    print(f"two stages / one stage time: {medians['two stages'] / medians['one stage']:.3f}x")


if __name__ == "__main__":
    main()
