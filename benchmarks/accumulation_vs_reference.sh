#!/usr/bin/env bash
# The C++ trainer (examples/qwen3, profiled by traceml) against the Python reference (transformers +
# peft, eager), the same experiment in one run on one machine, and the ratio per schedule.
#
#   benchmarks/accumulation_vs_reference.sh BUILD_DIR OUT_DIR [STEPS] [extra qwen3_accumulation args...]
#
# Both sides: random-init qwen3-1.7b, bf16, seq 512, LoRA r16 on all decoder linears, AdamW with 5
# warm-up steps, no gradient checkpointing (the reference's published numbers are without it), the
# same synthetic examples, schedules 1x4,2x2,4x1, medians over the steps after warm-up. The reference
# is skipped with a message where transformers/peft are not importable.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
steps=${3:-30}
shift 3 || shift $#
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/cpp"

echo "== C++ trainer (traceml profiling on), $steps steps per schedule"
"$build/examples/qwen3/qwen3_accumulation" --preset qwen3-1.7b --steps "$steps" --warmup 5 --no-checkpointing \
  --out "$out/cpp" "$@" 2>&1 | tee "$out/cpp.log" | grep -v '^\[' || true

echo "== Python reference (transformers + peft, eager), $steps steps per schedule"
python3 "$root/benchmarks/reference_hf.py" --preset qwen3-1.7b --schedules 1x4,2x2,4x1 --steps "$steps" --skip 5 \
  --json "$out/reference_hf.json" 2>&1 | tee "$out/reference.log"

python3 - "$out/cpp/accumulation_summary.json" "$out/reference_hf.json" <<'PY'
import json, sys
cpp = {s["name"]: s for s in json.load(open(sys.argv[1]))["comparison"]["runs"]}
try:
    ref = json.load(open(sys.argv[2]))["schedules"]
except (OSError, KeyError, ValueError):
    print("reference not available: no ratio"); sys.exit(0)
print(f"{'schedule':>8} {'C++ ms':>9} {'reference ms':>13} {'speed-up':>9} {'C++ MFU':>8}")
for name in ("1x4", "2x2", "4x1"):
    c, r = cpp.get(name), ref.get(name)
    if not c or not r or c.get("failed"):
        print(f"{name:>8}  (missing)"); continue
    mfu = f"{100 * c['mfu']:.1f}%" if "mfu" in c else "-"
    print(f"{name:>8} {c['median_step_ms']:9.1f} {r['median_ms']:13.1f} {r['median_ms'] / c['median_step_ms']:8.2f}x {mfu:>8}")
PY
