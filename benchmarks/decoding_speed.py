"""Beam-search throughput with and without the key/value cache, measured in one run.

Decodes the same batch of real sentences (Multi30k valid, 20+ subword tokens) with a
base-size model (d_model 512, 6+6 layers, h 8), beam 4, alpha 0.6, once with the cache
and once rerunning the whole decoder every step, and prints sentences/s, target tokens/s
and their ratio. The model is untrained (speed does not depend on the weights); an
untrained model never emits EOS, so `--max-extra-length 0` (the default here) caps each
output at its source length, a realistic en-de translation length. The two searches must
return the same tokens (and scores within float32 rounding): the script exits with an error
if they do not, since the cache would then not be a speed-up of the same search.

    python benchmarks/decoding_speed.py --data-dir data/multi30k

With `--compare-ctranslate2`, our beam search (the current Keras backend) and CTranslate2
decode the same sentences with the same weights, exported with `export_ctranslate2`, in one
run: a quickstart-size model (d_model 128, 2+2 layers, 1,000-piece vocabulary) on 256
sentences and a base-size model (d_model 512, 6+6 layers, 8,000 pieces) on 128 sentences
with 30-token outputs; beam 4, alpha 0.6, batches of 32 sorted by length, float32 (and int8
for CTranslate2), CTranslate2 on `--threads` intra-op threads. The models are untrained, so
output lengths are fixed: every source of a batch is cut to the batch's shortest (sorted by
length, little is cut), each output runs to the source length (quickstart) or to 30 tokens
(base) in both decoders, and CTranslate2's `min_decoding_length` keeps it from ending
sooner. First passes (compilation, warm-up) are not timed; then the decoders take turns in
`--repeats` rounds, and each one's speed against ours is the median over rounds
(translate_speed.py's `timed_in_turns`). CTranslate2's OpenMP threads slow down many times
over when another process uses the cores: measure on a quiet machine.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/decoding_speed.py \\
        --data-dir data/multi30k --compare-ctranslate2

`--single-beam-steps` also times ours with one beam step per loop iteration, the
`paired_beam_steps` fast form off (JAX: two steps per iteration over a large cache), in the
same turns, and exits with an error unless both decode the same tokens.

The `trained` workload decodes as users do: a trained quickstart model (`keras-transformer
train --recipe quickstart`, trained once under TensorFlow into `--trained-run`, about two
minutes, and reused) translates its 500 test sentences, through `Translator` and through
CTranslate2 on the same weights (translate_speed.py: strings in and out, batches of
`--batch-size` sorted by length, the paper's beam 4, alpha 0.6, 50 extra tokens). Outputs end
at their own EOS, so a batch's rows finish at different steps, as in real use. `--data-dir`
is not read by this workload.

    python benchmarks/decoding_speed.py --compare-ctranslate2 --workloads trained
"""

import argparse
import os
import sys
import time

from translate_speed import speed_figures, timed_in_turns

# CTranslate2's OpenMP threads spin while waiting unless told otherwise; read at its import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Largest |cached - uncached| / max(1, |score|) accepted: scores are sums of float32
# log-probabilities that the two searches compute in a different order.
SCORE_TOLERANCE = 1e-4


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", help="Folder with valid.en and train.{en,de}.")
    parser.add_argument("--source-language", default="en", help="Source file suffix.")
    parser.add_argument("--target-language", default="de", help="Target file suffix.")
    parser.add_argument(
        "--num-sentences",
        type=int,
        help="Sentences decoded (default 16; with --compare-ctranslate2, 256 and 128).",
    )
    parser.add_argument("--min-tokens", type=int, default=20, help="Minimum source tokens.")
    parser.add_argument(
        "--num-layers",
        type=int,
        default=6,
        help="Without --compare-ctranslate2: N of the base-size model (base: 6).",
    )
    parser.add_argument("--beam-size", type=int, default=4, help="Beam size (paper: 4).")
    parser.add_argument("--max-extra-length", type=int, default=0, help="See the docstring.")
    parser.add_argument(
        "--vocabulary-size",
        type=int,
        help="Shared vocabulary size (default 8000; with --compare-ctranslate2, 1000 and 8000).",
    )
    parser.add_argument("--repeats", type=int, default=2, help="Timed runs per variant.")
    parser.add_argument(
        "--compare-ctranslate2",
        action="store_true",
        help="Compare with CTranslate2 on the same weights (see above).",
    )
    parser.add_argument(
        "--workloads",
        default="quickstart,base",
        help="With --compare-ctranslate2: comma-separated, from quickstart, base, trained.",
    )
    parser.add_argument(
        "--trained-run",
        default=os.path.join(os.path.expanduser("~"), ".cache", "keras_transformer_benchmarks"),
        help="The trained workload's run directory; trained there (about 2 min) if empty.",
    )
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2 intra_threads.")
    parser.add_argument(
        "--single-beam-steps",
        action="store_true",
        help="With --compare-ctranslate2 (quickstart, base): also time ours with one beam step "
        "per loop iteration (the paired_beam_steps fast form off).",
    )
    parser.add_argument(
        "--int8",
        action="store_true",
        help="With --compare-ctranslate2 (quickstart, base): also time ours with int8 weights "
        "(quantized_copy, Keras' int8 layers) made from the same float32 weights.",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="Sentences per batch.")
    return parser.parse_args()


