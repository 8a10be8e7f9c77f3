"""The benchmark scripts: their FLOP count against the traced matmuls, and tiny end-to-end runs.

The figures in docs/performance.md come from these scripts; here they run on small generated
data so that a change to the library or to keras-hub that breaks them shows up in CI.
"""

import importlib.util
import math
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, only_under, small_config

from keras_transformer import Seq2SeqTransformer, TransformerConfig
from keras_transformer.synthetic import write_synthetic_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")
TINY_MODEL = ["--num-layers", "1", "--d-model", "32", "--num-heads", "2"]
TINY_MODEL += ["--intermediate-dim", "64", "--vocabulary-size", "500"]

jax_only = pytest.mark.skipif(keras.backend.backend() != "jax", reason="counts jaxpr matmuls")


def load_benchmark(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCHMARKS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_benchmark(name, *arguments):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    command = [sys.executable, os.path.join(BENCHMARKS, f"{name}.py"), *arguments]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("synthetic")
    write_synthetic_corpus(directory, train_size=3000, valid_size=100, test_size=100)
    return str(directory)


def dot_flops(jaxpr):
    """2 x multiply-adds of the `dot_general`s in `jaxpr`, sub-jaxprs included.

    Products with a vector operand are left out: keras-hub's `SinePositionEncoding` builds its
    table with such outer products, which are not matmuls of the model.
    """
    total = 0
    for equation in jaxpr.eqns:
        if equation.primitive.name == "dot_general":
            lhs_shape, rhs_shape = (operand.aval.shape for operand in equation.invars)
            if min(len(lhs_shape), len(rhs_shape)) > 1:
                (contracting, _), _ = equation.params["dimension_numbers"]
                depth = math.prod(lhs_shape[axis] for axis in contracting)
                total += 2 * math.prod(equation.outvars[0].aval.shape) * depth
        for value in equation.params.values():
            for inner in value if isinstance(value, (list, tuple)) else [value]:
                inner = getattr(inner, "jaxpr", inner)  # ClosedJaxpr -> Jaxpr
                if hasattr(inner, "eqns"):
                    total += dot_flops(inner)
    return total


@jax_only
@pytest.mark.parametrize("attention_bias", [False, True])
def test_step_flops_match_the_matmuls_of_both_models(attention_bias):
    # The MFU's numerator: 3x the forward matmuls, counted here from what JAX traces.
    import jax

    throughput = load_benchmark("training_throughput")
    config = TransformerConfig(
        vocabulary_size=300,
        num_layers=2,
        d_model=48,
        num_heads=4,
        intermediate_dim=80,
        attention_bias=attention_bias,
    )
    batch, source_length, target_length = 3, 7, 5
    rng = np.random.default_rng(0)
    inputs = {
        "encoder_token_ids": rng.integers(1, 300, (batch, source_length), dtype="int32"),
        "decoder_token_ids": rng.integers(1, 300, (batch, target_length), dtype="int32"),
    }
    expected = throughput.step_flops(config, batch, source_length, target_length)
    for model in (Seq2SeqTransformer(config), throughput.keras_hub_model(config)):
        jaxpr = jax.make_jaxpr(lambda x, model=model: model(x, training=False))(inputs)
        assert 3 * dot_flops(jaxpr.jaxpr) == expected, model.name


def parse_throughput(output, baseline="keras-hub"):
    # model | tokens/s | ms / step | CPU-s / step | model TFLOP/s | MFU
    pattern = rf"^\| (ours|{baseline}) \| ([\d,]+) \| .* \| ([\d.]+) \| ([\d.]+)% \|$"
    rows = {name: values for name, *values in re.findall(pattern, output, re.M)}
    params = dict(re.findall(rf"^(ours|{baseline}): ([\d.]+)M parameters", output, re.M))
    ratio = re.search(rf"^ours / {baseline} tokens/s: ([\d.]+)x", output, re.M)
    return rows, params, ratio


# One dtype per backend, each suite's run of the script costing half a minute: float32 (the
# CPUs' setting) on TensorFlow and PyTorch, bfloat16 (the GPU setting, whose mixed-precision
# fit on PyTorch is also tested in test_model.py) on JAX, the GPU measurements' backend.
@pytest.mark.parametrize("dtype", ["bfloat16" if keras.backend.backend() == "jax" else "float32"])
def test_training_throughput_runs_both_builds(data_dir, dtype):
    # bfloat16 is the GPU setting; on a CPU it checks that both builds train under it.
    output = run_benchmark(
        "training_throughput", *TINY_MODEL, "--rounds", "1", "--num-batches", "1",
        "--peak-size", "256", "--data-dir", data_dir, "--dtype", dtype,
    )  # fmt: skip
    policy = "mixed_bfloat16" if dtype == "bfloat16" else "float32"
    policies = re.findall(r"^(?:ours|keras-hub): .*, policy=(\w+),", output, re.M)
    assert policies == [policy, policy], output
    rows, params, ratio = parse_throughput(output)
    assert set(rows) == {"ours", "keras-hub"}, output
    # Same size: the comparison is between two builds of one architecture.
    assert params["ours"] == params["keras-hub"], output
    # MFU is the model's FLOP/s over the printed peak. The peak is one small sample, so on
    # a contended CI machine the step's own kernels can beat it (107.7% in a CI run): check
    # the arithmetic, not a bound.
    peak = float(re.search(r"^peak: ([\d.]+) GFLOP/s", output, re.M).group(1))
    for rate, tflops, mfu in rows.values():
        assert int(rate.replace(",", "")) > 0 and float(mfu) > 0, output
        # TFLOP/s, the peak and MFU are printed rounded: allow each rounding.
        expected = 100 * float(tflops) * 1e3 / peak
        tolerance = 100 * 0.0005 * 1e3 / peak + expected * 0.05 / peak + 0.05
        assert abs(float(mfu) - expected) <= tolerance, output
    assert ratio is not None and float(ratio.group(1)) > 0, output


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="torch.nn.Transformer's baseline")
def test_training_throughput_runs_against_torch_nn_transformer(data_dir):
    output = run_benchmark(
        "training_throughput", *TINY_MODEL, "--rounds", "1", "--num-batches", "1",
        "--peak-size", "256", "--data-dir", data_dir, "--baseline", "torch",
    )  # fmt: skip
    rows, params, ratio = parse_throughput(output, baseline="torch")
    assert set(rows) == {"ours", "torch"}, output
    # The same architecture: biases in the attention included, as torch's attention has them.
    assert params["ours"] == params["torch"], output
    assert ratio is not None and float(ratio.group(1)) > 0, output


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the GPU machine's backend")
def test_training_throughput_times_saved_batches_without_tensorflow(
    data_dir, tmp_path, monkeypatch
):
    """`--save-batches` where tf.data is, `--batches` on a machine without TensorFlow."""
    batches = str(tmp_path / "batches.npz")
    throughput = load_benchmark("training_throughput")
    arguments = [*TINY_MODEL, "--num-batches", "2", "--data-dir", data_dir]
    monkeypatch.setattr(
        sys, "argv", ["training_throughput.py", *arguments, "--save-batches", batches]
    )
    throughput.main()  # writes the file and stops before building a model
    saved, vocabulary_size = throughput.load_batches(batches)
    assert vocabulary_size == 500 and len(saved) == 2
    for inputs, labels in saved:
        assert set(inputs) == {"encoder_token_ids", "decoder_token_ids"}
        assert labels.shape == inputs["decoder_token_ids"].shape
        # Teacher forcing: the decoder reads the labels shifted right by one (EOS aside).
        read = inputs["decoder_token_ids"][:, 1:]
        np.testing.assert_array_equal(read[read != 0], labels[:, :-1][read != 0])
    blocker = tmp_path / "no_tensorflow"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nsys.modules['tensorflow'] = sys.modules['tensorflow_text'] = None\n"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}"}
    command = [
        sys.executable, os.path.join(BENCHMARKS, "training_throughput.py"), *TINY_MODEL,
        "--vocabulary-size", "900", "--batches", batches, "--rounds", "1", "--peak-size", "256",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    # The file's vocabulary size, not the flag's.
    assert "vocabulary=500 " in result.stdout, result.stdout
    assert re.search(r"^2 batches \(shapes ", result.stdout, re.M), result.stdout


@pytest.mark.slow  # one model per fast form, each traced for every batch shape
def test_fast_forms_times_each_form_off_against_all_on(data_dir):
    from keras_transformer import backend

    output = run_benchmark(
        "fast_forms", *TINY_MODEL, "--num-batches", "1", "--steps", "2", "--data-dir", data_dir
    )
    forms = backend.applicable_forms(xla=keras.backend.backend() == "jax", decoding=False)
    if not forms:
        assert "no fast form applies" in output, output
        return
    rows = re.findall(r"^\| (\w+) \| [\d.]+ \| [\d.]+ \| (?:yes|no) \(", output, re.M)
    assert rows == [*forms, "all"], output


@BACKEND_INDEPENDENT
def test_pipeline_padding_runs(data_dir):
    output = run_benchmark(
        "pipeline_padding", "--data-dir", data_dir, "--vocabulary-size", "500",
        "--budgets", "1024", "--growths", "1.1", "--epochs", "1",
    )  # fmt: skip
    row = re.search(r"^\| 1024 \| 1.1 \| (.*)\|$", output, re.M)
    assert row is not None, output
    cells = [cell.strip() for cell in row.group(1).split("|")]
    source, target = float(cells[3]), float(cells[4])
    random_source, random_target = (float(v) for v in cells[5].split(",")[0].split(" / "))
    # Length buckets pad less than random batches of the same size.
    assert 0 < random_source < source <= 1 and 0 < random_target < target <= 1, output


@pytest.mark.skipif(
    keras.backend.backend() == "torch",
    reason="test_decoding_speed_compare_ctranslate2_runs runs the script on PyTorch",
)
def test_decoding_speed_runs(data_dir):
    # On TensorFlow and JAX: each has its own compiled search loop to check. One layer: the
    # search's code is the same at any depth, and compiling six is most of the run.
    output = run_benchmark(
        "decoding_speed", "--data-dir", data_dir, "--vocabulary-size", "500",
        "--num-sentences", "2", "--min-tokens", "5", "--repeats", "1", "--num-layers", "1",
    )  # fmt: skip
    assert re.search(r"^backend=\w+ layers=1\+1 params=", output, re.M), output
    assert re.search(r"^ +cached: +[\d.]+ sentences/s", output, re.M), output
    assert re.search(r"^ +uncached: +[\d.]+ sentences/s", output, re.M), output
    # The second computation path: the script exits non-zero unless the uncached search
    # returns the cached search's tokens (and scores up to rounding). No speed is asserted.
    assert re.search(r"^cached == uncached: same tokens in all 2 sentences", output, re.M), output
    assert re.search(r"^cached / uncached throughput: [\d.]+x", output, re.M), output


# The tiny model and batch of the search comparisons (`cache_stages.add_model_arguments`).
TINY_SEARCH = ("--num-layers", "1", "--d-model", "16", "--num-heads", "2", "--intermediate-dim",
               "32", "--vocabulary-size", "50", "--batch-size", "4", "--repeats", "1")  # fmt: skip


@only_under("torch", "settled sources leave the loop on TensorFlow and torch; one is enough")
def test_settled_rows_runs():
    output = run_benchmark("settled_rows", *TINY_SEARCH, "--max-extra-length", "3")
    # The second computation path: the script exits non-zero unless both searches give the
    # same tokens and scores. No speed is asserted.
    assert re.search(r"^batch=4 beam=4 steps=\d+-\d+ \(row-steps needed / run: 0\.\d+\)", output,
                     re.M), output  # fmt: skip
    assert re.search(r"^same tokens and scores in both searches$", output, re.M), output
    assert re.search(r"^rows kept / settled out time: [\d.]+x$", output, re.M), output


# Two fresh processes, each tracing the search (about a minute on CI's cores); that search is
# the one test_translator.py and test_decoding.py check on TensorFlow.
@pytest.mark.slow
@only_under("tensorflow", "AutoGraph is TensorFlow's")
def test_search_tracing_runs():
    output = run_benchmark("search_tracing", *TINY_SEARCH, "--max-extra-length", "3")
    # The second computation path: the script exits non-zero unless the search traced with
    # AutoGraph gives the same tokens and scores. No speed is asserted.
    assert re.search(r"^ *AutoGraph off \(ours\): first trace median [\d.]+s", output, re.M), output
    assert re.search(r"^same tokens and scores in both searches$", output, re.M), output
    assert re.search(r"^AutoGraph on / off first trace: [\d.]+x$", output, re.M), output


# Two fresh processes (about a minute on CI's cores); that the step is traced once and
# trains as Keras' own build is test_precision_and_compilation.py's check.
@pytest.mark.slow
@only_under("tensorflow", "the second trace is tf.function's")
def test_step_tracing_runs():
    output = run_benchmark("step_tracing", *TINY_SEARCH, "--length", "5")
    # The second computation path: the script exits non-zero unless Keras' own build trains
    # the same weights. No speed is asserted.
    ours = r"^ *built before the trace \(ours\): fit median [\d.]+s"
    assert re.search(ours, output, re.M), output
    assert re.search(r"^same weights after both fits$", output, re.M), output
    assert re.search(r"^built in / before the trace, first fit: [\d.]+x$", output, re.M), output


@only_under("jax", "cache stages exist on JAX only")
def test_cache_stages_runs():
    output = run_benchmark("cache_stages", *TINY_SEARCH, "--max-extra-length", "20")
    # The second computation path: the script exits non-zero unless both searches give the
    # same tokens and scores. No speed is asserted.
    assert re.search(r"^same tokens and scores in both searches$", output, re.M), output
    assert re.search(r"^staged / one stage time: [\d.]+x$", output, re.M), output


@only_under("tensorflow", "the script traces the SavedModel's graph in its own process")
def test_long_sentence_request_runs(data_dir):
    output = run_benchmark(
        "long_sentence_request", "--data-dir", data_dir, "--num-sentences", "6",
        "--long-tokens", "30", "--batch-tokens", "40", "--max-extra-length", "2",
        "--vocabulary-size", "500", "--d-model", "16", "--num-layers", "1",
        "--num-heads", "2", "--intermediate-dim", "32",
    )  # fmt: skip
    for mode in (r"one-batch \(\d+ tokens\)", r"sub-batches \(40 tokens\)"):
        assert re.search(rf"^{mode}: without +[\d.]+s, .* [\d.]+x", output, re.M), output
    # The second computation path: the script exits non-zero unless both decodings of the
    # request give the same translations. No speed is asserted.
    assert re.search(r"^one batch == sub-batches: same translations", output, re.M), output


@only_under("torch", "the script's run on PyTorch; test_decoding_speed_runs runs it on the others")
def test_decoding_speed_compare_ctranslate2_runs(data_dir):
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed")
    output = run_benchmark(
        "decoding_speed", "--data-dir", data_dir, "--compare-ctranslate2",
        "--workloads", "quickstart", "--vocabulary-size", "500", "--num-sentences", "8",
        "--batch-size", "4", "--repeats", "1", "--single-beam-steps", "--int8",
    )  # fmt: skip
    assert re.search(r"^quickstart: params=[\d.]+M sentences=8 ", output, re.M), output
    decoders = ("ours", "ours, single beam steps", "ours int8", "ctranslate2 float32",
                "ctranslate2 int8")  # fmt: skip
    for decoder in decoders:
        assert re.search(rf"^ +{decoder}: +[\d.]+ sentences/s", output, re.M), output
    # Reported, not asserted: an untrained model's nearly uniform distributions are full of
    # near-ties that float32 rounding decides differently in the two decoders.
    # tests/test_ctranslate2_export.py compares them on a trained model.
    assert re.search(r"same output tokens \(ours, ctranslate2 float32\): \d+ of 8", output)
    assert "ours, single and paired beam steps: the same tokens" in output
    ratios = r"ours int8: [\d.]+x ours float32, [\d.]+x ctranslate2 int8( inter)? \(best times\)"
    assert re.search(ratios, output), output
    assert re.search(r"same output tokens \(ours int8, ours float32\): \d+ of 8", output)


@only_under("torch", "times the current backend's Translator; one backend is enough")
def test_translate_speed_runs_both_decoders_on_a_saved_model(data_dir, tmp_path):
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed")
    from keras_transformer.export import save_translation_model
    from keras_transformer.text import train_vocabulary

    with open(os.path.join(data_dir, "train.en"), encoding="utf-8") as file:
        english = file.read().splitlines()
    tokenizer = train_vocabulary(english[:500], vocabulary_size=200)
    model = Seq2SeqTransformer(TransformerConfig(vocabulary_size=200, num_layers=1, d_model=32,
                                                 num_heads=2, intermediate_dim=64))  # fmt: skip
    save_translation_model(model, tokenizer, tmp_path / "model.keras")
    (tmp_path / "input.en").write_text("\n".join(english[:6]) + "\n", encoding="utf-8")
    (tmp_path / "references.de").write_text("\n".join(english[6:12]) + "\n", encoding="utf-8")
    (tmp_path / "short.de").write_text("\n".join(english[6:11]) + "\n", encoding="utf-8")
    output = run_benchmark(
        "translate_speed", "--model", str(tmp_path), "--input", str(tmp_path / "input.en"),
        "--max-extra-length", "3", "--batch-size", "8", "--repeats", "1",
        "--references", str(tmp_path / "references.de"), "--keep-settled-rows", "--stock-top-k",
        "--batch-tokens", "0", "16",
    )  # fmt: skip
    assert re.search(r"^backend=torch .* sentences=6 beam=4 alpha=0.6 batch=8 ", output, re.M)
    # The references, Keras' own top_k, settled sources kept in the loop and other batches:
    # the same translations.
    for reference in ("rows kept", "stock top_k", "default batch tokens", "16 batch tokens"):
        pattern = rf"^ *ours, {reference}: .* same translation as ours: 6 of 6;"
        assert re.search(pattern, output, re.M), output
    # The decoders take turns in rounds; each one's speed is the median over rounds of ours'
    # time over its own, so ours' is 1.00x.
    figures = r"\(best [\d.]+s, median [\d.]+s; [\d.]+x ours, the median of rounds\)"
    assert re.search(r"^ *ours: +[\d.]+ sentences/s \(best [\d.]+s, median [\d.]+s; 1\.00x ours",
                     output, re.M), output  # fmt: skip
    for decoder in ("ours", "ctranslate2 float32", "ctranslate2 int8", "ctranslate2 float32 inter",
                    "ctranslate2 int8 inter"):  # fmt: skip
        pattern = rf"^ *{decoder}: +[\d.]+ sentences/s {figures}; .* of 6; sacreBLEU [\d.]+$"
        assert re.search(pattern, output, re.M), output
    # decoding_speed.py's trained workload runs this script on a run's test set.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test.en").write_text("\n".join(english[:3]) + "\n", encoding="utf-8")
    (tmp_path / "data" / "test.de").write_text("\n".join(english[3:6]) + "\n", encoding="utf-8")
    output = run_benchmark(
        "decoding_speed", "--compare-ctranslate2", "--workloads", "trained", "--trained-run",
        str(tmp_path), "--batch-size", "2", "--repeats", "1", "--threads", "1",
    )  # fmt: skip
    assert re.search(r"^ *ours: +[\d.]+ sentences/s .* of 3; sacreBLEU [\d.]+$", output, re.M)
    # A file of the wrong length is named, before any model is loaded.
    command = [sys.executable, os.path.join(BENCHMARKS, "translate_speed.py"), "--model",
               str(tmp_path), "--input", str(tmp_path / "input.en"), "--references",
               str(tmp_path / "short.de")]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": ROOT})  # fmt: skip
    assert result.returncode == 1
    assert "short.de has 5 lines, --input" in result.stderr and "input.en 6" in result.stderr


@BACKEND_INDEPENDENT
def test_encoder_collapse_variants_combine_fairseqs_settings():
    collapse = load_benchmark("encoder_collapse")
    assert collapse.variant_settings("post-ln") == (False, {}, {}, None)
    assert collapse.variant_settings("pre-ln") == (True, {}, {}, None)
    assert collapse.variant_settings("clip-norm-25") == (False, {}, {"global_clipnorm": 25.0}, None)
    everything = collapse.variant_settings("fairseq")
    assert everything == (
        False,
        {"attention_bias": True, "attention_initializer": "xavier_fused_qkv"},
        {"global_clipnorm": 25.0, "epsilon": 1e-8, "initial_rate": 1e-7},
        8192,
    )
    _, model, optimizer, budget = collapse.variant_settings("fairseq-without-batch-8192")
    assert (model, optimizer, budget) == (everything[1], everything[2], None)
    _, model, _, _ = collapse.variant_settings("fairseq-without-fused-qkv-init")
    assert model == {"attention_bias": True}
    with pytest.raises(Exception, match="unknown variant 'fairseq-without-dropout'"):
        collapse.variant_name("fairseq-without-dropout")


@BACKEND_INDEPENDENT
def test_command_startup_times_every_case_against_the_baseline():
    output = run_benchmark("command_startup", "--repeats", "1")
    lines = output.strip().splitlines()
    assert re.fullmatch(r"baseline: import tensorflow\s+[\d.]+ s", lines[0]), lines[0]
    cases = load_benchmark("command_startup").CASES
    assert len(lines) == 1 + len(cases)
    for case, line in zip(cases, lines[1:], strict=True):
        assert line.startswith("keras-transformer " + " ".join(case)), line
        assert re.search(r"[\d.]+ s  \(\d+x faster than the baseline\)$", line), line


@BACKEND_INDEPENDENT
def test_step_profile_sums_a_perfetto_trace_by_process_and_name(tmp_path):
    import gzip
    import json

    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/host:CPU"}},
        {"ph": "X", "name": "fusion.1", "pid": 1, "ts": 0, "dur": 300.0},
        {"ph": "X", "name": "gemm", "pid": 1, "ts": 300, "dur": 600.0},
        {"ph": "X", "name": "fusion.1", "pid": 1, "ts": 900, "dur": 100.0},
        {"ph": "X", "name": "$trainer.py:1 step", "pid": 2, "ts": 0, "dur": 5000.0},  # Python
        {"ph": "X", "name": "ExecuteHelper", "pid": 2, "ts": 0, "dur": 2000.0},
    ]
    trace_dir = tmp_path / "plugins" / "profile" / "run"
    trace_dir.mkdir(parents=True)
    with gzip.open(trace_dir / "perfetto_trace.json.gz", "wt") as file:
        json.dump({"traceEvents": events}, file)
    rows = load_benchmark("step_profile").summarize_perfetto(str(tmp_path)).splitlines()[2:]
    # Longest first; shares of each process's own time; Python frames left out.
    assert rows == [
        "| /host:CPU | ExecuteHelper | 2.0 | 1 | 100.0% |",
        "| /device:GPU:0 | gemm | 0.6 | 1 | 60.0% |",
        "| /device:GPU:0 | fusion.1 | 0.4 | 2 | 40.0% |",
    ]


