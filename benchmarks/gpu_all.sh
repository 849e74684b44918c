#!/usr/bin/env bash
# Everything that needs a GPU, in one go, with a time limit per part (most important first):
# build; the [gpu] tests; what each profiler part costs a loop of ~2 ms steps (small_steps); hardware
# counters (the PM-sampling probe, their test, their agreement with kernel records, their cost); the
# profiling overhead on the Qwen3 trainer (eager, then CUDA graphs); the
# C++ trainer against the Python reference side by side; the reference experiment (qwen3-1.7b, 100
# steps, bf16, checkpointing); logit parity with transformers; the qwen3 tests on this LibTorch; the
# chunked loss against the full logits and fp16 (loss scaling) against bf16, each side by side; the
# schedule sweep (a case that runs out of memory, and one whose candidates are close); the Llama
# family (parity, then the experiment on llama-3.2-1b); the training loop beside 32 threads flooding
# the profiler with records.
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
parts=${PARTS:-tests small_steps pm overhead pm_overhead side_by_side experiment parity llama_parity llama_experiment qwen3 chunked_loss fp16 sweep sweep_close flooding}
want() { [[ " $parts " == *" $1 "* ]]; }

tp=$(python3 -c 'import torch, torch.utils; print(torch.utils.cmake_prefix_path)')
stamp "configure"
# Catch2_DIR: a system-wide Catch2 v3 would otherwise shadow the v2 in DEPS_DIR.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tp;$deps/usr" \
  -DCatch2_DIR="$deps/usr/lib/cmake/Catch2" \
  >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
grep "traceml:" "$out/configure.log"
stamp "build"
targets=""
{ want tests || { want pm && [ "${PM_TESTS:-1}" != 0 ]; }; } && targets+=" traceml_gpu_tests"  # PM_TESTS=0: no [pm] test
{ want overhead || want overhead_graphs || want overhead_eager || want pm_overhead; } && targets+=" qwen3_overhead"
{ want side_by_side || want experiment || want pm || want chunked_loss || want fp16 || want sweep || want sweep_close ||
  want llama_experiment; } && targets+=" qwen3_accumulation"
want experiment && targets+=" verdict_figures traceml_cli"
want flooding && targets+=" flooding_threads"
want small_steps && targets+=" small_steps verdict_figures"
want pm && targets+=" pm_sampling_probe"
{ want parity || want llama_parity; } && targets+=" qwen3_logits"
want qwen3 && targets+=" traceml_qwen3_tests qwen3_step_timing qwen3_logits traceml"  # the ctest -R qwen3 programs
want sweep && targets+=" traceml_torch_adapter_compile"
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $targets -- -k 0 >"$out/build.log" 2>&1 || grep -E "error|FAILED" -A5 "$out/build.log" | head -60
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$out/gpu.txt" 2>&1

if want tests; then
  stamp "[gpu] tests"
  timeout 120 "$build/tests/gpu/traceml_gpu_tests" -d yes >"$out/gpu_tests.log" 2>&1; echo "rc=$?"
  tail -3 "$out/gpu_tests.log"
  # Built only where LibTorch has c10d's NCCL process group (an unknown target would stop the build).
  if [ "${NCCL_TEST:-1}" != 0 ] && grep -q "traceml_nccl_tests" "$build/build.ninja" 2>/dev/null; then  # NCCL_TEST=0 skips it
    stamp "[nccl] test"
    cmake --build "$build" --target traceml_nccl_tests >"$out/nccl_build.log" 2>&1 ||
      grep -E "error" -A5 "$out/nccl_build.log" | head -40
    timeout 120 "$build/tests/gpu/traceml_nccl_tests" -d yes >"$out/nccl_tests.log" 2>&1; echo "rc=$?"
    grep -E "^\[nccl\]|FAILED|passed|failed" "$out/nccl_tests.log" | head -20
  fi
fi

