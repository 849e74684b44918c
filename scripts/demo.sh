#!/usr/bin/env bash
# The main job: builds traceml and runs the gradient-accumulation experiment (examples/qwen3) on its
# default settings: the tiny model on a machine without a GPU, Qwen3-1.7B on a GPU. Outputs go to
# out/ (table on the terminal; JSON summary, per-step JSONL, Chrome traces and the HTML report beside
# it); at the end the demo lists every file the run wrote, with its size, and how to open the report.
# Its exit status is the experiment's.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_missing_packages
# Only what the demo runs, and the traceml command that reads its outputs again (show, compare,
# html): the test suite and benchmarks are scripts/test.sh's to build.
BUILD_TARGETS="qwen3_accumulation traceml_minimal_example traceml_cli" configure_and_build
mkdir -p "$ROOT/out"

# Files newer than this stamp are the ones this run wrote (out/ may hold earlier runs' files).
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT

# "12.3 KB": a byte count as people read it.
human_size() {
  awk -v b="$1" 'BEGIN { split("B KB MB GB", u); i = 1
    while (b >= 1024 && i < 4) { b /= 1024; i++ }
    printf(i == 1 ? "%d %s" : "%.1f %s", b, u[i]) }'
}

list_outputs() {
  local files=() f html=""
  while IFS= read -r f; do files+=("$f"); done < <(find "$ROOT/out" -type f -newer "$stamp" | sort)
  if [ ${#files[@]} -eq 0 ]; then
    echo "traceml demo: no files written to out/"
    return
  fi
  echo
  echo "traceml demo: wrote (relative to $ROOT)"
  for f in "${files[@]}"; do
    printf '  %-44s %10s\n' "${f#"$ROOT"/}" "$(human_size "$(wc -c <"$f")")"
    [[ -z "$html" && "$f" == *.html ]] && html=$f
  done
  if [ -n "$html" ]; then
    local opener=xdg-open shown
    [ "$(uname -s)" = Darwin ] && opener=open
    # Relative to where the demo was started from when the report lies below it, else absolute.
    shown=$html
    [[ "$html" == "$PWD"/* ]] && shown=${html#"$PWD"/}
    echo "Open the HTML report in a browser: $opener $shown"
  fi
  local summary cli="$BUILD_DIR/tools/traceml"
  summary=$(printf '%s\n' "${files[@]}" | grep -m1 '_summary\.json$' || true)
  if [ -n "$summary" ] && [ -x "$cli" ]; then
    echo "Read it again, or compare it with a later run: ${cli#"$PWD"/} show ${summary#"$PWD"/}"
  fi
}

status=0
if [ -x "$BUILD_DIR/examples/qwen3/qwen3_accumulation" ]; then
  "$BUILD_DIR/examples/qwen3/qwen3_accumulation" --out "$ROOT/out" "$@" || status=$?
else
  "$BUILD_DIR/examples/minimal/traceml_minimal_example" "$ROOT/out" "$@" || status=$?
fi
list_outputs
exit $status
