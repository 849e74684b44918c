#!/usr/bin/env bash
# `qwen3_accumulation` as two data-parallel ranks on the CPU (tiny model, c10d Gloo), launched as
# torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): each rank trains on its own examples
# with one gradient all-reduce per step inside a communication phase, writes its outputs under
# --out/rank<r> with its rank in them, and rank 0 prints the ranks side by side per schedule. A rank
# that never comes makes the other fail with a clear message, not hang.
#   usage: qwen3_data_parallel.sh <qwen3_accumulation> <work dir>
set -uo pipefail
exe=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
       echo $((20000 + RANDOM % 20000)))
args=(--schedules 1x2,2x1 --steps 5 --warmup 1 --seq-len 32 --no-traces)

for r in 1 0; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 240 "$exe" "${args[@]}" --out "$work/out" \
    >"$work/rank$r.txt" 2>"$work/rank$r.err" &
  pids[$r]=$!
done
for r in 0 1; do
  wait "${pids[$r]}" || { fail "rank $r exited $?:"; cat "$work/rank$r.txt" "$work/rank$r.err"; }
done

out0=$work/rank0.txt
for r in 0 1; do
  grep -q "^data-parallel: rank $r of 2, joining at 127.0.0.1:$port" "$work/rank$r.txt" || fail "rank $r did not say which rank it is"
  grep -qE "^communication +[0-9.]+ " "$work/rank$r.txt" || fail "rank $r's table has no communication phase"
  for s in 1x2 2x1; do
    f=$work/out/rank$r/accumulation_steps_$s.jsonl
    [ "$(grep -c "\"rank\":$r," "$f")" -eq 5 ] || fail "$f: not 5 lines of rank $r"
  done
  python3 - "$work/out/rank$r/accumulation_summary.json" "$r" <<'PY' || fail "rank $r's summary"
import json, sys
doc = json.load(open(sys.argv[1]))
rank = int(sys.argv[2])
for run in doc["runs"]:
    assert (run["rank"], run["world_size"]) == (rank, 2), (run["name"], run.get("rank"))
    names = [p["name"] for p in run["summary"]["phases"]]
    assert "communication" in names, names
PY
done
# Rank 0 alone prints the merge, once per schedule, with both ranks present.
[ "$(grep -c '^ranks: 2 of 2 reported$' "$out0")" -eq 2 ] || fail "rank 0 did not merge both ranks for both schedules"
grep -q '^ranks: ' "$work/rank1.txt" && fail "rank 1 printed a merge"
grep -qE '^rank [01] was the slowest on [0-9]+ of 4 steps' "$out0" || fail "no slowest rank named"
# The same examples per step in both schedules: equal losses per rank (1x2 and 2x1 see one batch).
l12=$(grep '^1x2 loss:' "$out0" | sed 's/^1x2//'); l21=$(grep '^2x1 loss:' "$out0" | sed 's/^2x1//')
[ -n "$l12" ] && [ "$l12" = "$l21" ] || fail "rank 0's losses differ between 1x2 and 2x1: '$l12' vs '$l21'"
# The two ranks read different examples: their first losses differ.
[ "$(grep '^1x2 loss:' "$out0")" != "$(grep '^1x2 loss:' "$work/rank1.txt")" ] || fail "both ranks read the same examples"

# A world of two where rank 1 never comes: rank 0 gives up after the timeout and says so.
RANK=0 WORLD_SIZE=2 MASTER_PORT=$port timeout 120 "$exe" "${args[@]}" --rank-timeout 3 --out "$work/alone" \
  >"$work/alone.txt" 2>"$work/alone.err"
rc=$?
[ "$rc" -eq 1 ] || fail "a rank left alone exited $rc (expected 1)"
grep -qE "^qwen3_accumulation: data parallelism: rank 0 could not join the run at 127.0.0.1:$port: .* \(waited up to 3 s for all 2 ranks: did every rank start\?\)$" "$work/alone.err" ||
  { fail "no clear message for a rank left alone:"; cat "$work/alone.err"; }
[ "$(wc -l <"$work/alone.err")" -eq 1 ] || fail "a rank left alone said more than one line"
# A rank outside its world: refused at once.
RANK=2 WORLD_SIZE=2 "$exe" "${args[@]}" --out "$work/bad" >"$work/bad.txt" 2>"$work/bad.err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "rank 2 of a world of 2 (need rank < world size)" "$work/bad.err" ||
  fail "rank 2 of 2: exit $rc, $(cat "$work/bad.err")"

[ "$failures" -eq 0 ] && echo "qwen3 data parallel: all checks passed"
exit $((failures > 0))
