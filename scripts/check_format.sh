#!/usr/bin/env bash
# Checks that every C++ file of the tree is formatted as .clang-format says (clang-format-14, as CI
# installs it): prints the files that differ and how to fix them, and exits 1. Without clang-format-14
# the check is skipped, and says so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
format=${TRACEML_CLANG_FORMAT:-clang-format-14}
if ! command -v "$format" >/dev/null; then
  echo "check_format: skipped ($format not found: apt-get install clang-format-14)"
  exit 0
fi
mapfile -t files < <(git ls-files '*.hpp' '*.cpp' '*.h' '*.cu')
differ=()
for f in "${files[@]}"; do
  "$format" --dry-run --Werror "$f" >/dev/null 2>&1 || differ+=("$f")
done
if [ ${#differ[@]} -gt 0 ]; then
  printf 'check_format: not as .clang-format says: %s\n' "${differ[@]}"
  echo "check_format: fix with: $format -i ${differ[*]}"
  exit 1
fi
echo "check_format: ${#files[@]} files as .clang-format says"
