#!/usr/bin/env bash
# qwen3_accumulation's exit status and messages, run on the tiny model on the CPU (a few seconds):
# a refused command line is one line naming the option and its range (a repeated schedule, a
# --warmup not below --steps: what is wrong), status 2; a --warmup above half of --steps is capped
# in one line; an input the run cannot use is one line, status 1; schedules that fail for a reason
# other than running out of memory, and outputs that cannot be written (a full disk for real: links
# to /dev/full), end with status 1 and every failing output named with its reason; --out is
# created; each repeat keeps its own per-step JSONL; SIGINT and SIGTERM in the middle of a run end
# with 130 and 143 after the summary, trace and report of the finished steps are written.
#   usage: qwen3_accumulation_cli.sh <qwen3_accumulation> <traceml command> <work dir>
set -uo pipefail
exe=$1
traceml=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
tiny=(--device cpu --preset tiny --schedules 1x2,2x1 --steps 3 --warmup 1 --seq-len 16)

# expect <status> <text the error line must contain> <args...>: the error is the one line on stderr
# (CLI11 adds "Run with --help for more information." to a refused command line).
expect() {
  local want_rc=$1 want=$2
  shift 2
  "$exe" "$@" >"$work/out.txt" 2>"$work/err.txt"
  local rc=$?
  [ $rc -eq "$want_rc" ] || fail "$* exited $rc, expected $want_rc"
  grep -qF -- "$want" "$work/err.txt" || { fail "$*: no '$want' in stderr:"; cat "$work/err.txt"; }
  [ "$(grep -v -e '--help' -e '^$' "$work/err.txt" | wc -l)" -eq 1 ] || { fail "$*: not one error line:"; cat "$work/err.txt"; }
}

# The command line: the option, the accepted range in words, the value given; status 2.
expect 2 "--warmup: expected a whole number from 0 to 1000000000, got '-1'" --warmup -1
expect 2 "--steps: expected a whole number from 1 to 1000000000, got 'abc'" --steps abc
expect 2 "--peak-tflops: expected a number of TFLOP/s above 0, at most 1000000, got '-5'" --peak-tflops -5
expect 2 "--seed: expected a whole number from 0 to 18446744073709551615, got '-3'" --seed -3
expect 2 "--repeats: expected a whole number from 1 to 1000, got '0'" --repeats 0
expect 2 "--record-budget: expected a percentage from 0 to 100, got 'nan'" --record-budget nan
expect 2 "--counter-budget: expected a percentage from 0 to 100, got '101'" --counter-budget 101
expect 2 "--schedules: schedule '4': no 'x' between micro-batch and accumulation" --schedules 4
expect 2 "--schedules: schedules do not share one effective batch: 1x1 = 1 but 1x2 = 2" --schedules 1x1,1x2
# A repeated schedule would overwrite its own per-step file and trace (01X4 is 1x4 too).
expect 2 "--schedules: schedule 1x4 is given twice" --schedules 1x4,1x4 --out "$work/o"
expect 2 "--schedules: schedule 1x4 is given twice" --schedules 1x4,2x2,01X4 --out "$work/o"
# --sweep-candidates: 0 is all of them; a sweep of N has at most N, hence --sweep's limit.
expect 2 "--sweep-candidates: expected a whole number from 0 to 1048576, got '-1'" --sweep 4 --sweep-candidates -1 --out "$work/o"
expect 2 "--sweep-candidates: expected a whole number from 0 to 1048576, got 'two'" --sweep 4 --sweep-candidates two --out "$work/o"
expect 2 "--sweep-candidates: expected a whole number from 0 to 1048576, got '1048577'" --sweep 4 --sweep-candidates 1048577 --out "$work/o"
# --warmup of --steps or more leaves no step measured: refused with both values (the default steps
# said as such), before the output folder is made.
expect 2 "--warmup: 3 is not below --steps 3: no step would be measured" --device cpu --steps 3 --warmup 3 --out "$work/w"
expect 2 "--warmup: 50 is not below --steps 40 (the default on the CPU): no step would be measured" --device cpu --warmup 50 --out "$work/w"
expect 2 "--warmup: 8 is not below --steps 8 (the default of --sweep on the CPU): no step would be measured" --device cpu --sweep 2 --warmup 8 --out "$work/w"
[ ! -e "$work/w" ] || fail "a refused --warmup still made the output folder"
# Inputs the run cannot use: status 1, before anything is trained.
expect 1 "$work: is a directory, not a file" "${tiny[@]}" --out "$work/o" --data "$work"
expect 1 "sequence length 100000000 is above max_position_embeddings 4096" --device cpu --preset tiny --seq-len 100000000 --out "$work/o"
touch "$work/a_file"
expect 1 "cannot create the output folder '$work/a_file/out': Not a directory" "${tiny[@]}" --out "$work/a_file/out"