def main():
    args = parse_args()
    needs_data = not args.compare_ctranslate2 or set(args.workloads.split(",")) - {"trained"}
    if needs_data and args.data_dir is None:
        sys.exit("error: --data-dir is required (except for --workloads trained)")
    if args.compare_ctranslate2:
        compare_ctranslate2(args)
        return
    args.num_sentences = args.num_sentences or 16
    args.vocabulary_size = args.vocabulary_size or 8000
    import keras
    import numpy as np

    from keras_transformer import Seq2SeqTransformer
    from keras_transformer.decoding import build_beam_search
    from keras_transformer.decoding.translator import to_token_lists

    tokenizer = train_tokenizer(args, args.vocabulary_size)
    valid = lines(args, "valid", args.source_language)
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
    model = Seq2SeqTransformer.from_architecture(
        "base", vocabulary_size=args.vocabulary_size, num_layers=args.num_layers
    )
    model.build()
    print(
        f"backend={keras.backend.backend()} layers={args.num_layers}+{args.num_layers} "
        f"params={model.count_params() / 1e6:.1f}M "
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


def lines(args, split, language):
    from keras_transformer.text import read_lines

    path = os.path.join(args.data_dir, f"{split}.{language}")
    if not os.path.exists(path):
        sys.exit(f"error: {path} does not exist (--data-dir {args.data_dir})")
    return read_lines(path)


def train_tokenizer(args, vocabulary_size):
    from keras_transformer.text import train_vocabulary

    train = lines(args, "train", args.source_language)
    train += lines(args, "train", args.target_language)
    return train_vocabulary(train, vocabulary_size=vocabulary_size, max_sentences=40000)


# name: (model sizes, vocabulary size, sentences, output tokens: None = the source length).
WORKLOADS = {
    "quickstart": (
        dict(num_layers=2, d_model=128, num_heads=4, intermediate_dim=512),
        1000,
        256,
        None,
    ),
    "base": (dict(num_layers=6, d_model=512, num_heads=8, intermediate_dim=2048), 8000, 128, 30),
}


def fixed_length_batches(token_lists, batch_size, output_tokens):
    """Batches sorted by length; each source cut to its batch's shortest (EOS kept).

    Returns a list of (ids array (batch, length) ending in EOS, output limit) pairs: the
    number of output tokens before EOS, `length` or `output_tokens`.
    """
    import numpy as np

    ordered = sorted(token_lists, key=len)
    batches = []
    for start in range(0, len(ordered), batch_size):
        rows = ordered[start : start + batch_size]
        length = len(rows[0]) if output_tokens is None else min(len(rows[0]), output_tokens)
        ids = np.array([row[: length - 1] + row[-1:] for row in rows], "int32")
        batches.append((ids, length if output_tokens is None else output_tokens))
    return batches


def compare_ctranslate2(args):
    """Our beam search against CTranslate2 (float32 and int8) on the same weights."""
    names = args.workloads.split(",")
    for name in names:
        if name != "trained" and name not in WORKLOADS:
            known = ", ".join([*WORKLOADS, "trained"])
            sys.exit(f"error: unknown workload {name!r} (--workloads: {known})")
    alpha = 0.6
    if names == ["trained"]:  # translate_speed.py prints its own header, in its own process
        compare_trained(args, alpha)
        return
    import keras

    from keras_transformer.export.ctranslate2_export import import_ctranslate2

    ctranslate2 = import_ctranslate2()
    print(
        f"backend={keras.backend.backend()} ctranslate2={ctranslate2.__version__} "
        f"beam={args.beam_size} alpha={alpha} batch={args.batch_size} "
        f"ctranslate2 intra_threads={args.threads} "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}"
    )
    for name in names:
        if name == "trained":
            compare_trained(args, alpha)
        else:
            compare_workload(args, name, alpha, ctranslate2)