# Two fresh `translate` processes and the script's own (about two minutes on CI's cores);
# that each command freezes at exit and writes its output first is test_process_exit.py's.
@pytest.mark.slow
@BACKEND_INDEPENDENT
def test_command_exit_runs(tmp_path):
    # Translation only, of a saved untrained model: the training case runs the same code.
    from keras_transformer.export import save_translation_model
    from keras_transformer.synthetic import generate_synthetic_pairs
    from keras_transformer.text import train_vocabulary

    english, german = generate_synthetic_pairs(200, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=120)
    model = Seq2SeqTransformer(small_config(120))
    save_translation_model(model, tokenizer, tmp_path / "model.keras")
    (tmp_path / "input.en").write_text("\n".join(english[:6]) + "\n", encoding="utf-8")
    output = run_benchmark("command_exit", "--run-dir", str(tmp_path), "--input",
                           str(tmp_path / "input.en"), "--repeats", "1")  # fmt: skip
    # The second computation path: the script exits non-zero unless both variants translate
    # byte-identically. No speed is asserted.
    assert re.search(r"^backend=\w+ .* translate sentences=6 ", output, re.M), output
    pattern = r"^ *translate: Python's own exit / ours [\d.]+x \(-?[\d.]+ s saved\)$"
    assert re.search(pattern, output, re.M), output
    assert output.rstrip().endswith("same translations from both variants"), output


