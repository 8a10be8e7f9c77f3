"""A command's wall time with and without Python's garbage collections at exit.

The command-line entry points freeze the objects still alive when the process exits
(`keras_transformer/utils/process_exit.py`), so that the interpreter's shutdown does not walk
the millions of objects TensorFlow, Keras and a traced model leave. The baseline is the same
command with Python's own exit (the freeze replaced by nothing). Each round runs both
variants in fresh processes, in alternating order: `keras-transformer train --recipe
quickstart` for `--max-steps` updates, then `keras-transformer translate` of the run's test
sentences (with `--run-dir`, only the translation, of that run's model). The medians are
printed with their ratio; the script exits with an error unless both variants' translations
are byte-identical and both trained runs reached their last step.

    python benchmarks/command_exit.py
    KERAS_BACKEND=jax python benchmarks/command_exit.py --repeats 5
    python benchmarks/command_exit.py --run-dir runs/quickstart
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

VARIANTS = ("ours (frozen at exit)", "Python's own exit")
# `keras-transformer`'s entry point; the baseline runs it with the freeze replaced by nothing.
ENTRY_POINT = "import sys\nfrom keras_transformer.cli import main\nsys.exit(main())\n"
PYTHON_EXIT = (
    "import keras_transformer.utils.process_exit as process_exit\n"
    "process_exit.skip_collection_at_exit = lambda: None\n"
)
# A one-layer width-32 model (--tiny), for a quick check of the script itself.
TINY_MODEL = ("--model-override", "num_layers=1", "--model-override", "d_model=32",
              "--model-override", "num_heads=2", "--model-override", "intermediate_dim=64",
              "--synthetic-sizes", "400", "10", "12", "--vocabulary-size", "300")  # fmt: skip


def timed(variant, arguments, cwd):
    """Runs `keras-transformer ARGUMENTS` as `variant`; returns its wall time in seconds."""
    code = ENTRY_POINT if variant == VARIANTS[0] else PYTHON_EXIT + ENTRY_POINT
    command = [sys.executable, "-c", code, *arguments]
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    taken = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"error: {variant}: keras-transformer {arguments[0]} failed:\n"
                 f"{result.stderr[-3000:]}")  # fmt: skip
    return taken


def last_step(run):
    with open(os.path.join(run, "train_log.csv"), encoding="utf-8") as log:
        return int(log.read().split()[-1].split(",")[0])


def measure(args, work):
    """Both variants' wall times per command, and each variant's translations (bytes)."""
    commands = ("translate",) if args.run_dir else ("train", "translate")
    times = {(command, name): [] for command in commands for name in VARIANTS}
    for repeat in range(args.repeats):
        for name in VARIANTS if repeat % 2 == 0 else VARIANTS[::-1]:
            index = VARIANTS.index(name)
            run = args.run_dir or os.path.join(work, f"run-{index}-{repeat}")
            if not args.run_dir:
                train = ["train", "--recipe", "quickstart", "--output-dir", run, "--max-steps",
                         str(args.max_steps), "--no-export", "--verbose", "0",
                         *(TINY_MODEL if args.tiny else ())]  # fmt: skip
                times["train", name].append(timed(name, train, work))
                if last_step(run) != args.max_steps:
                    sys.exit(f"error: {name}: the run stopped at step {last_step(run)}")
            # Both variants translate with the same model: the first run's, or --run-dir's.
            translate = ["translate", "--run-dir", args.run_dir or os.path.join(work, "run-0-0"),
                         "--input", args.input or os.path.join(run, "data", "test.en"),
                         "--output", os.path.join(work, f"translations-{index}")]  # fmt: skip
            times["translate", name].append(timed(name, translate, work))
    outputs = []
    for index in range(len(VARIANTS)):
        with open(os.path.join(work, f"translations-{index}"), "rb") as file:
            outputs.append(file.read())
    return times, outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="Rounds (median).")
    parser.add_argument("--max-steps", type=int, default=20, help="Updates of each training.")
    parser.add_argument("--tiny", action="store_true", help="A one-layer width-32 model.")
    parser.add_argument("--run-dir", help="A trained run: only `translate` is timed, its model.")
    parser.add_argument("--input", help="Sentences to translate. Default: the run's test.en.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        times, outputs = measure(args, work)
    if outputs[0] != outputs[1]:
        sys.exit("error: the two variants' translations differ")
    import keras

    sentences = outputs[0].count(b"\n")
    trained = args.run_dir if args.run_dir else f"quickstart{' (tiny)' if args.tiny else ''}"
    steps = "" if args.run_dir else f" train steps={args.max_steps}"
    print(f"backend={keras.backend.backend()} {trained}{steps} translate sentences={sentences} "
          f"fresh processes per variant={args.repeats}")  # fmt: skip
    commands = sorted({command for command, _ in times}, reverse=True)
    for command in commands:
        medians = {name: statistics.median(times[command, name]) for name in VARIANTS}
        for name in VARIANTS:
            listed = ", ".join(f"{value:.2f}" for value in times[command, name])
            print(f"{command:>9} {name:>22}: median {medians[name]:.2f} s ({listed})")
        ours, python = medians[VARIANTS[0]], medians[VARIANTS[1]]
        print(
            f"{command:>9}: Python's own exit / ours {python / ours:.2f}x "
            f"({python - ours:.2f} s saved)"
        )
    print("same translations from both variants" + ("" if args.run_dir else
          "; both runs reached their last step"))  # fmt: skip


if __name__ == "__main__":
    main()
