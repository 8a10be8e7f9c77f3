#!/usr/bin/env bash
# Every GPU measurement of docs/performance.md in one call of a few minutes, for a short GPU
# window: base-size training in mixed_bfloat16 on JAX (with a profile of where the step's time
# goes, and again with autodiff's embedding gradient), torch against torch.nn.Transformer, TensorFlow +
# XLA where TensorFlow is installed, and the Multi30k recipe model's updates/s.
#
#     bash benchmarks/gpu_measurements.sh prepare [BATCHES_DIR] [DATA_DIR]   # any machine
#     bash benchmarks/gpu_measurements.sh measure [BATCHES_DIR] [OUTPUT_DIR] # the GPU machine
#
# `prepare` writes the fixed batches (benchmarks/training_throughput.py --save-batches) to
# BATCHES_DIR (default gpu_batches/): base.npz (the built-in synthetic corpus's batches of
# 25,000 tokens for a base-size model of the paper's 37,000 rows) and recipe.npz (DATA_DIR's Multi30k train set, default
# ../shared/data/multi30k, in the multi30k recipe's 10,000 pieces and 4,096-token batches).
# Building them needs tf.data; `measure` reads them, so the GPU machine needs keras, keras-hub
# and JAX or torch, not TensorFlow. OUTPUT_DIR (default gpu_results/, or $OUT when set)
# receives one .txt per measurement and its .err; the profiles and JAX's compilation cache go
# to $TMPDIR. MEASUREMENTS picks some of them (default: all, in the order of the
# `measure_*` functions below). SMOKE=1 runs everything at toy sizes, to check the script on a CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
command=${1:-measure}
batches="${2:-gpu_batches}"
python="${PYTHON:-python}"
export TF_CPP_MIN_LOG_LEVEL=3
throughput=("$python" benchmarks/training_throughput.py)
recipe_size=(--num-layers 4 --d-model 128 --num-heads 4 --intermediate-dim 256 --dropout 0.3)

if [ "$command" = prepare ]; then
  data="${3:-../shared/data/multi30k}"
  mkdir -p "$batches"
  if [ "${SMOKE:-0}" = 1 ]; then
    toy=(--token-budget 256 --num-batches 2 --synthetic-pairs 2000 --vocabulary-size 300)
    "${throughput[@]}" "${toy[@]}" --save-batches "$batches/base.npz" &&
      "${throughput[@]}" "${toy[@]}" --save-batches "$batches/recipe.npz"
    exit
  fi
  "${throughput[@]}" --preset base --vocabulary-size 37000 --token-budget 25000 \
    --num-batches 2 --save-batches "$batches/base.npz" &&
    "${throughput[@]}" --data-dir "$data" --vocabulary-size 10000 --token-budget 4096 \
      --num-batches 4 --save-batches "$batches/recipe.npz"
  exit
elif [ "$command" != measure ]; then
  echo "usage: $0 prepare|measure [BATCHES_DIR] [DATA_DIR|OUTPUT_DIR]" >&2
  exit 2
fi

for file in base.npz recipe.npz; do
  if [ ! -f "$batches/$file" ]; then
    echo "$0: error: $batches/$file does not exist: run '$0 prepare $batches' first" >&2
    exit 2
  fi
done
out="${3:-${OUT:-gpu_results}}"
scratch="${TMPDIR:-/tmp}/gpu_measurements"
mkdir -p "$out" "$scratch"
export JAX_COMPILATION_CACHE_DIR="$scratch/jax_cache"
limit="${STEP_TIMEOUT:-240}"  # seconds per measurement: one failure leaves the rest their time
if [ "${SMOKE:-0}" = 1 ]; then
  base=(--preset base --num-layers 1 --d-model 32 --num-heads 2 --intermediate-dim 64
        --rounds 1 --peak-size 256)
  recipe=(--num-layers 1 --d-model 32 --num-heads 2 --intermediate-dim 64 --rounds 1
          --peak-size 256)
else
  # One 25,000-token batch: each batch shape costs a compilation of about 25 s per model.
  base=(--preset base --num-batches 1 --rounds 10 --peak-size 8192)
  recipe=("${recipe_size[@]}" --num-batches 2 --rounds 10 --peak-size 8192)
fi
base+=(--batches "$batches/base.npz" --dtype bfloat16)
recipe+=(--batches "$batches/recipe.npz" --dtype bfloat16)

run() {  # run NAME COMMAND...: COMMAND's stdout to NAME.txt, stderr to NAME.err
  local name=$1
  shift
  echo "== $name"
  timeout "$limit" "$@" > "$out/$name.txt" 2> "$out/$name.err"
  echo "exit status $?"
  sed -n '1,/^ours \//p' "$out/$name.txt" | grep -E "^(\||ours /|peak:|[0-9]+ batches|backend=)"
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true; } > "$out/gpu.txt"
cat "$out/gpu.txt"
measure_jax_base() {
  run jax_base env KERAS_BACKEND=jax "${throughput[@]}" "${base[@]}" --profile "$scratch/jax_profile"
  # The paper's 100,000 base steps at ours' median step time (one device; input pipeline aside).
  awk -F'|' '$2 ~ /^ ours $/ {printf "100,000 steps at %s ms: %.1f h\n", $4, $4 * 1e5 / 3.6e6}' \
    "$out/jax_base.txt"
  echo "-- where the step's time goes (ours, JAX):"
  sed -n '/^ours \//,$p' "$out/jax_base.txt" | tail -n +2 | head -n 30
}
measure_jax_base_scatter() {  # ours with the embedding gradient autodiff gives (a scatter-add)
  run jax_base_scatter env KERAS_BACKEND=jax KERAS_TRANSFORMER_FAST_FORMS=one_hot_row_gradient \
    "${throughput[@]}" "${base[@]}"
}
measure_jax_recipe() {
  run jax_recipe env KERAS_BACKEND=jax "${throughput[@]}" "${recipe[@]}"
}
measure_torch_base() {
  run torch_base env KERAS_BACKEND=torch "${throughput[@]}" "${base[@]}" --baseline torch \
    --rounds 5 --profile "$scratch/torch_profile"
  sed -n '/^ours \//,$p' "$out/torch_base.txt" | tail -n +2 | head -n 25
}
measure_tensorflow_base() {
  if "$python" -c "import tensorflow" 2> /dev/null; then
    run tensorflow_base env KERAS_BACKEND=tensorflow "${throughput[@]}" "${base[@]}" \
      --rounds 5 --jit-compile true
  else
    echo "== tensorflow_base: skipped, TensorFlow is not installed"
  fi
}
for name in ${MEASUREMENTS:-jax_base jax_base_scatter jax_recipe torch_base tensorflow_base}; do
  "measure_$name"
done
