#!/usr/bin/env bash
# What including traceml costs a translation unit: the best of N compiles (-O2, -c) of a file that
# includes only <traceml/phase.hpp> (every trainer source), of one that includes <traceml/traceml.hpp>
# (the profiler and the sinks), of the session (src/session.cpp, compiled once per CMake target), and
# of an empty file for reference; plus preprocessed line counts. Optionally against another include
# folder (an older checkout, say) to see what a change added:
#   benchmarks/compile_cost.sh [N=5] [OTHER_INCLUDE_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${1:-5}
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