# Weights that do not load: every schedule fails (not out of memory), status 1, each said.
mkdir -p "$work/snapshot"
cat >"$work/snapshot/config.json" <<'JSON'
{"vocab_size": 256, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 24, "max_position_embeddings": 4096, "tie_word_embeddings": true}
JSON
printf 'not a safetensors file' >"$work/snapshot/model.safetensors"
"$exe" "${tiny[@]}" --model-dir "$work/snapshot" --out "$work/weights" >"$work/out.txt" 2>"$work/err.txt"
rc=$?
[ $rc -eq 1 ] || fail "corrupt weights: exited $rc, expected 1"
for s in 1x2 2x1; do
  grep -qF "schedule $s: $work/snapshot/model.safetensors: header length" "$work/err.txt" || { fail "corrupt weights: no line for $s:"; cat "$work/err.txt"; }
done
grep -qxF "qwen3_accumulation: 2 of 2 schedules failed for a reason other than running out of memory: 1x2, 2x1" "$work/err.txt" ||
  { fail "corrupt weights: no closing line:"; cat "$work/err.txt"; }

# --out is created with its parents; --repeats 2 keeps one per-step JSONL per repeat.
out="$work/new/nested/out"
"$exe" "${tiny[@]}" --repeats 2 --out "$out" >"$work/out.txt" 2>"$work/err.txt" || { fail "repeats run failed:"; cat "$work/err.txt"; }
for s in 1x2 2x1; do
  for k in 1 2; do
    f="$out/accumulation_steps_${s}_repeat$k.jsonl"
    [ "$(grep -c "\"run\":\"$s#$k\"" "$f" 2>/dev/null)" = 3 ] || fail "$f: not 3 steps of run $s#$k"
    [ "$(wc -l <"$f")" = 3 ] || fail "$f: not 3 lines"
  done
done
[ ! -e "$out/accumulation_steps_1x2.jsonl" ] || fail "--repeats 2 still wrote accumulation_steps_1x2.jsonl"

# --warmup above half of --steps is capped as the profiler caps it (half measured), said in one line.
short=(--device cpu --preset tiny --schedules 1x2,2x1 --seq-len 16 --no-traces)
"$exe" "${short[@]}" --steps 4 --warmup 3 --out "$work/capped" >"$work/out.txt" 2>"$work/err.txt" ||
  { fail "capped warm-up run exited $?:"; cat "$work/err.txt"; }
cap="qwen3_accumulation: --warmup 3 capped to 2: at most half of the 4 steps are warm-up, so that 2 are measured"
[ "$(grep -cxF "$cap" "$work/err.txt")" = 1 ] || { fail "capped warm-up: not one line '$cap':"; cat "$work/err.txt"; }
[ "$(grep -c 'capped' "$work/err.txt")" = 1 ] || { fail "capped warm-up said more than once:"; cat "$work/err.txt"; }
for s in 1x2 2x1; do
  grep -qF "traceml: $s  (2 steps measured, 2 warm-up excluded)" "$work/out.txt" || { fail "capped warm-up: $s not 2 + 2:"; cat "$work/out.txt"; }
done
# Half or less is kept as given, without a word.
"$exe" "${short[@]}" --steps 4 --warmup 2 --out "$work/half" >"$work/out.txt" 2>"$work/err.txt" ||
  { fail "--steps 4 --warmup 2 exited $?:"; cat "$work/err.txt"; }
grep -q 'capped' "$work/err.txt" && fail "--steps 4 --warmup 2 said a cap"
grep -qF "traceml: 1x2  (2 steps measured, 2 warm-up excluded)" "$work/out.txt" || { fail "--warmup 2 of 4 not kept:"; cat "$work/out.txt"; }
# On the CPU the GPU status gives the real reason (the device), not how to link a GPU source.
grep -qF '"status": "the device is the CPU (--device cpu, or no CUDA device was found)' "$work/half/accumulation_summary.json" ||
  { fail "the CPU run's GPU status does not name the CPU device:"; grep -F '"status"' "$work/half/accumulation_summary.json"; }
grep -qF 'link traceml::cupti' "$work/half/accumulation_summary.json" && fail "the CPU run's GPU status says to link traceml::cupti"

