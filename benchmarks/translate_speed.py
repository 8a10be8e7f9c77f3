"""A trained model's translation speed against CTranslate2's, on the same sentences in one run.

Translates a file with a run's model twice: through `Translator` on the current Keras backend
(what `keras-transformer translate` runs), and through CTranslate2 on the same weights
(exported with `export_ctranslate2` into a temporary directory, loaded as float32 and as
int8). Same beam, alpha (CTranslate2's `length_penalty`, which is length ** alpha instead of
the GNMT penalty), output limit (source length + `--max-extra-length`) and batches of
`--batch-size` sentences sorted by length. CTranslate2 runs its `--threads` threads both ways:
inside each batch (`intra_threads`) and on batches side by side (`inter_threads`, the rows
marked inter). Unlike decoding_speed.py's untrained models, the
outputs end where the model ends them, so the figures include each decoder's handling of
hypotheses and sentences that finish early. Each decoder translates the file once untimed
(compilation, warm-up), then once in each of `--repeats` rounds, taking turns
(`timed_in_turns`). Prints each decoder's sentences/s in its best pass, its median pass, its
speed against ours (the median over rounds of ours' time over its time in the same round),
how many translations equal ours, and sacreBLEU when `--references` is given.
CTranslate2's OpenMP threads slow down many times over when another process uses the cores:
measure on a quiet machine.

    OMP_WAIT_POLICY=PASSIVE CT2_USE_MKL=1 python benchmarks/translate_speed.py \\
        --model runs/multi30k --input data/multi30k/test_2016_flickr.en \\
        --references data/multi30k/test_2016_flickr.de
"""

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time

# CTranslate2's OpenMP threads spin while waiting unless told otherwise; read at its import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="A .keras model file or a run directory.")
    parser.add_argument("--input", required=True, help="Source sentences, one per line.")
    parser.add_argument("--references", help="Reference translations for sacreBLEU (optional).")
    parser.add_argument("--beam-size", type=int, default=4, help="Beam size (paper: 4).")
    parser.add_argument("--alpha", type=float, default=0.6, help="Length penalty (paper: 0.6).")
    parser.add_argument(
        "--max-extra-length", type=int, default=50, help="Output tokens beyond the source's."
    )
    parser.add_argument("--batch-size", type=int, default=32, help="Sentences per batch.")
    parser.add_argument(
        "--threads", type=int, default=2,
        help="CTranslate2's threads: timed as intra_threads and as inter_threads.",
    )  # fmt: skip
    parser.add_argument("--repeats", type=int, default=2, help="Timed rounds of every decoder.")
    parser.add_argument(
        "--keep-settled-rows", action="store_true",
        help="Also time ours with settled sources kept in the loop (drop_settled=False), the "
        "reference for dropping them.",
    )  # fmt: skip
    parser.add_argument(
        "--stock-top-k", action="store_true",
        help="Also time ours with Keras' own top_k over the vocabulary (the blocked_top_k fast "
        "form of keras_transformer.backend off), the reference for that form.",
    )  # fmt: skip
    parser.add_argument(
        "--batch-tokens", type=int, nargs="*", default=[], metavar="N",
        help="Also time ours in batches of at most N sentences x padded length instead of "
        "--batch-size sentences; 0: the backend's default bound (what `keras-transformer "
        "translate` uses).",
    )  # fmt: skip
    return parser.parse_args()


def read_lines(path, argument):
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read().splitlines()
    except OSError as error:
        sys.exit(f"error: {argument} {path}: {error.strerror}")


def timed_in_turns(functions, repeats):
    """Times `functions` (name -> callable) in rounds, so that a machine's drift hits all alike.

    Each runs once untimed (compilation, warm-up), then once in each of `repeats` rounds; the
    order turns from round to round. A shared VM's speed drifts by tens of percent within
    minutes, so decoders timed one after the other compare badly.

    Returns:
        `(timings, outputs)`: each name's seconds, one per round, and its untimed output.
    """
    outputs = {name: function() for name, function in functions.items()}
    names = list(functions)
    timings = {name: [] for name in names}
    for round_index in range(repeats):
        turn = round_index % len(names)
        for name in names[turn:] + names[:turn]:
            start = time.perf_counter()
            functions[name]()
            timings[name].append(time.perf_counter() - start)
    return timings, outputs


def speed_figures(timings, base="ours"):
    """Each name's (best seconds, median seconds, median of its per-round speed-ups on `base`)."""
    return {
        name: (
            min(values),
            statistics.median(values),
            statistics.median(b / v for b, v in zip(timings[base], values, strict=True)),
        )
        for name, values in timings.items()
    }


