"""Training throughput and MFU of Seq2SeqTransformer against a keras-hub model of the same size.

Trains two models on the same fixed list of batches, on the same backend, and prints real
(non-padding) target tokens/s, model FLOPs utilization (MFU) and the ratio ours / keras-hub:

- ours: `keras_transformer.Seq2SeqTransformer`;
- keras-hub: the same architecture built from `keras_hub.layers.TransformerEncoder` /
  `TransformerDecoder` (post-LN, keras-hub's default `normalize_first=False`), one
  `ReversibleEmbedding` tied between source, target and the pre-softmax projection with its
  outputs scaled by sqrt(d_model), and `SinePositionEncoding`.

keras-hub's blocks have biases in the attention projections and apply their single `dropout`
rate to the attention weights too; ours is configured the same way (`attention_bias=True`,
`attention_dropout=dropout`) so that both models have the same parameters and do the same
computation (`--paper-attention` gives ours the paper's bias-free, dropout-free attention
instead). Both use `LabelSmoothedCrossEntropy` (eps 0.1), `paper_optimizer(d_model)` and
`train_on_batch` on identical batches. The two models alternate step by step (which goes
first alternating too), so machine noise hits both alike; a round is one pass over the
batches and the figures are medians over rounds (CPU-s: process CPU time, less sensitive
to other tenants of a shared machine than wall time). Every batch shape is compiled first.

Batches come from `make_translation_dataset` (token budget, length buckets) on the built-in
synthetic English-German corpus, or on `train.{SRC,TGT}` files with `--data-dir`. The
synthetic corpus supports about 3,600 BPE pieces, so there the tokenizer is capped at 2,000
pieces while the models keep `--vocabulary-size` rows (their cost depends on that size only).

Model FLOPs per training step are counted analytically from the padded batch shapes (the
matmuls a step actually runs, padding included), as 3x the forward matmul FLOPs (the backward
pass costs twice the forward), 2 FLOPs per multiply-add. With batch B, padded source length S
and target length T, width d, h heads of sizes d_k / d_v, inner size d_ff, vocabulary V and N
layers per stack, the forward pass costs

    encoder, per layer:  2 B S [d h (2 d_k + d_v) + h d_v d + 2 d d_ff] + 2 B h S^2 (d_k + d_v)
    decoder, per layer:  2 B T [d h (2 d_k + d_v) + h d_v d + 2 d d_ff]  + 2 B h T^2 (d_k + d_v)
                       + 2 B T [d h d_k + h d_v d] + 2 B S d h (d_k + d_v)
                       + 2 B h T S (d_k + d_v)
    output projection:   2 B T d V

(projections; attention scores and context, causal positions included; cross-attention
queries/outputs and keys/values; the tied pre-softmax projection). Biases, LayerNorm,
softmax, dropout and the loss are not counted: MFU = model FLOPs/s / peak FLOP/s. The peak
is a large square matmul (float32; bfloat16 with `--dtype bfloat16`) compiled with
`jax.jit` / `tf.function(jit_compile=True)` and timed once per training round; the best
round is the peak (on a shared machine the median mostly measures the other tenants).

    python benchmarks/training_throughput.py
    KERAS_BACKEND=jax python benchmarks/training_throughput.py
    python benchmarks/training_throughput.py --data-dir data/multi30k
    python benchmarks/training_throughput.py --preset base --dtype bfloat16  # GPU
    KERAS_BACKEND=torch python benchmarks/training_throughput.py --baseline torch
    KERAS_BACKEND=jax python benchmarks/training_throughput.py --profile /tmp/profile

`--baseline torch` (KERAS_BACKEND=torch) replaces the keras-hub model with a plain PyTorch
`torch.nn.Transformer` of the same size trained on the same batches
(`benchmarks/torch_baseline.py`); its target is ours >= 1.0x on a CPU in float32.
"""

import argparse
import math
import os
import statistics
import sys
import time

SIZES = {"num_layers": 2, "d_model": 512, "num_heads": 8, "intermediate_dim": 2048}


