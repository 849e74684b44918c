#!/usr/bin/env bash
# Everything that needs a GPU, in one go, with a time limit per part (most important first):
# build; the [gpu] tests; hardware counters (the PM-sampling probe, their test, their agreement with
# kernel records, their cost); the profiling overhead on the Qwen3 trainer (eager, then CUDA graphs); the
# C++ trainer against the Python reference side by side; the reference experiment (qwen3-1.7b, 100
# steps, bf16, checkpointing); logit parity with transformers; the Llama family (parity, then the
# experiment on llama-3.2-1b); the qwen3 tests on this LibTorch.
# Logs and JSON go to OUT_DIR. PARTS picks a subset (default: all of them).
#
#   benchmarks/gpu_all.sh OUT_DIR [DEPS_DIR]
#   PARTS="tests overhead" benchmarks/gpu_all.sh OUT_DIR
# DEPS_DIR/usr holds header-only Debian packages (catch2, nlohmann-json3-dev, libcli11-dev) on a
# machine without a package manager.
set -uo pipefail
out=${1:?output dir}
root=$(cd "$(dirname "$0")/.." && pwd)
deps=$(cd "${2:-$root/.deps}" && pwd)  # absolute: CMake does not resolve relative prefixes from here
build=${BUILD:-/tmp/traceml-gpu-build}
mkdir -p "$out"
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
parts=${PARTS:-tests pm overhead pm_overhead side_by_side experiment parity llama_parity llama_experiment qwen3}
want() { [[ " $parts " == *" $1 "* ]]; }

tp=$(python3 -c 'import torch, torch.utils; print(torch.utils.cmake_prefix_path)')
stamp "configure"
# Catch2_DIR: a system-wide Catch2 v3 would otherwise shadow the v2 in DEPS_DIR.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tp;$deps/usr" \
  -DCatch2_DIR="$deps/usr/lib/cmake/Catch2" \
  >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
grep "traceml:" "$out/configure.log"
stamp "build"
targets="traceml_gpu_tests qwen3_overhead"
{ want side_by_side || want experiment || want pm || want llama_experiment; } && targets+=" qwen3_accumulation"
want pm && targets+=" pm_sampling_probe"
{ want parity || want llama_parity; } && targets+=" qwen3_logits"
want qwen3 && targets+=" traceml_qwen3_tests"
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $targets -- -k 0 >"$out/build.log" 2>&1 || grep -E "error|FAILED" -A5 "$out/build.log" | head -60
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$out/gpu.txt" 2>&1

if want tests; then
  stamp "[gpu] tests"
  timeout 120 "$build/tests/gpu/traceml_gpu_tests" -d yes >"$out/gpu_tests.log" 2>&1; echo "rc=$?"
  tail -3 "$out/gpu_tests.log"
fi

if want pm; then
  # Hardware counters (CUPTI PM sampling): feasibility, the [pm] test, and their agreement with
  # kernel records on the trainer with every step recorded (eager, then CUDA graphs).
  stamp "PM sampling probe"
  timeout 60 "$build/benchmarks/pm_sampling_probe" >"$out/pm_probe.log" 2>&1; echo "rc=$?"
  cat "$out/pm_probe.log"
  stamp "[gpu][pm] test"
  timeout 90 "$build/tests/gpu/traceml_gpu_tests" "[pm],[default],[degrade]" -d yes >"$out/gpu_pm_tests.log" 2>&1; echo "rc=$?"
  grep -E "hardware counters|busy:|SKIPPED|FAILED|passed|failed" "$out/gpu_pm_tests.log" | head -30
  for mode in eager graphs; do
    stamp "counters vs kernel records, every step recorded ($mode)"
    flags=(); [ "$mode" = graphs ] && flags=(--cuda-graphs)
    mkdir -p "$out/agreement_$mode"
    timeout 90 "$build/examples/qwen3/qwen3_accumulation" --schedules 1x4,4x1 --steps "${AGREE_STEPS:-12}" --warmup 2 \
      --record-budget 0 --no-traces "${flags[@]}" --out "$out/agreement_$mode" >"$out/agreement_$mode.log" 2>&1; echo "rc=$?"
    python3 "$root/benchmarks/counter_agreement.py" "$out/agreement_$mode/accumulation_summary.json" 2>&1 | tee "$out/agreement_$mode.txt"
  done
