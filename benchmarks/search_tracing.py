"""On TensorFlow, how long a process's first beam search takes to trace: AutoGraph off against on.

A `Translator` or `keras-transformer translate` traces its search once per batch shape, so a
short file's translation is mostly tracing. `keras_transformer.backend.compile_search` traces
without AutoGraph, as the SavedModel export does; the baseline is the same search traced with
TensorFlow's default (AutoGraph on), which first converts the code of every layer the search
calls, once per process. Each round starts a fresh process per variant, in alternating order,
on the same untrained model (same seed), and times its search's first call (trace and one run)
and its second call (the run alone); the medians of their difference are the tracing times.
Both must return the same tokens and scores; the script exits with an error otherwise.

    python benchmarks/search_tracing.py
    python benchmarks/search_tracing.py --num-layers 2 --d-model 128 --num-heads 4 \\
        --intermediate-dim 512 --vocabulary-size 1000
"""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from unittest import mock

from cache_stages import EOS_ID, add_model_arguments, untrained_model

VARIANTS = ("AutoGraph off (ours)", "AutoGraph on")


def one_process(args):
    """In this process: `args.variant`'s search traced and run twice; prints JSON on stdout."""
    import keras
    import tensorflow as tf

    from keras_transformer import backend
    from keras_transformer.decoding import build_beam_search

    def traced_with_autograph(function, variables):
        return tf.function(function, reduce_retracing=True)  # TensorFlow's default: AutoGraph on

    model, ids = untrained_model(args)
    autograph_on = mock.patch.object(backend, "compile_search", traced_with_autograph)
    with autograph_on if args.variant == VARIANTS[1] else contextlib.nullcontext():
        search = build_beam_search(
            model, bos_id=2, eos_id=EOS_ID, beam_size=args.beam_size,
            max_extra_length=args.max_extra_length,
        )  # fmt: skip
    times = []
    for _ in range(2):
        start = time.perf_counter()
        tokens, scores = (keras.ops.convert_to_numpy(x) for x in search(ids))
        times.append(time.perf_counter() - start)
    print(json.dumps({"tracing": times[0] - times[1], "tokens": tokens.tolist(),
                      "scores": scores.tolist()}))  # fmt: skip


def in_fresh_processes(variants, repeats):
    """Runs this script again with `--variant NAME`, once per variant and round, in
    alternating order; returns {name: [the JSON line each of its processes printed last]}."""
    measured = {name: [] for name in variants}
    for repeat in range(repeats):
        for name in variants if repeat % 2 == 0 else variants[::-1]:
            script = os.path.abspath(sys.argv[0])
            command = [sys.executable, script, *sys.argv[1:], "--variant", name]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                # Its last line, alone where it is the process's own one-line error.
                lines = result.stderr.strip().splitlines() or [f"the {name} process failed"]
                sys.exit(lines[-1] if lines[-1].startswith("error: ") else result.stderr[-3000:])
            measured[name].append(json.loads(result.stdout.splitlines()[-1]))
    return measured


def require_tensorflow(reason):
    """Exits with one line unless Keras runs on TensorFlow (in the processes that import it)."""
    import keras

    if keras.backend.backend() != "tensorflow":
        sys.exit(f"error: {reason}: run with KERAS_BACKEND=tensorflow")


def print_medians(seconds, what):
    """Prints each variant's median of `seconds` ({name: [s, ...]}) and its values; returns
    {name: median}."""
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    width = max(map(len, seconds))
    for name, values in seconds.items():
        listed = ", ".join(f"{value:.2f}" for value in values)
        print(f"{name:>{width}}: {what} median {medians[name]:.2f}s ({listed})")
    return medians


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # a child process
    parser.set_defaults(repeats=3, max_extra_length=10)
    args = parser.parse_args()
    if args.variant:
        require_tensorflow("AutoGraph is TensorFlow's")
        one_process(args)
        return
    import numpy as np  # this process only starts the others: it never imports Keras

    measured = in_fresh_processes(VARIANTS, args.repeats)
    tracing = {name: [run["tracing"] for run in runs] for name, runs in measured.items()}
    outputs = [
        (np.array(runs[-1]["tokens"]), np.array(runs[-1]["scores"])) for runs in measured.values()
    ]
    (tokens, scores), (other_tokens, other_scores) = outputs
    if not (np.array_equal(tokens, other_tokens) and np.allclose(scores, other_scores, atol=1e-4)):
        sys.exit("error: the two searches returned different outputs")
    print(
        f"batch={args.batch_size} beam={args.beam_size} d_model={args.d_model} "
        f"layers={args.num_layers}+{args.num_layers} fresh processes per variant={args.repeats}"
    )
    medians = print_medians(tracing, "first trace")
    print("same tokens and scores in both searches")
    ratio = medians[VARIANTS[1]] / medians[VARIANTS[0]]
    print(f"AutoGraph on / off first trace: {ratio:.2f}x")


if __name__ == "__main__":
    main()
