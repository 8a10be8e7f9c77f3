"""Lexically constrained beam search against plain beam search: time and BLEU.

Translates the same sentences with plain beam search and with constrained beam search
(`Translator.translate(constraints=...)`, dynamic beam allocation), both with the same beam,
alpha, output limit and batches. The constraints are reference words: for each sentence, up to
`--terms` words of its reference (4 letters or more, longest first) that the plain beam
output lacks, which is how a glossary's terms reach a translation that misses them. Each
search translates the sentences once untimed (compilation), then once in each of `--repeats`
rounds, taking turns. Prints each search's median time, its sentences per second and
sacreBLEU, the share of phrases found in the constrained outputs, the constrained search's
time over plain beam's (the target is at most 2x) and its time without any phrase (the
search's own overhead).

The model is the quickstart's (`--model`, or trained into `--work-dir` as the quickstart
recipe trains it: 650 steps on 20,000 generated pairs), and the sentences its test split.

    nice -n 19 python benchmarks/constrained_decoding.py --work-dir /tmp/constrained
"""

import argparse
import os
import re
import statistics
import sys
import time

import sacrebleu

from keras_transformer import cli
from keras_transformer.text import read_lines


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", help="Where the quickstart model is trained (no --model).")
    parser.add_argument("--model", help="A .keras model file (else the quickstart, trained).")
    parser.add_argument("--input", help="Source sentences (default: the run's test split).")
    parser.add_argument("--references", help="Their references (default: the test split's).")
    parser.add_argument("--steps", type=int, default=650, help="The quickstart's: 650.")
    parser.add_argument("--sentences", type=int, default=200, help="Sentences translated.")
    parser.add_argument("--terms", type=int, default=2, help="Reference words per sentence.")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--max-extra-length", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3, help="Timed rounds.")
    arguments = parser.parse_args()
    if arguments.model is None and arguments.work_dir is None:
        parser.error("give --model or --work-dir")
    return arguments


def prepare(arguments):
    """`(model file, sources, references)`: the quickstart trained first unless --model."""
    model, data = arguments.model, None
    if model is None:
        run = os.path.join(arguments.work_dir, "quickstart")
        model, data = os.path.join(run, "model.keras"), os.path.join(run, "data")
        if not os.path.exists(model):
            status = cli.main([
                "train", "--output-dir", run, "--max-steps", str(arguments.steps),
                "--synthetic-sizes", "20000", "100", "200", "--no-validate", "--no-export",
                "--average-last", "1", "--verbose", "0", "--metrics", "bleu",
            ])  # fmt: skip
            if status != 0:
                raise SystemExit(f"training the quickstart model failed (exit status {status})")
    sources = arguments.input or os.path.join(data or "", "test.en")
    references = arguments.references or os.path.join(data or "", "test.de")
    count = arguments.sentences
    return model, read_lines(sources)[:count], read_lines(references)[:count]


def words(text):
    return re.findall(r"\w+", text)


def missing_terms(reference, hypothesis, count):
    """Up to `count` words of `reference` (4 letters or more) absent from `hypothesis`,
    longest first (then in reference order)."""
    present = set(words(hypothesis))
    candidates = [w for w in dict.fromkeys(words(reference)) if len(w) >= 4 and w not in present]
    return sorted(candidates, key=len, reverse=True)[:count]


def timed(translate, repeats):
    """Median seconds of `translate()` over `repeats` rounds, after one untimed call; and its
    output. The callables of `translate` take turns round by round."""
    outputs = {name: function() for name, function in translate.items()}
    times = {name: [] for name in translate}
    for _ in range(repeats):
        for name, function in translate.items():
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}, outputs


def main():
    arguments = parse_arguments()
    model_file, sources, references = prepare(arguments)
    import keras

    from keras_transformer.decoding import Translator
    from keras_transformer.export import load_translation_model

    model, tokenizer = load_translation_model(model_file, compile=False)
    settings = {"beam_size": arguments.beam_size, "max_extra_length": arguments.max_extra_length}
    plain = Translator(model, tokenizer, **settings)
    constrained = Translator(model, tokenizer, search="constrained", **settings)
    first = plain.translate(sources, verbose=0)
    terms = [missing_terms(r, h, arguments.terms) for r, h in zip(references, first, strict=True)]
    none = [[] for _ in sources]
    seconds, outputs = timed(
        {
            "plain beam": lambda: plain.translate(sources, verbose=0),
            "constrained": lambda: constrained.translate(sources, verbose=0, constraints=terms),
            "constrained, no phrases": lambda: constrained.translate(
                sources, verbose=0, constraints=none
            ),
        },
        arguments.repeats,
    )
    phrases = sum(map(len, terms))
    found = sum(
        t in output for ts, output in zip(terms, outputs["constrained"], strict=True) for t in ts
    )
    print(
        f"backend={keras.backend.backend()} sentences={len(sources)} beam={arguments.beam_size} "
        f"phrases={phrases} on {sum(bool(t) for t in terms)} sentences "
        f"repeats={arguments.repeats}"
    )
    for name, output in outputs.items():
        bleu = sacrebleu.corpus_bleu(output, [references]).score
        rate = len(sources) / seconds[name]
        print(f"{name}: {seconds[name]:.3f} s ({rate:.1f} sentences/s), BLEU {bleu:.2f}")
    print(f"phrases found in the constrained outputs: {found} of {phrases}")
    ratio = seconds["constrained"] / seconds["plain beam"]
    overhead = seconds["constrained, no phrases"] / seconds["plain beam"]
    print(
        f"time constrained / plain beam: {ratio:.2f}x (target <= 2x); no phrases: {overhead:.2f}x"
    )
    gain = (
        sacrebleu.corpus_bleu(outputs["constrained"], [references]).score
        - sacrebleu.corpus_bleu(outputs["plain beam"], [references]).score
    )
    print(f"BLEU with reference words as constraints - without: {gain:+.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
