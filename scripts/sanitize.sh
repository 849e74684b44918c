#!/usr/bin/env bash
# Builds the tests (core, qwen3 trainer, examples, the traceml command, fuzz-corpus replays) with
# AddressSanitizer and UndefinedBehaviorSanitizer and runs them; any report fails the test that made it.
#
#   scripts/sanitize.sh [build-dir]        (default: build-asan in the repository root)
#   TRACEML_SANITIZE_CXX=g++ scripts/sanitize.sh    another compiler (default: clang++ where found)
#
# clang by default: under instrumentation it compiles a LibTorch translation unit in three quarters of
# GCC's time, and LibTorch 1.13 (built with GCC) links with it unchanged. -O0: half the compile time
# of -O1 (the LibTorch headers' inline code is most of it), and the tests' work is in LibTorch's own,
# optimised, kernels. The install tests (they build other projects, uninstrumented) and the browser
# test (chromium) are left to scripts/test.sh.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${root}/build-asan}"
jobs="${TRACEML_JOBS:-$(nproc)}"

cxx="${TRACEML_SANITIZE_CXX:-}"
if [ -z "${cxx}" ]; then
  for c in clang++ clang++-14; do
    if command -v "$c" >/dev/null 2>&1; then cxx="$(command -v "$c")"; break; fi
  done
fi
compiler=()
if [ -n "${cxx}" ]; then compiler=(-DCMAKE_CXX_COMPILER="${cxx}"); fi
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

# -g1: line numbers in reports.
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "${root}" -B "${build}" "${generator[@]}" "${compiler[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O0 -g1" -DCMAKE_CXX_FLAGS="${sanitize}" \
  -DCMAKE_EXE_LINKER_FLAGS="${sanitize}" -DCMAKE_SHARED_LINKER_FLAGS="${sanitize}" \
  -DTRACEML_BUILD_BENCHMARKS=OFF
cmake --build "${build}" -j "${jobs}"

# A report ends the process with a failing status, so ctest fails the test that produced it.
export ASAN_OPTIONS="halt_on_error=1 detect_leaks=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}"
ctest --test-dir "${build}" --output-on-failure -j "${jobs}" -LE 'install|browser' -E '^bare_compile$'
echo "sanitize: no AddressSanitizer or UndefinedBehaviorSanitizer report"
