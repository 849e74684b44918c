#!/usr/bin/env bash
# GPU-machine check of the bundled Qwen3 trainer (examples/qwen3):
#   1. build the trainer's tools and tests against the CUDA LibTorch of the Python torch install,
#   2. run the qwen3 CPU tests there (LibTorch 2.x: fused SDPA/rms_norm/AdamW paths),
#   3. logit parity with transformers (tests/qwen3/hf_parity.py) on CPU and CUDA,
#   4. a short step timing of qwen3-1.7b at 4x1 and 1x4 (bf16; without and with checkpointing),
#   5. the Python reference (transformers + peft) on the same schedules, for the ratio.
#
# Usage, from the repository root on the GPU machine:
#   scripts/gpu_qwen3_check.sh [DEPS_DIR]
# DEPS_DIR (default .deps) holds the unpacked Debian packages catch2, nlohmann-json3-dev and
# libcli11-dev (DEPS_DIR/usr/...), since that machine has no package manager. Logs go to $OUT
# (default ./gpu-qwen3-out); STEPS (default 8) sets the timed steps per schedule.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps=$(cd "${1:-$root/.deps}" 2>/dev/null && pwd || true)
out=${OUT:-$root/gpu-qwen3-out}
build=${BUILD:-/tmp/traceml-qwen3-build}
steps=${STEPS:-8}
mkdir -p "$out"

tp=$(python3 -c 'import torch, torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null) || {
  echo "gpu_qwen3_check: no Python torch install to take LibTorch from"; exit 1; }
[ -n "$deps" ] && [ -d "$deps/usr" ] || { echo "gpu_qwen3_check: no DEPS_DIR/usr with catch2 and nlohmann-json"; exit 1; }

echo "== configure + build ($build)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tp;$deps/usr" \
  >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
grep -E "traceml:" "$out/configure.log"
cmake --build "$build" -j"$(nproc)" --target qwen3_logits qwen3_step_timing traceml_qwen3_tests \
  >"$out/build.log" 2>&1 || { grep -E "error|Error" -A4 "$out/build.log" | head -80; exit 1; }

status=0
echo "== qwen3 tests (CPU, LibTorch $(python3 -c 'import torch;print(torch.__version__)'))"
(cd "$build" && ctest -R "qwen3" --output-on-failure) >"$out/ctest.log" 2>&1 || status=1
tail -4 "$out/ctest.log"

echo "== logit parity with transformers"
for dev in cpu cuda; do
  python3 "$root/tests/qwen3/hf_parity.py" --tool "$build/examples/qwen3/qwen3_logits" --device "$dev" \
    2>&1 | tee "$out/hf_parity_$dev.log" || status=1
done

echo "== C++ step time, qwen3-1.7b, seq 512, bf16"
timing="$build/examples/qwen3/qwen3_step_timing"
"$timing" --preset qwen3-1.7b --schedules 4x1,1x4 --steps "$steps" --warmup 3 2>&1 | tee "$out/timing.log" || status=1
"$timing" --preset qwen3-1.7b --schedules 4x1,1x4 --steps "$steps" --warmup 3 --checkpointing 2>&1 |
  tee "$out/timing_checkpointing.log" || status=1
# Variants at 4x1: key/value heads copied instead of shared by the attention kernel, and peft's
# fp32 adapters (what the adapter dtype costs).
"$timing" --preset qwen3-1.7b --schedules 4x1 --steps 5 --warmup 3 --expand-kv 2>&1 | tee "$out/timing_expand_kv.log" || status=1
"$timing" --preset qwen3-1.7b --schedules 4x1 --steps 5 --warmup 3 --fp32-adapters 2>&1 | tee "$out/timing_fp32_adapters.log" || status=1

echo "== Python reference (transformers + peft, eager), same schedules"
python3 "$root/benchmarks/reference_hf.py" --preset qwen3-1.7b --schedules 4x1,1x4 --steps $((steps + 3)) --skip 3 \
  --json "$out/reference_hf.json" 2>&1 | tee "$out/reference_hf.log" || status=1

echo "== logs in $out"
exit $status
