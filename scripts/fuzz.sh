#!/usr/bin/env bash
# Builds the fuzz targets of tests/fuzz/ with clang's libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each, one after the other, starting from its checked-in corpus.
# Fails on the first crash, broken contract, leak or timeout, and says where the input that caused
# it was saved: add that file to tests/fuzz/corpus/<target>/ and fix the parser.
#
#   scripts/fuzz.sh [seconds per target] [build-dir]   (defaults: 60, build-fuzz in the repository root)
#   TRACEML_FUZZ_RUNS=N        run each target for N inputs instead of a time
#   TRACEML_FUZZ_TARGETS="config schedule"   only these (default: every target)
#
# Needs clang and libFuzzer (Debian: clang-14, libfuzzer-14-dev). The corpus replay itself, with the
# normal compiler, is part of the ordinary test suite ("fuzz: <target> corpus replays").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
build="${2:-${root}/build-fuzz}"
jobs="${TRACEML_JOBS:-$(nproc)}"
targets="${TRACEML_FUZZ_TARGETS:-config safetensors_header token_file schedule summary}"

clang=""
for c in clang++ clang++-14; do
  if command -v "$c" >/dev/null 2>&1; then clang="$(command -v "$c")"; break; fi
done
[ -n "$clang" ] || { echo "fuzz: clang++ not found (apt-get install clang-14 libfuzzer-14-dev)"; exit 1; }

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake -S "${root}" -B "${build}" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="${clang}" \
  -DTRACEML_FUZZ=ON -DTRACEML_WITH_TORCH=OFF -DTRACEML_WITH_CUDA=OFF -DTRACEML_WITH_NVTX=OFF \
  -DTRACEML_BUILD_EXAMPLES=OFF -DTRACEML_BUILD_BENCHMARKS=OFF -DTRACEML_BUILD_TOOLS=OFF >/dev/null
cmake --build "${build}" -j "${jobs}" --target $(printf 'fuzz_%s ' ${targets})

limit=(-max_total_time="${seconds}")
if [ -n "${TRACEML_FUZZ_RUNS:-}" ]; then limit=(-runs="${TRACEML_FUZZ_RUNS}"); fi
export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1 ${UBSAN_OPTIONS:-}"
mkdir -p "${build}/crashes"
for t in ${targets}; do
  # New inputs go to the build folder's corpus; the checked-in one is only read.
  work="${build}/corpus/${t}"
  mkdir -p "${work}"
  log="${build}/fuzz_${t}.log"
  echo "fuzz: ${t} (${limit[*]})"
  if ! "${build}/tests/fuzz/fuzz_${t}" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="${build}/crashes/${t}-" "${work}" "${root}/tests/fuzz/corpus/${t}" >"${log}" 2>&1; then
    tail -n 60 "${log}"
    echo "fuzz: ${t} FAILED; the input is in ${build}/crashes/ (add it to tests/fuzz/corpus/${t}/ and fix the parser)"
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}")
  echo "fuzz: ${t}: ${runs} inputs, no crash"
done
