"""How fast the commands answer `--help` and a bad argument, against importing TensorFlow.

Before the commands parsed their arguments without a backend, each of these answers paid for
`import tensorflow` first; that import, timed in the same run, is the baseline. Each case
runs `--repeats` times in a fresh process; the median is printed with the baseline's ratio.

    python benchmarks/command_startup.py --repeats 5
"""

import argparse
import statistics
import subprocess
import sys
import time

CASES = [
    ["--help"],
    ["translate", "--help"],
    ["train", "--help"],
    ["evaluate", "--no-such-flag"],
    ["translate", "--model", "absent.keras"],
    ["import", "marian", "absent-folder", "--output", "x.keras"],
]


def seconds(command, repeats):
    """Median wall time of `command` in a fresh process, over `repeats` runs."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="Runs per case (median).")
    args = parser.parse_args(argv)
    baseline = seconds([sys.executable, "-c", "import tensorflow"], args.repeats)
    print(f"baseline: import tensorflow  {baseline:.2f} s")
    for case in CASES:
        command = [sys.executable, "-m", "keras_transformer", *case]
        taken = seconds(command, args.repeats)
        label = "keras-transformer " + " ".join(case)
        print(f"{label:<62} {taken:.2f} s  ({baseline / taken:.0f}x faster than the baseline)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
