"""What each fast form of `keras_transformer.backend` saves of a training step.

Trains the model of benchmarks/training_throughput.py (same arguments, same batches) once with
every fast form on, once with each form that applies on this backend and device turned off in
turn, and once with all of them off: one `Seq2SeqTransformer` per setting, all in one process,
built and traced under `backend.fast_forms_disabled`. Their steps alternate on the same batch
(which goes first rotating), so machine noise hits all alike. For each form it prints the step
time with the form off over the time with it on (the median of the per-step ratios, each on the
same batch) and whether the form saves at least 3% of a training step (`1 - on / off >= 3%`).
Forms that do not apply here (docs/architecture.md), and decoding's (`translate_speed.py
--stock-top-k` times those), are not run. Run it alone on the machine:

    python benchmarks/fast_forms.py --steps 40
    KERAS_BACKEND=jax python benchmarks/fast_forms.py --steps 40
    python benchmarks/fast_forms.py --steps 40 --jit-compile true  # TensorFlow's XLA forms
"""

import argparse
import statistics
import time

import training_throughput

SAVING = 0.03  # the least saving of a step that keeps a form


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    training_throughput.add_model_arguments(parser)
    parser.add_argument("--steps", type=int, default=40, help="Timed steps per setting.")
    return parser.parse_args()


def settings(applicable):
    """`(label, disabled names)`: all on, each applicable form off, all off."""
    runs = [("all on", ())]
    runs += [(f"{name} off", (name,)) for name in applicable]
    if len(applicable) > 1:
        runs.append(("all off", ("none",)))
    return runs


def build(config, args, disabled, batches):
    """A compiled model whose layers, loss and optimizer took their forms without `disabled`."""
    import keras

    from keras_transformer import (
        LabelSmoothedCrossEntropy,
        Seq2SeqTransformer,
        backend,
        paper_optimizer,
    )

    jit_compile = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
    keras.utils.set_random_seed(args.seed)  # the same initial weights in every setting
    with backend.fast_forms_disabled(disabled):
        model = Seq2SeqTransformer(config)
        model.compile(
            optimizer=paper_optimizer(config.d_model),
            loss=LabelSmoothedCrossEntropy(label_smoothing=0.1),
            jit_compile=jit_compile,
        )
        for inputs, labels in batches:  # traces every batch shape under the setting
            model.train_on_batch(inputs, labels)
    return model


def main():
    args = parse_args()
    import keras

    from keras_transformer import backend

    if args.dtype == "bfloat16":
        keras.config.set_dtype_policy("mixed_bfloat16")
    batches = training_throughput.fixed_batches(args)
    config = training_throughput.model_config(args)
    probe = build(config, args, (), batches[:1])
    applicable = backend.applicable_forms(xla=bool(probe.jit_compile), decoding=False)
    del probe
    if not applicable:
        print(f"backend={keras.backend.backend()}: no fast form applies, the stock Keras ops run")
        return
    runs = settings(applicable)
    models = {}
    for label, disabled in runs:
        start = time.perf_counter()
        models[label] = build(config, args, disabled, batches)
        print(f"{label}: built and traced in {time.perf_counter() - start:.1f}s", flush=True)
    print(
        f"backend={keras.backend.backend()} accelerator={backend.on_accelerator()} "
        f"dtype={args.dtype} jit_compile={models['all on'].jit_compile} "
        f"layers={config.num_layers} d_model={config.d_model} vocabulary="
        f"{config.vocabulary_size}; forms here: {', '.join(applicable) or 'none'}"
    )
    # An untimed pass: each build reseeds, and TensorFlow retraces a function when its
    # global seed changed since the last trace.
    for label, disabled in runs:
        with backend.fast_forms_disabled(disabled):
            for inputs, labels in batches:
                models[label].train_on_batch(inputs, labels)
    seconds = {label: [] for label, _ in runs}
    for step in range(args.steps):
        inputs, labels = batches[step % len(batches)]
        shift = step % len(runs)
        for label, disabled in runs[shift:] + runs[:shift]:
            with backend.fast_forms_disabled(disabled):  # torch builds its graph every step
                wall, _ = training_throughput.train_step_seconds(models[label], inputs, labels)
            seconds[label].append(wall)

    on = seconds["all on"]
    print(f"\nall on: {1000 * statistics.median(on):.1f} ms / step (median of {args.steps})")
    print("| forms off | ms / step | off / on | saves >= 3% |")
    print("|---|---|---|---|")
    for label, _ in runs[1:]:
        ratio = statistics.median(off / base for off, base in zip(seconds[label], on, strict=True))
        saving = 1 - 1 / ratio
        print(
            f"| {label.removesuffix(' off')} | {1000 * statistics.median(seconds[label]):.1f} "
            f"| {ratio:.3f} | {'yes' if saving >= SAVING else 'no'} ({saving:+.1%}) |"
        )


if __name__ == "__main__":
    main()