def add_model_arguments(parser):
    """The data, model and batch arguments, shared with benchmarks/fast_forms.py."""
    parser.add_argument("--data-dir", default=None, help="Folder with train.{SRC,TGT} files.")
    parser.add_argument("--source-language", default="en", help="Source file suffix.")
    parser.add_argument("--target-language", default="de", help="Target file suffix.")
    parser.add_argument("--synthetic-pairs", type=int, default=20000, help="Generated pairs.")
    parser.add_argument("--preset", default=None, help='Model preset, e.g. "base" (6+6 layers).')
    parser.add_argument("--num-layers", type=int, default=None, help="N (default 2).")
    parser.add_argument("--d-model", type=int, default=None, help="d_model (default 512).")
    parser.add_argument("--num-heads", type=int, default=None, help="h (default 8).")
    parser.add_argument("--intermediate-dim", type=int, default=None, help="d_ff (default 2048).")
    parser.add_argument("--dropout", type=float, default=None, help="P_drop (default 0.1).")
    parser.add_argument("--vocabulary-size", type=int, default=8000, help="Model vocabulary.")
    parser.add_argument("--paper-attention", action="store_true", help="See the docstring.")
    parser.add_argument("--token-budget", type=int, default=1024, help="Tokens per batch.")
    parser.add_argument("--bucket-growth", type=float, default=1.1, help="Bucket ratio.")
    parser.add_argument("--max-length", type=int, default=128, help="Longest pair kept.")
    parser.add_argument("--num-batches", type=int, default=8, help="Batches per round.")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument(
        "--jit-compile", default="auto", choices=["auto", "true", "false"],
        help='model.compile(jit_compile=...); "auto" is off on CPU-only TensorFlow.',
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="Seed of data and weights.")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--rounds", type=int, default=5, help="Timed passes over the batches.")
    parser.add_argument("--peak-size", type=int, default=2048, help="Side of the peak matmul.")
    parser.add_argument(
        "--baseline", default="keras-hub", choices=["keras-hub", "torch"],
        help="torch: a plain torch.nn.Transformer (benchmarks/torch_baseline.py); needs "
        "KERAS_BACKEND=torch.",
    )  # fmt: skip
    parser.add_argument(
        "--save-batches", metavar="FILE",
        help="Write the batches (and --vocabulary-size) to FILE (.npz) and stop: where "
        "TensorFlow is missing (a GPU machine with JAX or torch only), --batches reads them.",
    )  # fmt: skip
    parser.add_argument(
        "--batches", metavar="FILE",
        help="Time on the batches --save-batches wrote, with their vocabulary size, instead "
        "of building them (no tf.data, so no TensorFlow needed).",
    )  # fmt: skip
    parser.add_argument(
        "--profile", metavar="DIR",
        help="After timing, profile ours on the batches into DIR and print the operations "
        "that took the most time (benchmarks/step_profile.py).",
    )  # fmt: skip
    return parser.parse_args()


def load_corpus(args):
    from keras_transformer.synthetic import generate_synthetic_pairs
    from keras_transformer.text import ParallelCorpus

    if args.data_dir is None:
        english, german = generate_synthetic_pairs(args.synthetic_pairs, seed=args.seed)
        return ParallelCorpus(tuple(english), tuple(german)), min(args.vocabulary_size, 2000)
    paths = [
        os.path.join(args.data_dir, f"train.{language}")
        for language in (args.source_language, args.target_language)
    ]
    for path in paths:
        if not os.path.exists(path):
            sys.exit(f"error: {path} does not exist (--data-dir {args.data_dir})")
    return ParallelCorpus.from_files(*paths), args.vocabulary_size


def fixed_batches(args):
    """The first `--num-batches` batches of the bucketed pipeline, as numpy arrays."""
    from keras_transformer.data import make_translation_dataset
    from keras_transformer.text import train_vocabulary

    corpus, tokenizer_size = load_corpus(args)
    tokenizer = train_vocabulary(corpus, tokenizer_size, seed=args.seed, max_sentences=40000)
    train = make_translation_dataset(
        corpus,
        tokenizer,
        token_budget=args.token_budget,
        bucket_growth=args.bucket_growth,
        max_length=args.max_length,
        seed=args.seed,
    )
    batches = []
    for inputs, labels in train.dataset.take(args.num_batches):
        inputs = {key: value.numpy() for key, value in inputs.items()}
        batches.append((inputs, labels.numpy()))
    return batches