def compare_workload(args, name, alpha, ctranslate2):
    """One workload: an untrained model of its size, timed in both decoders."""
    import contextlib
    import tempfile

    import keras
    import sentencepiece as spm

    from keras_transformer import Seq2SeqTransformer, TransformerConfig, backend
    from keras_transformer.decoding import build_beam_search
    from keras_transformer.decoding.translator import to_token_lists
    from keras_transformer.export import export_ctranslate2
    from keras_transformer.models.quantization import quantized_copy
    from keras_transformer.utils.map_in_order import map_in_order

    sizes, vocabulary_size, num_sentences, output_tokens = WORKLOADS[name]
    vocabulary_size = args.vocabulary_size or vocabulary_size
    num_sentences = args.num_sentences or num_sentences
    tokenizer = train_tokenizer(args, vocabulary_size)
    valid = lines(args, "valid", args.source_language)[:num_sentences]
    if len(valid) < num_sentences:
        sys.exit(f"error: only {len(valid)} valid sentences, {num_sentences} wanted")
    token_lists = [ids + [tokenizer.eos_id] for ids in to_token_lists(tokenizer(valid))]
    batches = fixed_length_batches(token_lists, args.batch_size, output_tokens)
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(
        TransformerConfig(vocabulary_size=vocabulary_size, dropout=0.0, **sizes)
    )
    model.build()
    ours = {}

    def ours_without(forms, outputs, decoded=model):
        """Our decoder, with the fast `forms` off (read where each search is traced)."""
        searches = [
            build_beam_search(
                decoded,
                bos_id=tokenizer.bos_id,
                eos_id=tokenizer.eos_id,
                beam_size=args.beam_size,
                alpha=alpha,
                max_extra_length=limit - ids.shape[1],
            )
            for ids, limit in batches
        ]

        def decode(index):
            tokens, _ = searches[index](batches[index][0])
            outputs[index] = keras.ops.convert_to_numpy(tokens)[:, 0]

        def run():  # as `Translator` does: `decoding_workers()` batches side by side
            off = backend.fast_forms_disabled(forms) if forms else contextlib.nullcontext()
            with off:
                list(map_in_order(decode, range(len(batches)), backend.decoding_workers()))

        return run

    decoders = {"ours": ours_without((), ours)}
    single_steps = {}
    if args.single_beam_steps:
        decoders["ours, single beam steps"] = ours_without(["paired_beam_steps"], single_steps)
    int8_outputs = {}
    if args.int8:
        decoders["ours int8"] = ours_without((), int8_outputs, quantized_copy(model, "int8"))
    processor = spm.SentencePieceProcessor(model_proto=tokenizer.proto)
    piece_batches = [
        [[processor.id_to_piece(int(i)) for i in row[:-1]] for row in ids] for ids, _ in batches
    ]
    theirs = {}

    def run_theirs(translator, compute_type):
        outputs = []
        for pieces, (_, limit) in zip(piece_batches, batches, strict=True):
            # Ours: `limit` tokens, then EOS. Both run limit + 1 decoder steps.
            results = translator.translate_batch(
                pieces,
                beam_size=args.beam_size,
                length_penalty=alpha,
                min_decoding_length=limit + 1,
                max_decoding_length=limit + 1,
                max_batch_size=args.batch_size,
            )
            outputs += [r.hypotheses[0] for r in results]
        theirs[compute_type] = outputs

    def run_theirs_side_by_side(translator):
        # One call: its batches decode side by side, one per inter thread.
        (limit,) = {limit for _, limit in batches}
        translator.translate_batch(
            [row for pieces in piece_batches for row in pieces],
            beam_size=args.beam_size,
            length_penalty=alpha,
            min_decoding_length=limit + 1,
            max_decoding_length=limit + 1,
            max_batch_size=args.batch_size,
        )

    # Threads inside each batch; and, where every batch has the same output length (base),
    # one thread on each of `--threads` batches side by side.
    layouts = {"": (args.threads, 1, run_theirs)}
    if len({limit for _, limit in batches}) == 1:
        layouts[" inter"] = (1, args.threads, lambda t, c: run_theirs_side_by_side(t))
    with tempfile.TemporaryDirectory() as directory:
        path = export_ctranslate2(model, tokenizer, os.path.join(directory, "model"))
        for compute_type in ("float32", "int8"):
            for layout, (intra, inter, run) in layouts.items():
                translator = ctranslate2.Translator(
                    path, device="cpu", compute_type=compute_type, intra_threads=intra,
                    inter_threads=inter,
                )  # fmt: skip
                decoders[f"ctranslate2 {compute_type}{layout}"] = (
                    lambda t=translator, c=compute_type, r=run: r(t, c)
                )
        timings, _ = timed_in_turns(decoders, args.repeats)
    report(name, model, batches, timings, ours, theirs["float32"], processor)
    if single_steps:
        same = all((ours[i] == single_steps[i]).all() for i in ours)
        if not same:
            sys.exit("error: ours with single and paired beam steps decoded different tokens")
        print("  ours, single and paired beam steps: the same tokens")
    if int8_outputs:
        report_int8(timings, ours, int8_outputs)


