#!/usr/bin/env bash
# Does the explanation of the 1x4-vs-4x1 gap depend on how many steps CUPTI recorded? Runs the
# accumulation experiment once per recording budget and prints, per run, the gap and its split
# (GPU idle / GPU busy / optimizer / everything else, in % of the gap) side by side. The split is
# computed from steps without kernel records plus the recorded steps' busy time, so it should
# agree across budgets within the run-to-run noise.
#
#   benchmarks/budget_split.sh BUILD_DIR OUT_DIR ["0.5 2 5"] [qwen3_accumulation options...]
set -euo pipefail
build=${1:?build dir}
out=${2:?output dir}
budgets=${3:-0.5 2 5}
shift $(( $# < 3 ? $# : 3 ))
exe="$build/examples/qwen3/qwen3_accumulation"
[ -x "$exe" ] || { echo "budget_split: $exe not built"; exit 1; }
for b in $budgets; do
  mkdir -p "$out/budget_$b"
  "$exe" --schedules 1x4,4x1 --record-budget "$b" --no-traces --out "$out/budget_$b" "$@" >"$out/budget_$b/run.log" 2>&1 ||
    { echo "budget $b: failed"; tail -20 "$out/budget_$b/run.log"; continue; }
done
python3 - "$out" $budgets <<'PY'
import json, sys
out, budgets = sys.argv[1], sys.argv[2:]
print(f"{'budget %':>9} {'gap ms':>8} {'idle %':>7} {'busy %':>7} {'optim %':>8} {'other %':>8} {'recorded':>9} {'untraced':>9}")
for b in budgets:
    try:
        g = json.load(open(f"{out}/budget_{b}/accumulation_summary.json"))["comparison"]["gap"]
    except (OSError, KeyError, ValueError) as e:
        print(f"{b:>9} no result ({e})")
        continue
    pct = lambda k: 100.0 * g[k] / g["gap_ms"] if g["gap_ms"] else float("nan")
    print(f"{b:>9} {g['gap_ms']:8.1f} {pct('fb_idle_ms'):7.1f} {pct('fb_busy_ms'):7.1f} {pct('optimizer_ms'):8.1f} "
          f"{pct('other_ms'):8.1f} {g['slow_recorded_steps']:>4}/{g['fast_recorded_steps']:<4} {g['slow_steps']:>4}/{g['fast_steps']:<4}")
PY
