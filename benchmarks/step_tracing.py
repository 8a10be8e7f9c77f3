"""On TensorFlow, how long a fresh model's first `fit` takes: built before the trace or inside it.

Keras (without a distribution strategy) builds a fresh model and its optimizer inside the
first trace of the train step, and `tf.function` traces a step that made variables a second
time. `Seq2SeqTransformer.make_train_function` builds both first
(`keras_transformer.backend.build_before_tracing`), so the step is traced once; the baseline
is Keras' own `make_train_function`. Each round starts a fresh process per variant, in
alternating order, trains the same seeded model on the same random batches, and times the
whole `fit` (tracing and the steps). Both must end with the same weights; the script exits
with an error otherwise.

    python benchmarks/step_tracing.py
    python benchmarks/step_tracing.py --num-layers 2 --d-model 128 --num-heads 4 \\
        --intermediate-dim 512 --vocabulary-size 1000
"""

import argparse
import functools
import json
import sys
import time

from search_tracing import in_fresh_processes, print_medians, require_tensorflow

VARIANTS = ("built before the trace (ours)", "built in the trace (Keras)")


def one_process(args):
    """In this process: `args.variant`'s `fit`, timed; prints JSON on stdout."""
    import keras
    import numpy as np

    from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, TransformerConfig

    keras.utils.set_random_seed(0)
    config = TransformerConfig(
        vocabulary_size=args.vocabulary_size, num_layers=args.num_layers, d_model=args.d_model,
        num_heads=args.num_heads, intermediate_dim=args.intermediate_dim,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    shape = (args.steps * args.batch_size, args.length)
    inputs = {
        "encoder_token_ids": rng.integers(4, args.vocabulary_size, shape, "int32"),
        "decoder_token_ids": rng.integers(4, args.vocabulary_size, shape, "int32"),
    }
    labels = rng.integers(4, args.vocabulary_size, shape, "int32")
    model = Seq2SeqTransformer(config)
    if args.variant == VARIANTS[1]:
        model.make_train_function = functools.partial(keras.Model.make_train_function, model)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=LabelSmoothedCrossEntropy())
    start = time.perf_counter()
    model.fit(inputs, labels, batch_size=args.batch_size, epochs=1, shuffle=False, verbose=0)
    seconds = time.perf_counter() - start
    weights = [keras.ops.convert_to_numpy(w) for w in model.weights]
    print(json.dumps({"seconds": seconds, "weights": [float(np.abs(w).sum()) for w in weights]}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-layers", type=int, default=6, help="N (base: 6).")
    parser.add_argument("--d-model", type=int, default=512, help="d_model (base: 512).")
    parser.add_argument("--num-heads", type=int, default=8, help="h (base: 8).")
    parser.add_argument("--intermediate-dim", type=int, default=2048, help="d_ff (base: 2048).")
    parser.add_argument("--vocabulary-size", type=int, default=8000, help="Shared vocabulary.")
    parser.add_argument("--batch-size", type=int, default=8, help="Sentence pairs per step.")
    parser.add_argument("--length", type=int, default=16, help="Source and target ids per pair.")
    parser.add_argument("--steps", type=int, default=2, help="Training steps of each fit.")
    parser.add_argument("--repeats", type=int, default=3, help="Fresh processes per variant.")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # a child process
    args = parser.parse_args()
    if args.variant:
        require_tensorflow("the second trace is tf.function's")
        one_process(args)
        return
    import numpy as np  # this process only starts the others: it never imports Keras

    measured = in_fresh_processes(VARIANTS, args.repeats)
    seconds = {name: [run["seconds"] for run in runs] for name, runs in measured.items()}
    weights = {name: runs[-1]["weights"] for name, runs in measured.items()}
    if not np.allclose(weights[VARIANTS[0]], weights[VARIANTS[1]], rtol=1e-5):
        sys.exit("error: the two builds ended with different weights")
    print(
        f"batch={args.batch_size} length={args.length} steps={args.steps} "
        f"d_model={args.d_model} layers={args.num_layers}+{args.num_layers} "
        f"fresh processes per variant={args.repeats}"
    )
    medians = print_medians(seconds, "fit")
    print("same weights after both fits")
    ratio = medians[VARIANTS[1]] / medians[VARIANTS[0]]
    print(f"built in / before the trace, first fit: {ratio:.2f}x")


if __name__ == "__main__":
    main()
