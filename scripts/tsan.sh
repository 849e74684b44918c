#!/usr/bin/env bash
# Builds the test programs that run threads with ThreadSanitizer and runs them; fails on any data race
# report.
#
#   scripts/tsan.sh [build-dir]        (default: build-tsan in the repository root)
#
# Core only (no LibTorch, examples or benchmarks): the recorder's lock-free rings, the step counters,
# the profiler's drain, the live view's redraw thread, the attribution worker and the session's exit
# path are what can race, and these programs exercise them from several threads
# (tests/core/test_threads.cpp, test_scopes.cpp, test_profiler.cpp, test_live_view.cpp, the NVTX
# injection, tests/gpu/test_attribution_stage.cpp). Programs that start no thread (the comparison,
# HTML, traits and compile-mode tests, the summary reader, the fuzz replays) gain nothing here and are
# left to scripts/test.sh and scripts/sanitize.sh. A new test program that starts threads goes in
# `programs` below, with its ctest prefix in `prefixes`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${root}/build-tsan}"
jobs="${TRACEML_JOBS:-$(nproc)}"
programs=(traceml_core_tests traceml_thread_tests traceml_nvtx_tests
          traceml_test_nvtx_injection traceml_gpu_cpu_tests traceml_gpu_status_tests traceml_session_tests
          traceml_phase_only_trainer traceml_phase_only_gpu_trainer)
prefixes='core|threads|nvtx|gpu-cpu|gpu-status|session'

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

# -O1 -g1: TSan's reports need line numbers, not full debug information (which doubles the compile).
cmake -S "${root}" -B "${build}" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DTRACEML_WITH_TORCH=OFF -DTRACEML_BUILD_EXAMPLES=OFF -DTRACEML_BUILD_BENCHMARKS=OFF -DTRACEML_BUILD_TOOLS=OFF
# Only the programs that exist in this configuration (NVTX and CUPTI parts need the CUDA toolkit).
listed=$(cmake --build "${build}" --target help)
have=()
for p in "${programs[@]}"; do
  if grep -qw -- "$p" <<<"${listed}"; then have+=("$p"); fi
done
cmake --build "${build}" -j "${jobs}" --target "${have[@]}"

# halt_on_error: the first report fails the test that produced it (exit code 66), so ctest fails.
# Repeating the suite gives the scheduler more interleavings to show.
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 history_size=4 ${TSAN_OPTIONS:-}"
repeat="${TRACEML_TSAN_REPEAT:-3}"
ctest --test-dir "${build}" --output-on-failure -j "${jobs}" -R "^(${prefixes}):" \
  --repeat "until-fail:${repeat}"
echo "tsan: no data race reported (${repeat} runs of the threaded test programs)"