def save_batches(path, batches, vocabulary_size):
    """Writes `batches` (pairs of an inputs dict and labels) to one .npz file."""
    import numpy as np

    arrays = {"vocabulary_size": np.asarray(vocabulary_size)}
    for index, (inputs, labels) in enumerate(batches):
        arrays.update({f"{index}/inputs/{key}": value for key, value in inputs.items()})
        arrays[f"{index}/labels"] = labels
    np.savez(path, **arrays)


def load_batches(path):
    """The batches and vocabulary size `save_batches` wrote to `path`."""
    import numpy as np

    with np.load(path) as arrays:
        count = 1 + max(int(key.split("/")[0]) for key in arrays.files if "/" in key)
        batches = []
        for index in range(count):
            prefix = f"{index}/inputs/"
            inputs = {
                key[len(prefix) :]: arrays[key] for key in arrays.files if key.startswith(prefix)
            }
            batches.append((inputs, arrays[f"{index}/labels"]))
        return batches, int(arrays["vocabulary_size"])


def model_config(args):
    from keras_transformer import TransformerConfig
    from keras_transformer.models.presets import get_preset

    sizes = {
        name: getattr(args, name) for name in (*SIZES, "dropout") if getattr(args, name) is not None
    }
    if args.preset is None:
        config = TransformerConfig(args.vocabulary_size, **{**SIZES, **sizes})
    else:
        config = get_preset(args.preset).config(args.vocabulary_size, **sizes)
    if not args.paper_attention:
        config = config.replace(attention_bias=True, attention_dropout=config.dropout)
    return config


def keras_hub_model(config):
    """The same architecture from keras-hub layers, as a functional model."""
    import keras
    import keras_hub
    from keras import ops

    encoder_ids = keras.Input((None,), dtype="int32", name="encoder_token_ids")
    decoder_ids = keras.Input((None,), dtype="int32", name="decoder_token_ids")
    embedding = keras_hub.layers.ReversibleEmbedding(
        config.vocabulary_size,
        config.d_model,
        tie_weights=True,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=config.d_model**-0.5),
        name="token_embedding",
    )
    scale = math.sqrt(config.d_model)

    def embed(ids, name):
        sequence = embedding(ids) * scale  # (batch, length, d_model)
        sequence = sequence + keras_hub.layers.SinePositionEncoding()(sequence)
        return keras.layers.Dropout(config.dropout, name=f"{name}_dropout")(sequence)

    layer_args = {
        "intermediate_dim": config.intermediate_dim,
        "num_heads": config.num_heads,
        "dropout": config.dropout,
        "layer_norm_epsilon": config.layer_norm_epsilon,
        "normalize_first": config.normalize_first,
    }
    encoder_mask = ops.not_equal(encoder_ids, config.pad_id)  # (batch, source_length)
    sequence = embed(encoder_ids, "source")
    for i in range(config.num_layers):
        sequence = keras_hub.layers.TransformerEncoder(**layer_args, name=f"encoder_{i}")(
            sequence, padding_mask=encoder_mask
        )
    encoded = sequence
    sequence = embed(decoder_ids, "target")
    for i in range(config.num_layers):
        sequence = keras_hub.layers.TransformerDecoder(**layer_args, name=f"decoder_{i}")(
            sequence, encoded, encoder_padding_mask=encoder_mask
        )
    logits = ops.cast(embedding(sequence, reverse=True), "float32")  # (batch, length, vocab)
    return keras.Model(
        {"encoder_token_ids": encoder_ids, "decoder_token_ids": decoder_ids},
        logits,
        name="keras_hub_transformer",
    )