@only_under("torch", "trains through the command line; its backend code is test_lora.py's")
def test_domain_adaptation_runs(tmp_path):
    from keras_transformer.export import save_translation_model
    from keras_transformer.synthetic import generate_synthetic_pairs
    from keras_transformer.text import train_vocabulary

    # A random model file as the base (no base run): one LoRA run and its report.
    tokenizer = train_vocabulary(generate_synthetic_pairs(200, domain="requests")[0], 120)
    model = Seq2SeqTransformer(small_config(vocabulary_size=120))
    model.build()
    save_translation_model(model, tokenizer, tmp_path / "base.keras")
    output = run_benchmark(
        "domain_adaptation", "--work-dir", tmp_path, "--base", tmp_path / "base.keras",
        "--steps", "2", "--warmup-steps", "1", "--sizes", "200", "4", "4", "--variants",
        "lora8",
    )  # fmt: skip
    row = r"^\| lora8 \| [\d.]+ \| [\d.]+ \| [\d,]+ \| [\d.]+% \| \d+ KiB \| [\d.]+% \| [\d.]+ \|$"
    assert re.search(row, output, re.M), output


@only_under("torch", "times the current backend's Translator; its searches are tested elsewhere")
def test_constrained_decoding_runs(tmp_path):
    from keras_transformer.export import save_translation_model
    from keras_transformer.synthetic import generate_synthetic_pairs
    from keras_transformer.text import train_vocabulary

    english, german = generate_synthetic_pairs(200, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=160)
    model = Seq2SeqTransformer(small_config(vocabulary_size=160))
    save_translation_model(model, tokenizer, tmp_path / "model.keras")
    shortest = sorted(range(len(english)), key=lambda i: len(english[i]))[:3]
    for name, lines in (("input.en", english), ("references.de", german)):
        text = "".join(f"{lines[i]}\n" for i in shortest)
        (tmp_path / name).write_text(text, encoding="utf-8")
    output = run_benchmark(
        "constrained_decoding", "--model", str(tmp_path / "model.keras"), "--input",
        str(tmp_path / "input.en"), "--references", str(tmp_path / "references.de"),
        "--max-extra-length", "6", "--repeats", "1",
    )  # fmt: skip
    assert re.search(r"^constrained: [\d.]+ s \([\d.]+ sentences/s\), BLEU [\d.]+$", output, re.M)
    found = re.search(r"^phrases found in the constrained outputs: (\d+) of (\d+)$", output, re.M)
    assert found and int(found[2]) >= 3 and int(found[1]) >= int(found[2]) - 1, output
    assert re.search(r"^time constrained / plain beam: [\d.]+x \(target <= 2x\)", output, re.M)
