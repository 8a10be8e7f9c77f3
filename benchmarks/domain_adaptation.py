"""Domain adaptation of the quickstart model: full fine-tuning, LoRA ranks, a frozen encoder.

Trains the quickstart recipe's model on the generated statements (or takes `--base`), then
adapts it to the second generated domain, polite requests
(`generate_synthetic_pairs(domain="requests")`), in each of the `--variants`, all with the
same steps, warmup and data (`keras-transformer train --init-from BASE ...`):

- `full`: every weight trained (`--learning-rate-scale --full-rate`);
- `loraR`: LoRA adapters of rank R on the default projections, W^Q and W^V
  (`--lora-rank R --learning-rate-scale --lora-rate`); `loraR-attention` on all four
  attention projections (`--lora-targets attention`);
- `frozen-encoder`: the encoder kept as it is (`--freeze encoder`, `--full-rate`).

For the base and each variant it prints, as a Markdown table: BLEU (sacreBLEU, greedy) on the
new domain's test split and on the old one's (forgetting), trainable parameters and their
share of the model, the adapter file's size and its share of the run's `model.keras` (the
merged model: weights and tokenizer, no optimizer state), and training steps per second
(from the run's train_log.csv, the first logged step left out). Then the targets: LoRA
rank 8 reaches >= 90% of the full fine-tuning's new-domain gain with <= 2% of the parameters
trainable and a file <= 3% of the model's, and loses less on the old domain.

Example:

    nice -n 19 python benchmarks/domain_adaptation.py --work-dir /tmp/adaptation
"""

import argparse
import csv
import json
import os
import sys

import sacrebleu

from keras_transformer import cli
from keras_transformer.synthetic import write_synthetic_corpus
from keras_transformer.text import read_lines

VARIANTS = ("full", "lora4", "lora8", "lora16", "lora8-attention", "frozen-encoder")


def lora_settings(variant):
    """`{"lora_rank", "lora_targets"}` of a `loraR` or `loraR-TARGETS` variant (no
    `lora_targets` for the default)."""
    rank, _, targets = variant.removeprefix("lora").partition("-")
    return {"lora_rank": int(rank), **({"lora_targets": targets} if targets else {})}


def train(*arguments):
    """`keras-transformer train ARGUMENTS` in this process; raises on a failure."""
    status = cli.main(["train", *map(str, arguments)])
    if status != 0:
        raise SystemExit(f"train {' '.join(map(str, arguments))}: exit status {status}")


def bleu(model, data_dir, work_dir, name, adapter=None):
    """sacreBLEU of greedy translations of `data_dir`'s test split."""
    output = os.path.join(work_dir, f"{name}.hyp")
    command = ["translate", "--model", model, "--input", os.path.join(data_dir, "test.en")]
    command += ["--output", output, "--beam-size", "1"]
    if adapter:
        command += ["--adapter", adapter]
    if cli.main(command) != 0:
        raise SystemExit(f"translate {' '.join(command)} failed")
    references = read_lines(os.path.join(data_dir, "test.de"))
    return sacrebleu.corpus_bleu(read_lines(output), [references]).score


def run_bleu(run):
    """The BLEU of a run's own test translations (scores.json)."""
    with open(os.path.join(run, "scores.json"), encoding="utf-8") as file:
        return json.load(file)["bleu"]


def steps_per_second(run):
    """Updates per second between the first and the last logged step of a run."""
    with open(os.path.join(run, "train_log.csv"), encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    first, last = rows[0], rows[-1]
    steps = int(last["step"]) - int(first["step"])
    return steps / (float(last["elapsed_seconds"]) - float(first["elapsed_seconds"]))


def parameters(base, variant):
    """`(trainable, total)` parameters of `base` adapted as `variant` says."""
    from keras_transformer.experiment.adaptation import adapt_model, parameter_count
    from keras_transformer.experiment.settings.adaptation_config import AdaptationConfig
    from keras_transformer.export import load_translation_model

    model, _ = load_translation_model(base, compile=False)
    settings = AdaptationConfig()
    if variant.startswith("lora"):
        settings = AdaptationConfig(**lora_settings(variant))
    elif variant == "frozen-encoder":
        settings = AdaptationConfig(freeze=("encoder",))
    adapt_model(model, settings, verbose=0)
    return parameter_count(model.trainable_weights), parameter_count(model.weights)


def variant_flags(variant, arguments):
    if variant.startswith("lora"):
        settings = lora_settings(variant)
        flags = ["--lora-rank", settings["lora_rank"]]
        if "lora_targets" in settings:
            flags += ["--lora-targets", settings["lora_targets"]]
        return flags + ["--learning-rate-scale", arguments.lora_rate]
    flags = ["--learning-rate-scale", arguments.full_rate]
    return flags + (["--freeze", "encoder"] if variant == "frozen-encoder" else [])


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", required=True, help="Runs and data go here.")
    parser.add_argument("--base", help="A model file to adapt (else the quickstart trained).")
    parser.add_argument("--base-steps", type=int, default=650, help="The quickstart's: 650.")
    parser.add_argument("--sizes", type=int, nargs=3, default=(20000, 500, 500))
    parser.add_argument("--steps", type=int, default=150, help="Adaptation steps.")
    parser.add_argument("--warmup-steps", type=int, default=50)
    parser.add_argument("--full-rate", type=float, default=1.0, help="--learning-rate-scale")
    parser.add_argument("--lora-rate", type=float, default=2.0, help="... of LoRA runs")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=VARIANTS)
    parser.add_argument("--model-override", action="append", default=[], metavar="F=V")
    return parser.parse_args()