def main():
    args = parse_args()
    sources = read_lines(args.input, "--input")
    references = read_lines(args.references, "--references") if args.references else None
    if references is not None and len(references) != len(sources):
        sys.exit(
            f"error: --references {args.references} has {len(references)} lines, "
            f"--input {args.input} {len(sources)}"
        )
    import keras
    import sacrebleu
    import sentencepiece as spm

    from keras_transformer import backend
    from keras_transformer.decoding import Translator
    from keras_transformer.export import export_ctranslate2
    from keras_transformer.export.ctranslate2_export import import_ctranslate2
    from keras_transformer.export.load_translation_model import load_translation_model
    from keras_transformer.utils.run_directory import resolve_model_file

    ctranslate2 = import_ctranslate2()
    try:
        model_file = resolve_model_file(args.model, "translate_speed")
    except ValueError as error:
        sys.exit(f"error: --model {error}")
    model, tokenizer = load_translation_model(model_file)
    print(
        f"backend={keras.backend.backend()} ctranslate2={ctranslate2.__version__} "
        f"sentences={len(sources)} beam={args.beam_size} alpha={args.alpha} "
        f"batch={args.batch_size} ctranslate2 threads={args.threads} (intra_threads, or "
        f"inter_threads: inter) "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} "
        f"CT2_USE_MKL={os.environ.get('CT2_USE_MKL')}"
    )
    settings = {
        "beam_size": args.beam_size,
        "alpha": args.alpha,
        "max_extra_length": args.max_extra_length,
        "batch_size": args.batch_size,
    }
    # Ours, then the references asked for: (name, Translator arguments, fast forms off).
    variants = [("ours", {}, ())]
    if args.keep_settled_rows:
        variants.append(("ours, rows kept", {"drop_settled": False}, ()))
    if args.stock_top_k:
        variants.append(("ours, stock top_k", {}, ("blocked_top_k",)))
    for tokens in args.batch_tokens:
        name = f"ours, {tokens or 'default'} batch tokens"
        variants.append((name, {"batch_size": None, "batch_tokens": tokens or None}, ()))
    decoders = {}  # name -> a callable translating `sources`
    for name, arguments, disabled in variants:
        translator = Translator(model, tokenizer, **{**settings, **arguments})

        def translate(translator=translator, disabled=disabled):
            # Forms are read where a search is traced, in the untimed first pass.
            off = backend.fast_forms_disabled(disabled) if disabled else contextlib.nullcontext()
            with off:
                return translator.translate(sources, verbose=0)

        decoders[name] = translate
    with tempfile.TemporaryDirectory() as directory:
        path = export_ctranslate2(model, tokenizer, os.path.join(directory, "model"))
        processor = spm.SentencePieceProcessor(model_file=os.path.join(path, "vocabulary.model"))
        # Pieces without EOS: the export sets `add_source_eos`, CTranslate2 appends it.
        pieces = [processor.encode(sentence, out_type=str) for sentence in sources]
        # Ours stops at source length (EOS included) + max_extra_length tokens.
        limit = max(map(len, pieces)) + 1 + args.max_extra_length
        # Threads inside one batch (intra) or batches side by side (inter); small models
        # decode faster side by side.
        layouts = {"": (args.threads, 1), " inter": (1, args.threads)}
        for compute_type in ("float32", "int8"):
            for layout, (intra, inter) in layouts.items():
                engine = ctranslate2.Translator(
                    path, device="cpu", compute_type=compute_type, intra_threads=intra,
                    inter_threads=inter,
                )  # fmt: skip

                def run(engine=engine):
                    # One call: CTranslate2 sorts by length and cuts batches of max_batch_size.
                    results = engine.translate_batch(
                        pieces,
                        beam_size=args.beam_size,
                        length_penalty=args.alpha,
                        min_decoding_length=0,
                        max_decoding_length=limit,
                        max_batch_size=args.batch_size,
                    )
                    return [processor.decode(result.hypotheses[0]) for result in results]

                decoders[f"ctranslate2 {compute_type}{layout}"] = run
        timings, outputs = timed_in_turns(decoders, args.repeats)
    for name, (best, median, speed_up) in speed_figures(timings).items():
        same = sum(a == b for a, b in zip(outputs[name], outputs["ours"], strict=True))
        line = (
            f"{name:>25}: {len(sources) / best:8.2f} sentences/s (best {best:.2f}s, median "
            f"{median:.2f}s; {speed_up:.2f}x ours, the median of rounds); same translation as "
            f"ours: {same} of {len(sources)}"
        )
        if references is not None:
            line += f"; sacreBLEU {sacrebleu.corpus_bleu(outputs[name], [references]).score:.2f}"
        print(line)


if __name__ == "__main__":
    main()