def step_flops(config, batch_size, source_length, target_length):
    """Model FLOPs of one training step on a padded batch (see the docstring)."""
    d, h, d_ff, vocabulary = (
        config.d_model,
        config.num_heads,
        config.intermediate_dim,
        config.vocabulary_size,
    )
    d_k, d_v = config.head_key_dim, config.head_value_dim
    b, s, t = batch_size, source_length, target_length
    self_projections = d * h * (2 * d_k + d_v) + h * d_v * d + 2 * d * d_ff  # per position
    encoder = 2 * b * s * self_projections + 2 * b * h * s * s * (d_k + d_v)
    decoder = (
        2 * b * t * self_projections
        + 2 * b * h * t * t * (d_k + d_v)
        + 2 * b * t * (d * h * d_k + h * d_v * d)  # cross-attention queries and outputs
        + 2 * b * s * d * h * (d_k + d_v)  # cross-attention keys and values
        + 2 * b * h * t * s * (d_k + d_v)  # cross-attention scores and context
    )
    forward = config.num_layers * (encoder + decoder) + 2 * b * t * d * vocabulary
    return 3 * forward


def compile_function(function):
    import keras

    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(function)
    if keras.backend.backend() == "torch":
        return function  # eager: one torch matmul, nothing to compile
    import tensorflow as tf

    return tf.function(function, jit_compile=True)


def make_peak_block(size, dtype, repeats=4):
    """A function timing `repeats` (size x size) matmuls; returns FLOP/s."""
    import keras
    from keras import ops

    a = keras.random.normal((size, size), seed=1, dtype=dtype)
    b = keras.random.normal((size, size), seed=2, dtype=dtype)
    matmul = compile_function(ops.matmul)  # nothing fused into it: a plain GEMM

    def run():
        # Reading one element back (outside the compiled function) waits for the product.
        ops.convert_to_numpy(matmul(a, b)[:1, :1])

    run()  # compiles

    def block():
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        return repeats * 2 * size**3 / (time.perf_counter() - start)

    return block


def train_step_seconds(model, inputs, labels):
    """Wall and process CPU seconds of one `train_on_batch` (synchronous: it returns floats)."""
    start, start_cpu = time.perf_counter(), time.process_time()
    model.train_on_batch(inputs, labels)
    return time.perf_counter() - start, time.process_time() - start_cpu


