#!/usr/bin/env bash
# The CPU runs the verdicts' thresholds (docs/verdicts.md) are chosen from, each figure printed beside
# its threshold by verdict_figures. Run it on an otherwise idle machine:
#   quiet   the accumulation experiment (tiny model, 1x4, 2x2, 4x1) with nothing else running
#   loaded  the same while every core also runs a busy loop for the whole run (steps slowed
#           throughout: the spread widens, halves agree)
#   ending  the same while the busy loops stop halfway through the run (the first half slower: drift,
#           two groups of steps)
#   mnist   small_steps' defaults block on the CPU: LibTorch's MNIST CNN fed through torch::data,
#           every output (a loop whose fetch is part of each step)
#
#   benchmarks/verdict_thresholds.sh BUILD_DIR [OUT_DIR]
# BUILD_DIR holds examples/qwen3/qwen3_accumulation, benchmarks/small_steps and
# benchmarks/verdict_figures (a build with LibTorch and nlohmann-json).
set -uo pipefail
build=${1:?build dir}
out=${2:-verdict_thresholds_out}
mkdir -p "$out"
qwen3=(--device cpu --preset tiny --steps 60 --seq-len 64 --no-traces)
cores=$(nproc)

busy_loops() {  # N busy loops in the background; their pids on stdout
  for _ in $(seq "$1"); do
    yes >/dev/null &
    echo $!
  done
}

echo "== quiet"
start=$(date +%s.%N)
"$build/examples/qwen3/qwen3_accumulation" "${qwen3[@]}" --out "$out/quiet" >"$out/quiet.log" 2>&1
quiet_s=$(echo "$(date +%s.%N) - $start" | bc)
echo "   ${quiet_s} s"

echo "== loaded: $cores busy loops for the whole run"
pids=$(busy_loops "$cores")
"$build/examples/qwen3/qwen3_accumulation" "${qwen3[@]}" --out "$out/loaded" >"$out/loaded.log" 2>&1
# shellcheck disable=SC2086
kill $pids

echo "== ending: $cores busy loops for the first half of each schedule (a third of a quiet run's time)"
"$build/examples/qwen3/qwen3_accumulation" "${qwen3[@]}" --out "$out/ending" >"$out/ending.log" 2>&1 &
run=$!
for _ in 1 2 3; do  # each schedule: load for its first half, then quiet
  pids=$(busy_loops "$cores")
  sleep "$(echo "$quiet_s / 6" | bc -l)"
  # shellcheck disable=SC2086
  kill $pids
  sleep "$(echo "$quiet_s / 6" | bc -l)"
done
wait "$run"

echo "== mnist: small_steps' defaults on the CPU"
"$build/benchmarks/small_steps" --device cpu --modes defaults --rounds 1 --steps 300 --warmup 10 \
  --dataset-size 30000 --out "$out/mnist" >"$out/mnist.log" 2>&1

for f in "$out"/quiet/*summary.json "$out"/loaded/*summary.json "$out"/ending/*summary.json \
  "$out"/mnist/*summary.json; do
  echo
  "$build/benchmarks/verdict_figures" "$f"
done
