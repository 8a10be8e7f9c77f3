"""Beam search on JAX with the self-attention buffers filled in stages against one buffer.

Under `jax.jit` the decoding cache has fixed-length buffers; a search fills them in the stages
of `keras_transformer.decoding.search_steps.cache_stages` (16 positions, doubling, then all the
steps). This script times the same search with those stages and with one buffer of every step,
on the same untrained model and source ids, alternating the two so that machine noise hits both
alike, and prints the median times and their ratio. An untrained model never emits EOS, so every
row decodes to its limit (source length + `--max-extra-length`): the most steps a search can
run, and the most the later stages can cost. Both must return the same tokens and scores; the
script exits with an error otherwise. Compilation (the first call) is timed separately.

    KERAS_BACKEND=jax python benchmarks/cache_stages.py
    KERAS_BACKEND=jax python benchmarks/cache_stages.py --max-extra-length 16  # 31 steps
"""

import argparse
import functools
import sys
import time

EOS_ID = 3  # the untrained model's end-of-sentence id; 2 is BOS


def add_model_arguments(parser):
    """The untrained model and source batch of a search comparison (base size by default)."""
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


def untrained_model(args):
    """A `Seq2SeqTransformer` of the arguments' size, seeded, and random source ids ending in
    `EOS_ID`: (model, ids)."""
    import keras
    import numpy as np

    from keras_transformer import Seq2SeqTransformer, TransformerConfig

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
    rng = np.random.default_rng(0)
    ids = rng.integers(4, args.vocabulary_size, (args.batch_size, args.source_length), "int32")
    ids[:, -1] = EOS_ID
    return model, ids


def compare(searches, ids, repeats):
    """Checks that the searches return the same outputs, then times them in turns.

    `searches` maps two names to compiled searches. Exits with an error if their tokens differ
    or their scores differ beyond float rounding. Prints each one's median time and returns the
    medians by name.
    """
    import keras
    import numpy as np

    outputs = {}
    for name, search in searches.items():
        start = time.perf_counter()
        outputs[name] = [keras.ops.convert_to_numpy(x) for x in search(ids)]
        print(f"{name:>12}: first call (compilation) {time.perf_counter() - start:.1f}s",
              file=sys.stderr)  # fmt: skip
    (tokens, scores), (other_tokens, other_scores) = outputs.values()
    if not (np.array_equal(tokens, other_tokens) and np.allclose(scores, other_scores, atol=1e-4)):
        sys.exit("error: the two searches returned different outputs")
    timings = {name: [] for name in searches}
    for repeat in range(repeats):
        order = list(searches) if repeat % 2 == 0 else list(searches)[::-1]
        for name in order:
            start = time.perf_counter()
            keras.ops.convert_to_numpy(searches[name](ids)[0])
            timings[name].append(time.perf_counter() - start)
    medians = {name: float(np.median(values)) for name, values in timings.items()}
    for name, values in timings.items():
        print(f"{name:>12}: median {medians[name]:.2f}s ({', '.join(f'{v:.2f}' for v in values)})")
    print("same tokens and scores in both searches")
    return medians


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    args = parser.parse_args()
    import keras

    if keras.backend.backend() != "jax":
        sys.exit("error: cache stages exist on JAX only: run with KERAS_BACKEND=jax")
    from keras_transformer.decoding import build_beam_search, search_steps

    model, ids = untrained_model(args)
    num_steps = args.source_length + args.max_extra_length + 1
    staged = search_steps.cache_stages
    searches = {}
    for name, stages in (("one stage", lambda n: (n,)), ("staged", staged)):
        search = build_beam_search(
            model,
            bos_id=2,
            eos_id=EOS_ID,
            beam_size=args.beam_size,
            max_extra_length=args.max_extra_length,
        )
        # The stages are read when a search is traced, in its first call.
        searches[name] = functools.partial(traced_with, search, stages)
        print(f"{name:>12}: buffers {stages(num_steps)}", file=sys.stderr)
    print(
        f"batch={args.batch_size} beam={args.beam_size} steps={num_steps} "
        f"d_model={args.d_model} layers={args.num_layers}+{args.num_layers}"
    )
    medians = compare(searches, ids, args.repeats)
    print(f"staged / one stage time: {medians['staged'] / medians['one stage']:.3f}x")


def traced_with(search, stages, ids):
    """`search(ids)` with `search_steps.cache_stages` set to `stages` while it runs (and, in
    the first call, is traced)."""
    from keras_transformer.decoding import search_steps

    staged = search_steps.cache_stages
    search_steps.cache_stages = stages
    try:
        return search(ids)
    finally:
        search_steps.cache_stages = staged


if __name__ == "__main__":
    main()
