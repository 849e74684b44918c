#!/usr/bin/env bash
# `qwen3_accumulation --sweep 2` on the tiny model on the CPU: the sweep probes, measures both
# schedules in interleaved repeats, prints the ranked table and a recommendation, and puts the sweep
# into the JSON summary and the HTML report; --sweep with --schedules is refused.
#   usage: qwen3_sweep_cli.sh <qwen3_accumulation> <work dir>
set -uo pipefail
exe=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$exe" --device cpu --sweep 2 --steps 3 --warmup 1 --repeats 2 --seq-len 32 --no-traces --out "$work" \
  >"$work/out.txt" 2>"$work/err.txt" || { fail "the sweep exited $?:"; cat "$work/out.txt" "$work/err.txt"; }
out=$work/out.txt
expect() { grep -qE -- "$1" "$out" || fail "no line matching '$1'"; }
expect "^Schedule sweep, effective batch 2: 2 repeats x 3 steps \(1 warm-up\) per candidate"
expect "^Largest micro-batch that fits: 2$"
expect "^1 +(2x1|1x2) +2 +[0-9.]+ +[0-9.]+\.\.[0-9.]+ "
expect "^2 +(2x1|1x2) +2 +[0-9.]+ +[0-9.]+\.\.[0-9.]+ "
expect "^Recommendation: (2x1|1x2) \(confidence: (clear|tie)\)\. "
expect "^Why (2x1|1x2) is slower than (2x1|1x2): "
[ "$(grep -c '^Why ' "$out")" -eq 1 ] || fail "the explanation of the two candidates is printed more than once"
# Probes first, then the rounds in alternating order.
[ "$(grep -o '^\[sweep\] [^:]*' "$work/err.txt" | tr '\n' ' ')" = \
  "[sweep] 2x1 probe [sweep] 2x1#1 [sweep] 1x2#1 [sweep] 1x2#2 [sweep] 2x1#2 " ] ||
  { fail "trials not in the sweep's order:"; cat "$work/err.txt"; }
grep -q '"sweep":' "$work/accumulation_summary.json" || fail "no sweep in the JSON summary"
grep -q '"recommendation":' "$work/accumulation_summary.json" || fail "no recommendation in the JSON summary"
grep -q '<section id="sweep">' "$work/accumulation_report.html" || fail "no sweep section in the HTML report"
# Every measured repeat keeps its own per-step JSONL (3 steps, its own run name); the probe writes none.
for sched in 2x1 1x2; do
  for k in 1 2; do
    f="$work/accumulation_steps_${sched}_repeat${k}.jsonl"
    [ -f "$f" ] || { fail "no per-step file $f"; continue; }
    [ "$(wc -l <"$f")" -eq 3 ] || fail "$f holds $(wc -l <"$f") lines, not 3"
    grep -q "\"run\":\"${sched}#${k}\"" "$f" || fail "$f does not name its run ${sched}#${k}"
  done
done
[ -e "$work/accumulation_steps_2x1.jsonl" ] && fail "a file without its repeat number was written"

"$exe" --sweep 2 --schedules 1x2 >"$work/both.txt" 2>&1 && fail "--sweep with --schedules was accepted"
grep -qE -- "--(sweep|schedules) excludes --(sweep|schedules)" "$work/both.txt" || { fail "no clear refusal:"; cat "$work/both.txt"; }

[ $failures -ne 0 ] && { cat "$out"; exit 1; }
echo "qwen3_accumulation --sweep: ranked table, recommendation, JSON and HTML"
