#!/usr/bin/env bash
# What traceml costs a build, in two parts.
# 1. A translation unit: the best of N compiles (-O2, -c) of a file that includes only
#    <traceml/phase.hpp> (every trainer source), of one that includes <traceml/traceml.hpp> (the
#    profiler and the sinks), of the session (src/session.cpp), and of an empty file for reference;
#    plus preprocessed line counts. Optionally against another include folder (an older checkout,
#    say) to see what a change added.
# 2. A user's target (TARGET_REPEATS times, 0 skips it): an 80-line trainer compiled as three targets
#    of one CMake project that takes traceml with add_subdirectory (core only): `plain` without
#    traceml, `traced` including <traceml/phase.hpp> and linking traceml::traceml, `traced_again` the
#    same a second time. Each repeat starts from a clean build and times, in order, `plain`, the
#    TRACEML_OUT session's object library (compiled once per build tree), `traced` (its own compile
#    and link, the session already built) and `traced_again`, and prints each and the medians. The
#    goal: a traced target at most 5 s over the plain one.
#   [TARGET_REPEATS=3] benchmarks/compile_cost.sh [N=5] [OTHER_INCLUDE_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${1:-5}
TARGET_REPEATS=${TARGET_REPEATS:-3}
OTHER=${2:-}
CXX=${CXX:-c++}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf 'int main() { return 0; }\n' >"$TMP/empty.cpp"
printf '#include <traceml/phase.hpp>\nint main() { return 0; }\n' >"$TMP/phase.cpp"
printf '#include <traceml/traceml.hpp>\nint main() { return 0; }\n' >"$TMP/traceml.cpp"
cp "$ROOT/src/session.cpp" "$TMP/session.cpp"

best_of() {  # best wall time of N compiles, in seconds
  local inc=$1 src=$2 best="" t0 t1 t
  for _ in $(seq "$N"); do
    t0=$(date +%s%N)
    "$CXX" -std=c++17 -O2 -I"$inc" -c "$src" -o "$TMP/out.o"
    t1=$(date +%s%N)
    t=$(( (t1 - t0) / 1000000 ))
    if [ -z "$best" ] || [ "$t" -lt "$best" ]; then best=$t; fi
  done
  printf '%d.%03d' $((best / 1000)) $((best % 1000))
}
lines() { "$CXX" -std=c++17 -I"$1" -E "$2" | wc -l; }

printf '%-28s %10s %12s\n' "translation unit" "best s" "pp lines"
for inc in "$ROOT/include" ${OTHER:+"$OTHER"}; do
  [ "$inc" != "$ROOT/include" ] && echo "-- include folder: $inc"
  for f in empty phase traceml session; do
    [ "$f" = session ] && [ ! -f "$inc/traceml/session.hpp" ] && continue
    printf '%-28s %10s %12s\n' "$f.cpp" "$(best_of "$inc" "$TMP/$f.cpp")" "$(lines "$inc" "$TMP/$f.cpp")"
  done
done

[ "$TARGET_REPEATS" -gt 0 ] || exit 0
work=$TMP/targets
mkdir -p "$work/project"
cat >"$work/project/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(compile_cost LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_BUILD_TYPE Release)
set(TRACEML_WITH_CUDA OFF CACHE BOOL "" FORCE)
set(TRACEML_WITH_NVTX OFF CACHE BOOL "" FORCE)
set(TRACEML_WITH_TORCH OFF CACHE BOOL "" FORCE)
add_subdirectory("$ROOT" traceml)
add_executable(plain trainer.cpp)
add_executable(traced trainer.cpp)
target_compile_definitions(traced PRIVATE WITH_TRACEML=1)
target_link_libraries(traced PRIVATE traceml::traceml)
add_executable(traced_again trainer.cpp)
target_compile_definitions(traced_again PRIVATE WITH_TRACEML=1)
target_link_libraries(traced_again PRIVATE traceml::traceml)
CMAKE
cat >"$work/project/trainer.cpp" <<'CPP'
// A small trainer: a linear model fitted by SGD on synthetic data, with its steps and phases marked.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>
#if WITH_TRACEML
#include <traceml/phase.hpp>
#else
#define TRACEML_STEP()
#define TRACEML_PHASE(kind)
#endif

