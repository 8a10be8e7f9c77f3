"""Beam search with settled sources leaving the loop against keeping every row to the end.

A batch's sources settle at different steps: a translation's length varies. On TensorFlow and
torch, settled sources leave the decoding loop (`build_beam_search(drop_settled=None)`, the
default) and later steps decode only the rows left; `drop_settled=False` keeps every row until
the last one settles. This script times both on the same untrained model and sources,
alternating them so that machine noise hits both alike, and prints the median times and their
ratio. An untrained model never emits EOS, so each row decodes to its own limit (its source
length + `--max-extra-length`); sources get lengths drawn between `--min-source-length` and
`--source-length`, so their outputs end at different steps as a trained model's do. Both
searches must return the same tokens and scores (up to float rounding); the script exits with
an error otherwise.

    python benchmarks/settled_rows.py --max-extra-length 10
    KERAS_BACKEND=torch python benchmarks/settled_rows.py --max-extra-length 10
"""

import argparse
import sys

from cache_stages import EOS_ID, add_model_arguments, compare, untrained_model


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--min-source-length", type=int, default=8, help="Shortest source.")
    parser.set_defaults(source_length=24)
    args = parser.parse_args()
    import numpy as np

    from keras_transformer.backend import shrinking_batch
    from keras_transformer.decoding import build_beam_search

    if not shrinking_batch():
        sys.exit("error: JAX keeps every row (fixed shapes): run with tensorflow or torch")
    if not 1 <= args.min_source_length <= args.source_length:
        sys.exit(
            f"error: --min-source-length must be in [1, --source-length={args.source_length}]; "
            f"got {args.min_source_length}"
        )
    model, ids = untrained_model(args)
    rng = np.random.default_rng(1)
    lengths = rng.integers(args.min_source_length, args.source_length + 1, len(ids))
    ids[np.arange(ids.shape[1])[None, :] >= lengths[:, None]] = model.config.pad_id
    ids[np.arange(len(ids)), lengths - 1] = EOS_ID
    searches = {
        name: build_beam_search(
            model,
            bos_id=2,
            eos_id=EOS_ID,
            beam_size=args.beam_size,
            max_extra_length=args.max_extra_length,
            drop_settled=drop,
        )
        for name, drop in (("rows kept", False), ("settled out", None))
    }
    steps = lengths + args.max_extra_length + 1
    print(
        f"batch={args.batch_size} beam={args.beam_size} steps={steps.min()}-{steps.max()} "
        f"(row-steps needed / run: {steps.sum() / (steps.max() * len(steps)):.2f}) "
        f"d_model={args.d_model} layers={args.num_layers}+{args.num_layers}"
    )
    medians = compare(searches, ids, args.repeats)
    print(f"rows kept / settled out time: {medians['rows kept'] / medians['settled out']:.3f}x")


if __name__ == "__main__":
    main()
