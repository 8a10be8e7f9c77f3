"""Where a training step's time goes: a profiler trace of a few steps and its top operations.

`profile_steps(model, batches, directory)` trains `model` on `batches` under the backend's
profiler and prints the operations that took the most time, summed over the steps:

- JAX: `jax.profiler.trace` with a Perfetto trace; the summary reads its complete events
  (XLA ops and kernels on the device, or on the host threads on a CPU; Python frames left
  out), grouped by name, per process.
- torch: `torch.profiler`; the summary is its own table, sorted by device time on a GPU.
- TensorFlow: `tf.profiler.experimental` writes the trace for TensorBoard's profile plugin;
  no summary is printed.

    python benchmarks/step_profile.py trace_dir/  # summarises a JAX trace written before
"""

import collections
import glob
import gzip
import json
import os
import sys


def profile_steps(model, batches, directory, top=20):
    """Trains `model` once on each of `batches` under the profiler; prints the top ops."""
    import keras

    backend = keras.backend.backend()
    os.makedirs(directory, exist_ok=True)
    if backend == "jax":
        import jax

        with jax.profiler.trace(directory, create_perfetto_trace=True):
            for inputs, labels in batches:
                model.train_on_batch(inputs, labels)
        print(summarize_perfetto(directory, top))
    elif backend == "torch":
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as profiler:
            for inputs, labels in batches:
                model.train_on_batch(inputs, labels)
        key = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
        print(profiler.key_averages().table(sort_by=key, row_limit=top))
        profiler.export_chrome_trace(os.path.join(directory, "trace.json"))
    else:
        import tensorflow as tf

        tf.profiler.experimental.start(directory)
        for inputs, labels in batches:
            model.train_on_batch(inputs, labels)
        tf.profiler.experimental.stop()
        print(f"TensorFlow trace in {directory}: open it with TensorBoard's profile plugin")


def summarize_perfetto(directory, top=20):
    """The `top` event names by total duration in the newest Perfetto trace under `directory`.

    Returns a Markdown table: process, name, total ms, count, and the share of the
    process's summed event time (nested events count in their parents too).
    """
    found = sorted(
        glob.glob(os.path.join(directory, "**", "perfetto_trace.json.gz"), recursive=True),
        key=os.path.getmtime,
    )
    if not found:
        raise FileNotFoundError(f"no perfetto_trace.json.gz under {directory}")
    with gzip.open(found[-1], "rt", encoding="utf-8") as file:
        trace = json.load(file)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes = {
        event["pid"]: event.get("args", {}).get("name", str(event["pid"]))
        for event in events
        if event.get("ph") == "M" and event.get("name") == "process_name"
    }
    totals = collections.defaultdict(lambda: [0.0, 0])  # (process, name) -> [us, count]
    for event in events:
        # Python frames ("$file:line name") only wrap the operations.
        if event.get("ph") == "X" and "dur" in event and not event["name"].startswith("$"):
            entry = totals[processes.get(event["pid"], str(event["pid"])), event["name"]]
            entry[0] += float(event["dur"])
            entry[1] += 1
    per_process = collections.Counter()
    for (process, _), (duration, _) in totals.items():
        per_process[process] += duration
    rows = sorted(totals.items(), key=lambda item: -item[1][0])[:top]
    lines = ["| process | operation | total ms | count | share |", "|---|---|---|---|---|"]
    for (process, name), (duration, count) in rows:
        share = duration / per_process[process] if per_process[process] else 0.0
        lines.append(f"| {process} | {name[:80]} | {duration / 1e3:.1f} | {count} | {share:.1%} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/step_profile.py TRACE_DIR")
    print(summarize_perfetto(sys.argv[1]))