struct batch {
  std::vector<double> x, y;
};

batch next_batch(std::mt19937& rng, int n, int d) {
  std::normal_distribution<double> noise(0.0, 0.1);
  batch b{std::vector<double>(static_cast<std::size_t>(n * d)), std::vector<double>(static_cast<std::size_t>(n))};
  for (int i = 0; i < n; ++i) {
    double t = 0;
    for (int j = 0; j < d; ++j) {
      const double v = noise(rng) * 10;
      b.x[static_cast<std::size_t>(i * d + j)] = v;
      t += v * (j + 1);
    }
    b.y[static_cast<std::size_t>(i)] = t + noise(rng);
  }
  return b;
}

int main() {
  const int n = 64, d = 16, steps = 200;
  std::mt19937 rng(1);
  std::vector<double> w(static_cast<std::size_t>(d), 0.0), grad(static_cast<std::size_t>(d));
  double loss = 0;
  for (int s = 0; s < steps; ++s) {
    TRACEML_STEP();
    batch b;
    {
      TRACEML_PHASE(dataloader);
      b = next_batch(rng, n, d);
    }
    std::vector<double> pred(static_cast<std::size_t>(n));
    {
      TRACEML_PHASE(forward);
      for (int i = 0; i < n; ++i)
        pred[static_cast<std::size_t>(i)] = std::inner_product(w.begin(), w.end(), b.x.begin() + i * d, 0.0);
    }
    {
      TRACEML_PHASE(backward);
      std::fill(grad.begin(), grad.end(), 0.0);
      loss = 0;
      for (int i = 0; i < n; ++i) {
        const double e = pred[static_cast<std::size_t>(i)] - b.y[static_cast<std::size_t>(i)];
        loss += e * e / n;
        for (int j = 0; j < d; ++j) grad[static_cast<std::size_t>(j)] += 2 * e * b.x[static_cast<std::size_t>(i * d + j)] / n;
      }
    }
    {
      TRACEML_PHASE(optimizer);
      for (int j = 0; j < d; ++j) w[static_cast<std::size_t>(j)] -= 1e-3 * grad[static_cast<std::size_t>(j)];
    }
  }
  std::printf("loss %.4f\n", loss);
  return std::isfinite(loss) ? 0 : 1;
}
CPP
cmake -S "$work/project" -B "$work/build" -G Ninja >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
seconds() {  # the wall time of building one target, in seconds
  local start end
  start=$(date +%s.%N)
  cmake --build "$work/build" --target "$1" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { print b - a }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
plain=() session=() traced=() again=()
for r in $(seq "$TARGET_REPEATS"); do
  cmake --build "$work/build" --target clean >/dev/null
  plain+=("$(seconds plain)")
  session+=("$(seconds traceml_session_core)")
  traced+=("$(seconds traced)")
  again+=("$(seconds traced_again)")
  printf 'repeat %d: plain %.1f s, session (once per tree) %.1f s, traced %.1f s, traced again %.1f s\n' \
    "$r" "${plain[-1]}" "${session[-1]}" "${traced[-1]}" "${again[-1]}"
done
p=$(median "${plain[@]}") s=$(median "${session[@]}") t=$(median "${traced[@]}") a=$(median "${again[@]}")
printf 'median of %d on %d cores: plain %.1f s; the session, once per build tree, %.1f s; a traced target %.1f s (%+.1f s over plain), another %.1f s (%+.1f s)\n' \
  "$TARGET_REPEATS" "$(nproc)" "$p" "$s" "$t" "$(awk -v a="$t" -v b="$p" 'BEGIN { print a - b }')" "$a" "$(awk -v a="$a" -v b="$p" 'BEGIN { print a - b }')"