fi

if want overhead; then
  stamp "overhead on the Qwen3 trainer, eager (checkpointing, as the experiment)"
  timeout 300 "$build/benchmarks/qwen3_overhead" --rounds "${ROUNDS:-8}" >"$out/overhead_eager.log" 2>&1; echo "rc=$?"
  cat "$out/overhead_eager.log"
  stamp "overhead on the Qwen3 trainer, CUDA graphs"
  timeout 150 "$build/benchmarks/qwen3_overhead" --cuda-graphs --modes events,cupti --rounds "${ROUNDS:-8}" \
    >"$out/overhead_graphs.log" 2>&1; echo "rc=$?"
  cat "$out/overhead_graphs.log"
fi

if want side_by_side; then
  stamp "C++ trainer vs Python reference (no checkpointing)"
  timeout 240 "$root/benchmarks/accumulation_vs_reference.sh" "$build" "$out/side_by_side" "${STEPS:-30}" >"$out/side_by_side.log" 2>&1
  tail -8 "$out/side_by_side.log"
fi

if want experiment; then
  stamp "reference experiment: qwen3-1.7b, 100 steps, bf16, checkpointing"
  mkdir -p "$out/reference_experiment"
  timeout 150 "$build/examples/qwen3/qwen3_accumulation" --out "$out/reference_experiment" 2>&1 | grep -v '^\[' \
    >"$out/reference_experiment.log"
  tail -32 "$out/reference_experiment.log"
fi

if want pm_overhead; then
  # What the counters cost on top of CUDA-event timing (budget +0.3% with CUDA graphs).
  stamp "hardware counters' cost on the Qwen3 trainer, CUDA graphs"
  timeout 100 "$build/benchmarks/qwen3_overhead" --cuda-graphs --modes events,events+pm --rounds "${PM_ROUNDS:-6}" \
    >"$out/pm_overhead_graphs.log" 2>&1; echo "rc=$?"
  cat "$out/pm_overhead_graphs.log"
  # Eager blocks of one mode differ by up to 20% on that machine: PM_EAGER=0 skips a run that
  # cannot resolve +0.3% in a few rounds.
  if [ "${PM_EAGER:-1}" != 0 ]; then
    stamp "hardware counters' cost on the Qwen3 trainer, eager"
    timeout 100 "$build/benchmarks/qwen3_overhead" --modes events,events+pm --rounds "${PM_ROUNDS:-6}" \
      >"$out/pm_overhead_eager.log" 2>&1; echo "rc=$?"
    cat "$out/pm_overhead_eager.log"
  fi
fi

if want parity; then
  stamp "logit parity with transformers (Qwen3)"
  timeout 60 python3 "$root/tests/qwen3/hf_parity.py" --tool "$build/examples/qwen3/qwen3_logits" --device cuda \
    --family qwen3 >"$out/hf_parity.log" 2>&1; echo "rc=$?"; tail -3 "$out/hf_parity.log"
fi

if want llama_parity; then
  stamp "logit parity with transformers (Llama)"
  timeout 60 python3 "$root/tests/qwen3/hf_parity.py" --tool "$build/examples/qwen3/qwen3_logits" --device cuda \
    --family llama >"$out/hf_parity_llama.log" 2>&1; echo "rc=$?"; cat "$out/hf_parity_llama.log"
fi

if want llama_experiment; then
  stamp "the experiment on llama-3.2-1b: ${LLAMA_STEPS:-50} steps, bf16, checkpointing"
  mkdir -p "$out/llama_experiment"
  timeout 150 "$build/examples/qwen3/qwen3_accumulation" --preset llama-3.2-1b --steps "${LLAMA_STEPS:-50}" \
    --out "$out/llama_experiment" 2>&1 | grep -v '^\[' >"$out/llama_experiment.log"
  tail -32 "$out/llama_experiment.log"
fi

if want qwen3; then
  stamp "qwen3 tests on this LibTorch"
  (cd "$build" && timeout 60 ctest -R qwen3 >"$out/qwen3_ctest.log" 2>&1); tail -3 "$out/qwen3_ctest.log"
fi
stamp "done"