def main():
    args = parse_args()
    import keras

    from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, paper_optimizer

    if args.baseline == "torch" and keras.backend.backend() != "torch":
        backend = keras.backend.backend()
        sys.exit(f"error: --baseline torch needs KERAS_BACKEND=torch; got KERAS_BACKEND={backend}")
    if args.dtype == "bfloat16":
        keras.config.set_dtype_policy("mixed_bfloat16")
    jit_compile = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
    if args.batches:
        if not os.path.isfile(args.batches):
            sys.exit(f"error: --batches {args.batches} does not exist (see --save-batches)")
        batches, args.vocabulary_size = load_batches(args.batches)
        batches = batches[: args.num_batches]
    else:
        batches = fixed_batches(args)
    if args.save_batches:
        save_batches(args.save_batches, batches, args.vocabulary_size)
        print(f"{len(batches)} batches written to {args.save_batches}", file=sys.stderr)
        return
    config = model_config(args)
    real_tokens = sum(int((labels != config.pad_id).sum()) for _, labels in batches)
    padded_tokens = sum(labels.size for _, labels in batches)
    flops = sum(
        step_flops(config, *inputs["encoder_token_ids"].shape, labels.shape[1])
        for inputs, labels in batches
    )
    shapes = sorted({labels.shape for _, labels in batches})

    keras.utils.set_random_seed(args.seed)
    if args.baseline == "torch":
        import torch
        from torch_baseline import TorchTransformer

        torch.manual_seed(args.seed)
        baseline = TorchTransformer(config, dtype=args.dtype, max_length=args.max_length + 8)
    else:
        baseline = keras_hub_model(config)
    models = {"ours": Seq2SeqTransformer(config), args.baseline: baseline}
    for name, model in models.items():
        keras_model = isinstance(model, keras.Model)
        if keras_model:
            model.compile(
                optimizer=paper_optimizer(config.d_model),
                loss=LabelSmoothedCrossEntropy(label_smoothing=0.1),
                jit_compile=jit_compile,
            )
        start = time.perf_counter()
        model.train_on_batch(*batches[0])
        params = model.count_params()
        for inputs, labels in batches[1:]:  # compiles every shape
            model.train_on_batch(inputs, labels)
        print(
            f"{name}: {params / 1e6:.2f}M parameters, "
            f"policy={model.dtype_policy.name if keras_model else args.dtype}, "
            f"jit_compile={model.jit_compile if keras_model else False}, "
            f"warm-up {time.perf_counter() - start:.1f}s"
        )
    peak_dtype = "bfloat16" if args.dtype == "bfloat16" else "float32"
    peak_block = make_peak_block(args.peak_size, peak_dtype)

    print(
        f"backend={keras.backend.backend()} dtype={args.dtype} cpus={os.cpu_count()} "
        f"layers={config.num_layers} d_model={config.d_model} heads={config.num_heads} "
        f"d_ff={config.intermediate_dim} vocabulary={config.vocabulary_size} "
        f"dropout={config.dropout} attention_bias={config.attention_bias} "
        f"attention_dropout={config.attention_dropout}"
    )
    print(
        f"{len(batches)} batches (shapes {', '.join(f'{b}x{t}' for b, t in shapes)}), "
        f"{real_tokens} real target tokens ({real_tokens / padded_tokens:.3f} of padded), "
        f"{flops / 1e9:.1f} model GFLOPs per pass"
    )
    seconds = {name: [] for name in models}
    cpu_seconds = {name: [] for name in models}
    peaks = []
    for round_index in range(args.rounds):
        wall, cpu = dict.fromkeys(models, 0.0), dict.fromkeys(models, 0.0)
        for step, (inputs, labels) in enumerate(batches):
            order = list(models) if (round_index + step) % 2 == 0 else list(reversed(models))
            for name in order:
                step_wall, step_cpu = train_step_seconds(models[name], inputs, labels)
                wall[name] += step_wall
                cpu[name] += step_cpu
        for name in models:
            seconds[name].append(wall[name])
            cpu_seconds[name].append(cpu[name])
        peaks.append(peak_block())
    peak = max(peaks)  # the best the contended machine gave

    print()
    print(
        f"peak: {peak / 1e9:.1f} GFLOP/s ({peak_dtype} {args.peak_size}^2 matmul, best of "
        f"{len(peaks)}; median {statistics.median(peaks) / 1e9:.1f})"
    )
    print("| model | target tokens/s | ms / step | CPU-s / step | model TFLOP/s | MFU |")
    print("|---|---|---|---|---|---|")
    rates = {}
    for name in models:
        median = statistics.median(seconds[name])
        rates[name] = real_tokens / median
        achieved = flops / median
        print(
            f"| {name} | {rates[name]:,.0f} | {1000 * median / len(batches):.0f} | "
            f"{statistics.median(cpu_seconds[name]) / len(batches):.2f} | "
            f"{achieved / 1e12:.3f} | {achieved / peak:.1%} |"
        )
    base = args.baseline
    ratios = [hub / ours for ours, hub in zip(seconds["ours"], seconds[base], strict=True)]
    cpu_ratio = statistics.median(cpu_seconds[base]) / statistics.median(cpu_seconds["ours"])
    target = 1.0 if base == "torch" else 1.15
    # Each round's ratio compares the builds under the same load (their steps alternate);
    # its median is the paired figure. The headline divides the two medians over rounds.
    print(
        f"ours / {base} tokens/s: {rates['ours'] / rates[base]:.2f}x "
        f"(per round: {', '.join(f'{r:.2f}' for r in ratios)}, "
        f"median {statistics.median(ratios):.2f}; target >= {target}x); "
        f"per CPU-second: {cpu_ratio:.2f}x"
    )
    if args.profile:
        from step_profile import profile_steps

        print()
        profile_steps(models["ours"], batches, args.profile)


if __name__ == "__main__":
    main()