# A full disk: every output is a link to /dev/full. The run trains; each output is named with the
# reason, and the status is 1.
if [ -w /dev/full ]; then
  full="$work/full"
  mkdir -p "$full"
  names="accumulation_summary.json accumulation_report.html accumulation_steps_1x2.jsonl accumulation_steps_2x1.jsonl trace_1x2.json trace_2x1.json"
  for f in $names; do ln -s /dev/full "$full/$f"; done
  "$exe" "${tiny[@]}" --out "$full" >"$work/out.txt" 2>"$work/err.txt"
  rc=$?
  [ $rc -eq 1 ] || fail "full disk: exited $rc, expected 1"
  for f in $names; do
    grep -qE "^traceml: cannot write .* to '$full/$f': No space left on device" "$work/err.txt" || fail "full disk: $f not named with its reason"
  done
  grep -qE "^qwen3_accumulation: 6 outputs could not be written \(the reasons are above\): " "$work/err.txt" ||
    { fail "full disk: no closing line:"; cat "$work/err.txt"; }
else
  echo "note: /dev/full is not writable here; the full-disk case is skipped"
fi

# A log that takes both streams (2>&1 into a file, where stdout is buffered) keeps their order: the
# header comes first, the first schedule's table before the second schedule's progress, and no
# progress line begins inside another line.
"$exe" --device cpu --preset tiny --schedules 1x2,2x1 --steps 20 --warmup 2 --seq-len 16 --no-traces \
  --out "$work/both" >"$work/both.txt" 2>&1 || fail "the run into one log failed"
head -1 "$work/both.txt" | grep -q "^traceml accumulation experiment: " || { fail "the header is not first:"; head -3 "$work/both.txt"; }
table=$(grep -n "^traceml: 1x2  (" "$work/both.txt" | head -1 | cut -d: -f1)
second=$(grep -n "^\[2x1\] step " "$work/both.txt" | head -1 | cut -d: -f1)
[ -n "$table" ] && [ -n "$second" ] && [ "$table" -lt "$second" ] ||
  fail "1x2's table (line ${table:-none}) is not before 2x1's first progress line (line ${second:-none})"
if grep -qE '.\[(1x2|2x1)\] step ' "$work/both.txt"; then fail "a progress line began inside another line"; fi

# SIGINT / SIGTERM after the first steps: status 130 / 143; the summary (read back by the traceml
# command) holds every finished step (as many as the JSONL), the trace and the report are written.
set -m  # job control: a background job's SIGINT is not ignored
for sig in INT TERM; do
  dir="$work/sig$sig"
  "$exe" --device cpu --preset tiny --schedules 1x2,2x1 --steps 5000 --warmup 1 --seq-len 16 --out "$dir" >"$work/out.txt" 2>"$work/err.txt" &
  pid=$!
  jsonl="$dir/accumulation_steps_1x2.jsonl"
  for _ in $(seq 1 600); do
    [ -f "$jsonl" ] && [ "$(wc -l <"$jsonl")" -ge 3 ] && break
    sleep 0.05
  done
  kill -s "$sig" "$pid"
  wait "$pid"
  rc=$?
  want=$([ $sig = INT ] && echo 130 || echo 143)
  [ $rc -eq "$want" ] || { fail "SIG$sig: exited $rc, expected $want"; cat "$work/err.txt"; }
  steps=$(wc -l <"$jsonl")
  [ "$steps" -ge 3 ] && [ "$steps" -lt 5000 ] || fail "SIG$sig: $steps steps in the JSONL"
  grep -qF "traceml: SIG$sig: run '1x2' stopped after $steps steps; the outputs of those steps are written" "$work/err.txt" ||
    { fail "SIG$sig: no stop line for $steps steps:"; cat "$work/err.txt"; }
  "$traceml" show "$dir/accumulation_summary.json" >"$work/show.txt" 2>&1 || { fail "SIG$sig: summary not readable:"; cat "$work/show.txt"; }
  grep -qE "^traceml: 1x2  \($((steps - 1)) steps measured, 1 warm-up excluded\)" "$work/show.txt" ||
    { fail "SIG$sig: the summary does not hold the $steps finished steps:"; cat "$work/show.txt"; }
  grep -qF "\"stopped_by\": \"SIG$sig\"" "$dir/accumulation_summary.json" || fail "SIG$sig: no stopped_by in the summary"
  [ -s "$dir/trace_1x2.json" ] || fail "SIG$sig: no trace"
  grep -qF "</html>" "$dir/accumulation_report.html" || fail "SIG$sig: no complete HTML report"
  [ ! -e "$dir/accumulation_steps_2x1.jsonl" ] || fail "SIG$sig: the next schedule started"
done

[ $failures -eq 0 ] && echo "qwen3_accumulation: exit status and messages as documented"
exit $((failures > 0))