if want small_steps; then
  # A small CNN on MNIST-shaped data (~2 ms steps): plain, the core profiler, then each output and GPU
  # part in turn up to what TRACEML_OUT gives; the defaults' budget is +1% of the step.
  stamp "small steps: each profiler part's cost per step, up to the defaults"
  timeout "${SMALL_LIMIT:-480}" "$build/benchmarks/small_steps" --rounds "${SMALL_ROUNDS:-30}" --steps "${SMALL_STEPS:-100}" \
    --warmup 30 ${SMALL_MODES:+--modes "$SMALL_MODES"} --out "$out/small_steps_out" 2>&1 | tee "$out/small_steps.log"
  echo "rc=${PIPESTATUS[0]}"
  # The verdicts' figures of one defaults block (a loop of short steps that copies each batch to the
  # device in its dataloader phase), then the per-round outputs go.
  one=$(ls "$out"/small_steps_out/*_summary.json 2>/dev/null | tail -1)
  [ -n "$one" ] && "$build/benchmarks/verdict_figures" "$one" >"$out/small_steps_verdicts.log" 2>&1
  rm -rf "$out/small_steps_out"
fi

if want pm; then
  # Hardware counters (CUPTI PM sampling): feasibility, the [pm] test, and their agreement with
  # kernel records on the trainer with every step recorded (eager, then CUDA graphs).
  stamp "PM sampling probe"
  timeout 120 "$build/benchmarks/pm_sampling_probe" --launch-rounds "${PM_LAUNCH_ROUNDS:-20}" >"$out/pm_probe.log" 2>&1
  echo "rc=$?"
  cat "$out/pm_probe.log"
  # The decoder's CPU against the size of its counter-data image (8,192 samples was the default).
  if [ "${PM_DECODE_SIZES:-1}" != 0 ]; then
    timeout 60 "$build/benchmarks/pm_sampling_probe" --max-samples 8192 --tiny-kernels 10 >"$out/pm_probe_8192.log" 2>&1
    echo "with 8192 samples per decode pass:"; grep -E "^3\. rate" "$out/pm_probe_8192.log"
  fi
  if [ "${PM_TESTS:-1}" != 0 ]; then
    stamp "[gpu][pm] test"
    timeout 90 "$build/tests/gpu/traceml_gpu_tests" "[pm],[default],[degrade]" -d yes >"$out/gpu_pm_tests.log" 2>&1; echo "rc=$?"
    grep -E "hardware counters|busy:|SKIPPED|FAILED|passed|failed" "$out/gpu_pm_tests.log" | head -30
  fi
  # The engine's time per launch the probe measured on isolated tiny kernels (its part 5): the
  # summaries then also hold the records' busy share with it (the launch model).
  engine=$(awk '$1 == "isolated" && $NF ~ /^[0-9.]+$/ {print $NF}' "$out/pm_probe.log")
  for mode in eager graphs; do
    stamp "counters vs kernel records, every step recorded ($mode)"
    flags=(); [ "$mode" = graphs ] && flags=(--cuda-graphs)
    mkdir -p "$out/agreement_$mode"
    timeout $((60 + 2 * ${AGREE_STEPS:-12})) "$build/examples/qwen3/qwen3_accumulation" --schedules 1x4,4x1 \
      --steps "${AGREE_STEPS:-12}" --warmup 2 \
      --record-budget 0 --counter-budget 0 --no-traces "${flags[@]}" ${engine:+--launch-engine-us "$engine"} --out "$out/agreement_$mode" \
      >"$out/agreement_$mode.log" 2>&1; echo "rc=$?"
    python3 "$root/benchmarks/counter_agreement.py" "$out/agreement_$mode/accumulation_summary.json" 2>&1 |
      tee "$out/agreement_$mode.txt"
  done
fi

# The trainer's defaults (what qwen3_accumulation runs with) against no profiler, checkpointing on as
# in the experiment: the ratio, and the parts that bound it (qwen3_overhead's header). CUDA graphs
# first: there the step is the GPU's, so its cost also bounds the GPU work the profiler adds to an
# eager step. OVERHEAD_MODES adds modes (e.g. events,cupti@0.5) beside off and defaults. The `off`
# blocks are as long as the defaults' (--block): a ratio of 400-step blocks to 4-step ones rests on
# three untraced steps a round.
overhead_modes=defaults${OVERHEAD_MODES:+,$OVERHEAD_MODES}
if want overhead || want overhead_graphs; then
  for sched in ${GRAPH_SCHEDULES:-4x1 1x4}; do
    stamp "overhead of the defaults on the Qwen3 trainer, CUDA graphs, $sched"
    timeout 300 "$build/benchmarks/qwen3_overhead" --cuda-graphs --schedules "$sched" --modes "$overhead_modes" \
      --rounds "${GRAPH_ROUNDS:-8}" --budget-block "${GRAPH_BLOCK:-50}" --block "${GRAPH_BLOCK:-50}" >"$out/overhead_graphs_$sched.log" 2>&1
    echo "rc=$?"; cat "$out/overhead_graphs_$sched.log"
  done
fi
if want overhead || want overhead_eager; then
  # SCHEDULE:ROUNDS:BLOCK each; 1x4's steps are four times 4x1's.
  for spec in ${EAGER_SPECS:-4x1:4:100 1x4:3:50}; do
    IFS=: read -r sched rounds block <<<"$spec"
    stamp "overhead of the defaults on the Qwen3 trainer, eager, $sched ($rounds rounds of $block steps)"
    timeout 400 "$build/benchmarks/qwen3_overhead" --schedules "$sched" --modes "$overhead_modes" --rounds "$rounds" \
      --budget-block "$block" --block "$block" >"$out/overhead_eager_$sched.log" 2>&1
    echo "rc=$?"; cat "$out/overhead_eager_$sched.log"
  done
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
  # Each verdict's figure beside its threshold (docs/verdicts.md), and the verdicts as `traceml show` gives them.
  summary="$out/reference_experiment/accumulation_summary.json"
  "$build/benchmarks/verdict_figures" "$summary" >"$out/verdict_figures.log" 2>&1
  "$build/tools/traceml" show "$summary" >"$out/reference_experiment_show.log" 2>&1
  cat "$out/verdict_figures.log"
fi

if want pm_overhead; then
  # What the counters cost on top of CUDA-event timing (budget +0.3% with CUDA graphs).
  if [ "${PM_GRAPHS:-1}" != 0 ]; then  # PM_GRAPHS=0 skips it
    stamp "hardware counters' cost on the Qwen3 trainer, CUDA graphs"
    timeout $((40 + 15 * ${PM_ROUNDS:-6})) "$build/benchmarks/qwen3_overhead" --cuda-graphs --modes events,events+pm \
      --rounds "${PM_ROUNDS:-6}" ${PM_GRAPHS_SCHEDULES:+--schedules "$PM_GRAPHS_SCHEDULES"} \
      >"$out/pm_overhead_graphs.log" 2>&1; echo "rc=$?"
    cat "$out/pm_overhead_graphs.log"
  fi
  # Eager blocks of one mode differ by up to 20% on that machine: many short blocks, so that the
  # interval of the median ratio narrows (PM_EAGER=0 skips it).
  if [ "${PM_EAGER:-1}" != 0 ]; then
    stamp "hardware counters' cost on the Qwen3 trainer, eager"
    # events+pmalt: the sampler on every other step, against its neighbours (what blocks cannot resolve).
    timeout 240 "$build/benchmarks/qwen3_overhead" --modes "${PM_EAGER_MODES:-events,events+pm,events+pmalt}" \
      --rounds "${PM_EAGER_ROUNDS:-8}" --block "${PM_EAGER_BLOCK:-11}" ${PM_EAGER_SCHEDULES:+--schedules "$PM_EAGER_SCHEDULES"} \
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
  (cd "$build" && timeout 240 ctest -R qwen3 -j "$(nproc)" >"$out/qwen3_ctest.log" 2>&1); tail -3 "$out/qwen3_ctest.log"
fi
# qwen3_accumulation on 1x4 and 4x1, eager and with CUDA graphs, once per variant given as
# "LABEL:FLAGS"; then the variants side by side per mode (the first variant is the baseline).
# Without checkpointing, as the side-by-side timing; CUDA events for phase times and peak memory.
variants_side_by_side() {
  local tag=$1 limit=$2; shift 2
  local mode label flags args
  for mode in eager graphs; do
    args=()
    for v in "$@"; do
      label=${v%%:*}; flags=${v#*:}
      stamp "$tag, $mode: $label"
      mkdir -p "$out/${tag}_$mode/$label"
      # shellcheck disable=SC2086
      timeout "$limit" "$build/examples/qwen3/qwen3_accumulation" --schedules 1x4,4x1 --steps "${VARIANT_STEPS:-40}" \
        --warmup 5 --no-checkpointing --gpu-timing events --no-hw-counters --no-traces \
        $([ "$mode" = graphs ] && echo --cuda-graphs) $flags --out "$out/${tag}_$mode/$label" \
        >"$out/${tag}_$mode/$label.log" 2>&1; echo "rc=$?"
      grep -E "loss:|loss scaling|CUDA graph capture failed" "$out/${tag}_$mode/$label.log"
      args+=("$label=$out/${tag}_$mode/$label/accumulation_summary.json")
    done
    python3 "$root/benchmarks/summaries_side_by_side.py" "${args[@]}" | tee "$out/${tag}_$mode.txt"
  done
}

if want chunked_loss; then
  # The loss over the full [tokens, vocab] logits against chunks of 1024 target tokens
  # (examples/qwen3/chunked_loss.hpp): step time, MFU, peak memory, losses.
  chunks=(); for c in ${LOSS_CHUNKS:-1024 256}; do chunks+=("chunk$c:--loss-chunk $c"); done
  variants_side_by_side chunked_loss 120 "full:--loss-chunk 0" "${chunks[@]}"
fi

if want fp16; then
  # fp16 with dynamic loss scaling against bf16: step time, loss trajectories, skipped steps.
  VARIANT_STEPS=${FP16_STEPS:-100} variants_side_by_side fp16 200 "bf16:--dtype bf16" "fp16:--dtype fp16"
fi

if want sweep; then
  stamp "LibTorch adapter: out-of-memory errors recognised, device memory"
  timeout 60 "$build/tests/gpu/traceml_torch_adapter_compile" 2>&1 | tail -3
  # 128x1 without checkpointing ran out of memory inside forward on the H200: the probes go down
  # until a micro-batch fits, and the candidates after an OOM are measured whole.
  stamp "schedule sweep: effective batch 128, no checkpointing (out of memory expected)"
  mkdir -p "$out/sweep_oom"
  timeout 420 "$build/examples/qwen3/qwen3_accumulation" --sweep 128 --no-checkpointing --steps 6 --warmup 2 \
    --repeats 2 --sweep-candidates 2 --no-traces --out "$out/sweep_oom" >"$out/sweep_oom.log" 2>"$out/sweep_oom.err"
  echo "rc=$?"; grep '^\[sweep\]' "$out/sweep_oom.err"; sed -n '/^Schedule sweep/,$p' "$out/sweep_oom.log"
  # Without the sweep: the schedule after one that ran out of memory inside forward must be measured
  # whole (it read "0 steps measured" and 0.0 ms before profilers abandoned the interrupted step).
  stamp "a schedule after an out-of-memory one: --schedules 96x1,1x96"
  mkdir -p "$out/after_oom"
  timeout 120 "$build/examples/qwen3/qwen3_accumulation" --schedules 96x1,1x96 --steps 2 --warmup 0 \
    --no-checkpointing --gpu-timing off --no-traces --out "$out/after_oom" >"$out/after_oom.log" 2>&1
  echo "rc=$?"; grep -E "^schedule 96x1|median step ms|measured steps" "$out/after_oom.log"
fi

if want sweep_close; then
  # Large micro-batches with CUDA graphs fill the GPU alike: 16x1 and 8x2 are close, often a tie.
  stamp "schedule sweep: effective batch ${CLOSE_BATCH:-16}, CUDA graphs (close candidates)"
  mkdir -p "$out/sweep_close"
  timeout 300 "$build/examples/qwen3/qwen3_accumulation" --sweep "${CLOSE_BATCH:-16}" --cuda-graphs \
    --steps "${CLOSE_STEPS:-20}" --warmup 5 --repeats 3 --sweep-candidates "${CLOSE_CANDIDATES:-3}" --no-traces \
    --out "$out/sweep_close" >"$out/sweep_close.log" 2>"$out/sweep_close.err"
  echo "rc=$?"; grep '^\[sweep\]' "$out/sweep_close.err"; sed -n '/^Schedule sweep/,$p' "$out/sweep_close.log"
fi

if want flooding; then
  # 32 threads recording phases non-stop beside the training loop's 2 ms steps: the loop's step time
  # with the profiler against without (the drain at step end is bounded).
  stamp "flooding threads: ${FLOOD_THREADS:-32} threads beside 2 ms steps"
  timeout 120 "$build/benchmarks/flooding_threads" --threads "${FLOOD_THREADS:-32}" --rounds "${FLOOD_ROUNDS:-20}" \
    >"$out/flooding.log" 2>&1; echo "rc=$?"
  cat "$out/flooding.log"
fi

stamp "done"