# Every run: no validation or SavedModel, the last weights, greedy test BLEU, a log line a step.
QUIET = ["--verbose", "0", "--no-validate", "--no-export", "--average-last", "1"]
QUIET += ["--beam-size", "1", "--metrics", "bleu", "--log-every-steps", "1"]


def prepare(arguments, work):
    """`(base model file, old domain's data folder, new domain's)`; the base trained first
    unless `--base` gives it (a run already in `work` is kept)."""
    base, old_data = arguments.base, os.path.join(work, "statements")
    if base is None:
        run = os.path.join(work, "base")
        base, old_data = os.path.join(run, "model.keras"), os.path.join(run, "data")
        overrides = [f"--model-override={value}" for value in arguments.model_override]
        if not os.path.exists(base):
            train(
                "--output-dir", run, "--max-steps", arguments.base_steps, "--synthetic-sizes",
                *arguments.sizes, "--checkpoint-every-steps", arguments.base_steps,
                *overrides, *QUIET,
            )  # fmt: skip
    train_size, valid_size, test_size = arguments.sizes
    if not os.path.exists(os.path.join(old_data, "test.en")):
        write_synthetic_corpus(old_data, train_size=1, valid_size=1, test_size=test_size, seed=2)
    new_data = os.path.join(work, "requests")
    if not os.path.exists(os.path.join(new_data, "train.en")):
        write_synthetic_corpus(
            new_data, train_size=train_size, valid_size=valid_size, test_size=test_size,
            seed=1, domain="requests",
        )  # fmt: skip
    return base, old_data, new_data


def adapted(variant, arguments, work, base, old_data, new_data):
    """The table row of one variant: its run trained first (a finished one is kept)."""
    run = os.path.join(work, variant)
    if not os.path.exists(os.path.join(run, "model.keras")):
        train(
            "--init-from", base, "--data-dir", new_data, "--output-dir", run,
            "--max-steps", arguments.steps, "--warmup-steps", arguments.warmup_steps,
            "--checkpoint-every-steps", arguments.steps, *variant_flags(variant, arguments),
            *QUIET,
        )  # fmt: skip
    adapter = os.path.join(run, "adapter.lora")
    return (
        variant,
        run_bleu(run),  # its test split: the new domain's, decoded greedily
        bleu(os.path.join(run, "model.keras"), old_data, work, f"{variant}-old"),
        parameters(base, variant)[0],
        os.path.getsize(adapter) if os.path.exists(adapter) else None,
        steps_per_second(run),
        os.path.getsize(os.path.join(run, "model.keras")),
    )


def main():
    arguments = parse_arguments()
    work = os.path.abspath(arguments.work_dir)
    base, old_data, new_data = prepare(arguments, work)
    model_bytes = os.path.getsize(base)
    _, total = parameters(base, "full")
    print("| variant | new BLEU | old BLEU | trainable | share | file | share | steps/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    new, old = bleu(base, new_data, work, "base-new"), bleu(base, old_data, work, "base-old")
    rows = [("base", new, old, 0, None, None, model_bytes)]
    print_row(rows[0], total)
    for variant in arguments.variants:
        rows.append(adapted(variant, arguments, work, base, old_data, new_data))
        print_row(rows[-1], total)
    report(rows, total, model_bytes)


def print_row(row, total):
    name, new, old, trainable, size, speed, model_bytes = row
    file = "-" if size is None else f"{size / 1024:.0f} KiB"
    file_share = "-" if size is None else f"{100 * size / model_bytes:.1f}%"
    rate = "-" if speed is None else f"{speed:.2f}"
    print(
        f"| {name} | {new:.1f} | {old:.1f} | {trainable:,} | {100 * trainable / total:.2f}% "
        f"| {file} | {file_share} | {rate} |",
        flush=True,
    )


def report(rows, total, model_bytes):
    found = {row[0]: row for row in rows}
    merged = f", lora8's merged {found['lora8'][6] / 1024:.0f} KiB" if "lora8" in found else ""
    kib = model_bytes / 1024
    print(f"\nModel: {total:,} parameters; model.keras: the base run's {kib:.0f} KiB{merged}.")
    if "full" in found and "lora8" in found:
        base, full, lora = found["base"], found["full"], found["lora8"]
        full_gain = full[1] - base[1]
        gain = (lora[1] - base[1]) / full_gain if full_gain > 0 else None
        lost, full_lost = base[2] - lora[2], base[2] - full[2]
        share = "full's gained nothing" if gain is None else f"{100 * gain:.0f}% of full's"
        checks = [
            (f"LoRA rank 8's new-domain gain: {share} (>= 90%)", gain is not None and gain >= 0.9),
            (
                f"trainable: {100 * lora[3] / total:.2f}% of the parameters (<= 2%)",
                lora[3] <= 0.02 * total,
            ),
            (
                f"adapter file: {100 * lora[4] / lora[6]:.1f}% of its model.keras (<= 3%)",
                lora[4] <= 0.03 * lora[6],
            ),
            (f"old domain: LoRA loses {lost:.1f}, full {full_lost:.1f} BLEU", lost < full_lost),
        ]
        for text, met in checks:
            print(f"{'met' if met else 'MISSED'}: {text}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
