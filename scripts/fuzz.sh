#!/usr/bin/env bash
# Builds the fuzz targets of tests/fuzz/ with clang's libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each from its checked-in corpus (as many at once as there are
# cores, TRACEML_JOBS). Fails on a crash, broken contract, leak or timeout, and says where the input
# that caused it was saved: add that file to tests/fuzz/corpus/<target>/ and fix the parser.
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
targets="${TRACEML_FUZZ_TARGETS:-config safetensors_header token_file schedule summary steps cli}"

clang=""
for c in clang++ clang++-14; do
  if command -v "$c" >/dev/null 2>&1; then clang="$(command -v "$c")"; break; fi
done
[ -n "$clang" ] || { echo "fuzz: clang++ not found (apt-get install clang-14 libfuzzer-14-dev)"; exit 1; }

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# -O1 -g1: quick to compile, fast enough to run, and line numbers in reports.
cmake -S "${root}" -B "${build}" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" \
  -DCMAKE_CXX_COMPILER="${clang}" \
  -DTRACEML_FUZZ=ON -DTRACEML_WITH_TORCH=OFF -DTRACEML_WITH_CUDA=OFF -DTRACEML_WITH_NVTX=OFF \
  -DTRACEML_BUILD_EXAMPLES=OFF -DTRACEML_BUILD_BENCHMARKS=OFF -DTRACEML_BUILD_TOOLS=OFF >/dev/null
cmake --build "${build}" -j "${jobs}" --target $(printf 'fuzz_%s ' ${targets})

limit=(-max_total_time="${seconds}")
if [ -n "${TRACEML_FUZZ_RUNS:-}" ]; then limit=(-runs="${TRACEML_FUZZ_RUNS}"); fi
export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1 ${UBSAN_OPTIONS:-}"
mkdir -p "${build}/crashes"

# One target: new inputs go to the build folder's corpus; the checked-in one is only read.
fuzz_one() {
  local t=$1 work="${build}/corpus/$1" log="${build}/fuzz_$1.log"
  mkdir -p "${work}"
  if ! "${build}/tests/fuzz/fuzz_${t}" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="${build}/crashes/${t}-" "${work}" "${root}/tests/fuzz/corpus/${t}" >"${log}" 2>&1; then
    tail -n 60 "${log}"
    echo "fuzz: ${t} FAILED; the input is in ${build}/crashes/ (add it to tests/fuzz/corpus/${t}/ and fix the parser)"
    return 1
  fi
  echo "fuzz: ${t}: $(sed -n 's/^stat::number_of_executed_units: *//p' "${log}") inputs (${limit[*]}), no crash"
}

# A libFuzzer process uses one core: as many targets at once as there are jobs.
failed=0
running=0
for t in ${targets}; do
  if [ "${running}" -ge "${jobs}" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "${t}" &
  running=$((running + 1))
done
while [ "${running}" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit "${failed}"
