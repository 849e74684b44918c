#!/usr/bin/env bash
# Builds the core tests with ThreadSanitizer and runs them; fails on any data race report.
#
#   scripts/tsan.sh [build-dir]        (default: build-tsan in the repository root)
#
# Core only (no LibTorch, examples or benchmarks): the recorder's lock-free rings, the step counters
# and the profiler's drain are what can race, and the core tests exercise them from several threads
# (tests/core/test_threads.cpp, test_scopes.cpp). The install and bare-compile tests build other
# projects and are skipped here.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${root}/build-tsan}"
jobs="${TRACEML_JOBS:-$(nproc)}"

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

cmake -S "${root}" -B "${build}" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DTRACEML_WITH_TORCH=OFF -DTRACEML_BUILD_EXAMPLES=OFF -DTRACEML_BUILD_BENCHMARKS=OFF
cmake --build "${build}" -j "${jobs}"

# halt_on_error: the first report fails the test that produced it (exit code 66), so ctest fails.
# Repeating the suite gives the scheduler more interleavings to show.
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 history_size=4 ${TSAN_OPTIONS:-}"
repeat="${TRACEML_TSAN_REPEAT:-3}"
ctest --test-dir "${build}" --output-on-failure -j "${jobs}" -LE install -E '^bare_compile$' \
  --repeat "until-fail:${repeat}"
echo "tsan: no data race reported (${repeat} runs of the core tests)"
