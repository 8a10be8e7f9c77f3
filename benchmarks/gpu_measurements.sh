#!/usr/bin/env bash
# Every GPU measurement of docs/performance.md in one call of a few minutes, for a short GPU
# window: base-size training in mixed_bfloat16 on JAX (with a profile of where the step's time
# goes), TensorFlow + XLA and torch against their baselines, and a real training run's
# updates/s, from which the paper's 100k base steps are projected.
#
#     bash benchmarks/gpu_measurements.sh [OUTPUT_DIR] [DATA_DIR]
#
# OUTPUT_DIR (default gpu_results/, or $OUT when set) receives one .txt per measurement, its
# stderr, the JAX profile and JAX's compilation cache (reused when the script runs again).
# DATA_DIR holds train/valid.{en,de} (default ../shared/data/multi30k; the built-in corpus
# when it is missing). SMOKE=1 runs everything at toy sizes, to check the script on a CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu_results}}"
data="${2:-../shared/data/multi30k}"
python="${PYTHON:-python}"
mkdir -p "$out"
export TF_CPP_MIN_LOG_LEVEL=3 JAX_COMPILATION_CACHE_DIR="$out/jax_cache"
limit="${STEP_TIMEOUT:-240}"  # seconds per measurement: one failure leaves the rest their time

if [ "${SMOKE:-0}" = 1 ]; then
  size=(--num-layers 1 --d-model 32 --num-heads 2 --intermediate-dim 64 --vocabulary-size 300
        --token-budget 256 --num-batches 2 --rounds 1 --peak-size 256 --synthetic-pairs 2000)
  train_steps=20
  recipe_flags=(--log-every-steps 10)
else
  size=(--preset base --token-budget 25000 --num-batches 2 --rounds 5 --peak-size 8192)
  train_steps=400
  recipe_flags=(--log-every-steps 50 --precision mixed_bfloat16)
fi

run() {  # run NAME COMMAND...: COMMAND's stdout to NAME.txt, stderr to NAME.err
  local name=$1
  shift
  echo "== $name"
  timeout "$limit" "$@" > "$out/$name.txt" 2> "$out/$name.err"
  echo "exit status $?"
  tail -n 8 "$out/$name.txt"
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true; } > "$out/gpu.txt"
cat "$out/gpu.txt"
run jax_training env KERAS_BACKEND=jax "$python" benchmarks/training_throughput.py "${size[@]}" \
  --dtype bfloat16 --profile "$out/jax_profile"
run tensorflow_training env KERAS_BACKEND=tensorflow "$python" benchmarks/training_throughput.py \
  "${size[@]}" --dtype bfloat16 --jit-compile true
run torch_training env KERAS_BACKEND=torch "$python" benchmarks/training_throughput.py \
  "${size[@]}" --dtype bfloat16 --baseline torch
data_flags=()
if [ -f "$data/train.en" ]; then data_flags=(--data-dir "$data"); fi
run recipe_updates env KERAS_BACKEND=jax "$python" -m keras_transformer train --recipe multi30k \
  "${data_flags[@]}" --output-dir "$out/recipe_run" --max-steps "$train_steps" \
  "${recipe_flags[@]}" --no-export --verbose 0
if [ -f "$out/recipe_run/train_log.csv" ]; then
  # updates/s between the first and the last logged step (compilation before the first).
  "$python" - "$out/recipe_run/train_log.csv" <<'EOF' | tee -a "$out/recipe_updates.txt"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
first, last = rows[0], rows[-1]
rate = (int(last["step"]) - int(first["step"])) / (
    float(last["elapsed_seconds"]) - float(first["elapsed_seconds"]))
print(f"updates/s {rate:.2f}; 100,000 updates would take {100000 / rate / 3600:.2f} h")
EOF
fi
