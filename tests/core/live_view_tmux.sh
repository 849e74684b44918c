#!/usr/bin/env bash
# The live view in a real terminal (tmux, 100x40): tests/core/live_view_trainer.cpp prints lines
# while the view runs. Passes when every line the trainer printed is on the screen or in its
# scrollback at the end, once each and whole, after the run's table; and when, while the trainer is
# quiet, the view redraws in place (the screen keeps its number of frames while the step shown
# moves on). Skipped, and says so, without tmux.
#   live_view_tmux.sh TRAINER
set -uo pipefail
trainer=$1
if ! command -v tmux >/dev/null; then
  echo "SKIPPED: tmux not installed (apt-get install tmux)"
  exit 77
fi
socket="traceml_live_$$"
tm() { tmux -L "$socket" -f /dev/null "$@"; }
trap 'tm kill-server >/dev/null 2>&1' EXIT
tm new-session -d -x 100 -y 40 "'$trainer'; echo TRAINER-EXIT \$?; sleep 120" || { echo "FAIL: tmux did not start"; exit 1; }

# While it runs: during the quiet stretch, the number of frames on the screen and the step the
# newest one shows.
moved=0 last_step="" last_frames="" deadline=$((SECONDS + 90))
while [ $SECONDS -lt $deadline ]; do
  screen=$(tm capture-pane -p)
  grep -q "TRAINER-EXIT" <<<"$screen" && break
  if grep -q "^trainer quiet$" <<<"$screen" && ! grep -q "^trainer line 10$" <<<"$screen"; then
    frames=$(grep -c "traceml live: tmux" <<<"$screen")
    step=$(grep -o "traceml live: tmux  step [0-9]*" <<<"$screen" | tail -n 1 | grep -o "[0-9]*$")
    if [ -n "$step" ] && [ -n "$last_step" ] && [ "$frames" = "$last_frames" ] && [ "$step" != "$last_step" ]; then
      moved=$((moved + 1))
    fi
    last_step=$step last_frames=$frames
  fi
  sleep 0.2
done
history=$(tm capture-pane -p -S -100000)
status=0
if ! grep -q "^TRAINER-EXIT 0$" <<<"$history"; then
  echo "FAIL: the trainer did not end with status 0 within 90 s"
  status=1
fi
for k in $(seq 0 19); do
  n=$(grep -c "^trainer line $k$" <<<"$history")
  if [ "$n" != 1 ]; then
    echo "FAIL: 'trainer line $k' is on the terminal $n times, not once"
    status=1
  fi
done
for want in "^trainer quiet$" "^trainer done (20 lines)$" "^phase  *mean ms"; do
  grep -q "$want" <<<"$history" || { echo "FAIL: nothing on the terminal matches '$want'"; status=1; }
done
if [ "$moved" -lt 2 ]; then
  echo "FAIL: while the trainer was quiet the view was not seen redrawing in place ($moved times)"
  status=1
fi
if [ $status -ne 0 ]; then
  echo "---- the terminal, scrollback included ----"
  echo "$history"
fi
[ $status -eq 0 ] && echo "live view in tmux: all 20 trainer lines kept; redrawn in place $moved times while quiet"
exit $status