def report_int8(timings, ours, int8_outputs):
    """Prints ours int8 against ours float32 and CTranslate2 int8 (its faster layout)."""
    best = {decoder: figures[0] for decoder, figures in speed_figures(timings).items()}
    theirs = min((b, d) for d, b in best.items() if d.startswith("ctranslate2 int8"))
    print(
        f"  ours int8: {best['ours'] / best['ours int8']:.2f}x ours float32, "
        f"{theirs[0] / best['ours int8']:.2f}x {theirs[1]} (best times)"
    )
    same = sum(
        int((ours[i][row] == int8_outputs[i][row]).all())
        for i in ours
        for row in range(len(ours[i]))
    )
    print(
        f"  same output tokens (ours int8, ours float32): {same} of {sum(map(len, ours.values()))}"
    )


def trained_run(run_dir):
    """(run directory, test sources) of the trained quickstart run, trained there if missing."""
    import subprocess

    if not os.path.exists(os.path.join(run_dir, "model.keras")):
        print(f"training the quickstart model into {run_dir} (once)", file=sys.stderr)
        command = [sys.executable, "-m", "keras_transformer", "train", "--recipe", "quickstart"]
        environment = dict(os.environ, KERAS_BACKEND="tensorflow")
        subprocess.run([*command, "--output-dir", run_dir], env=environment, check=True)
    return run_dir, os.path.join(run_dir, "data", "test.en")


def compare_trained(args, alpha):
    """The trained workload: translate_speed.py on the trained quickstart model's test set."""
    import subprocess

    run_dir, test_file = trained_run(args.trained_run)
    command = [
        sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "translate_speed.py"),
        "--model", run_dir, "--input", test_file, "--references", test_file[: -len("en")] + "de",
        "--beam-size", str(args.beam_size), "--alpha", str(alpha),
        "--batch-size", str(args.batch_size), "--threads", str(args.threads),
        "--repeats", str(args.repeats),
    ]  # fmt: skip
    print("trained: the quickstart model on its test set (translate_speed.py)", flush=True)
    subprocess.run(command, check=True)


def report(name, model, batches, timings, ours, theirs, processor):
    """Prints sentences/s per decoder, the speeds against ours, and how often outputs agree."""
    sentences = sum(len(ids) for ids, _ in batches)
    outputs = sum(len(ids) * limit for ids, limit in batches)
    print(
        f"{name}: params={model.count_params() / 1e6:.1f}M sentences={sentences} "
        f"output tokens/sentence={outputs / sentences:.1f}"
    )
    for decoder, (best, median, speed_up) in speed_figures(timings).items():
        print(
            f"  {decoder:>25}: {sentences / best:8.2f} sentences/s (best {best:.2f}s, median "
            f"{median:.2f}s; {speed_up:.2f}x ours, the median of rounds)"
        )
    # The first `limit` tokens: CTranslate2 was kept from ending, ours ends with EOS there.
    ours_pieces = [
        [processor.id_to_piece(int(i)) for i in row[:limit]]
        for index, (_, limit) in enumerate(batches)
        for row in ours[index]
    ]
    same = sum(a == b[: len(a)] for a, b in zip(ours_pieces, theirs, strict=True))
    print(f"  same output tokens (ours, ctranslate2 float32): {same} of {sentences}")


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
