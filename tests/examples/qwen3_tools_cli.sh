#!/usr/bin/env bash
# The Qwen3 tools' command lines (CLI11): --help describes every option, a bad value is refused with
# one line naming the option and a non-zero exit, and the documented options still run a (tiny) job.
#   usage: qwen3_tools_cli.sh <qwen3_step_timing> <qwen3_logits> <work dir>
set -uo pipefail
timing=$1
logits=$2
work=$3
mkdir -p "$work"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_refused <what the error line must contain> <program> <args...>
expect_refused() {
  local want=$1
  shift
  "$@" >"$work/out.txt" 2>&1
  local rc=$?
  [ $rc -ne 0 ] || fail "$* exited 0"
  grep -qF -- "$want" "$work/out.txt" || { fail "$*: no '$want' in:"; cat "$work/out.txt"; }
  # The error itself is one line (CLI11 adds "Run with --help for more information.").
  [ "$(grep -cv -- '--help' "$work/out.txt")" -eq 1 ] || { fail "$*: more than one error line:"; cat "$work/out.txt"; }
}

for opt in --preset --schedules --steps --warmup --seq-len --dtype --checkpointing --device --expand-kv --fp32-adapters; do
  "$timing" --help | grep -qF -- "$opt" || fail "qwen3_step_timing --help does not list $opt"
done
for opt in SNAPSHOT_DIR OUT --ids --dtype --device --plain; do
  "$logits" --help | grep -qF -- "$opt" || fail "qwen3_logits --help does not list $opt"
done

expect_refused "--steps" "$timing" --steps 0
expect_refused "--dtype" "$timing" --dtype float16
expect_refused "--preset" "$timing" --preset qwen9
expect_refused "no 'x' between micro-batch and accumulation" "$timing" --schedules 4
expect_refused "not a device" "$timing" --device gpu
expect_refused "--bogus" "$timing" --bogus
expect_refused "SNAPSHOT_DIR is required" "$logits"
expect_refused "Directory does not exist" "$logits" "$work/no-such-folder" "$work/out.safetensors"
expect_refused "token ids are non-negative, got -2" "$logits" "$work" "$work/out.safetensors" --ids 1,-2,3
expect_refused "--dtype" "$logits" "$work" "$work/out.safetensors" --dtype fp8

# Every documented option of qwen3_step_timing, on the tiny preset on the CPU.
"$timing" --preset tiny --schedules 2x1,1x2 --steps 2 --warmup 1 --seq-len 16 --dtype float32 --checkpointing \
  --device cpu --expand-kv --fp32-adapters >"$work/timing.txt" 2>&1 || { fail "qwen3_step_timing run failed:"; cat "$work/timing.txt"; }
for s in 2x1 1x2; do
  grep -qE "^$s +median +[0-9.]+ ms/step" "$work/timing.txt" || { fail "no median line for $s:"; cat "$work/timing.txt"; }
done

[ $failures -eq 0 ] && echo "qwen3 tools: command lines as documented"
exit $((failures > 0))
