#!/usr/bin/env bash
# Renders the sample HTML report in headless Chromium and checks what the browser made of it:
#   - the DOM after parsing holds every <rect> the report emitted (the inline SVG parsed as SVG, not
#     as stray text), the known labels, the hardware counters' activity chart, and no parser-inserted
#     elements around the charts;
#   - a screenshot was produced, is a PNG, and is not trivially small (something was drawn).
# Everything is local (file://); networking features that would reach out are switched off.
#   usage: html_browser_test.sh <chromium> <traceml_html_sample> <work dir>
set -euo pipefail
chromium=$1
sample=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
report="$work/report.html"
"$sample" "$report"

# A fresh profile per invocation, so no state from a user's browser (or a previous run) takes part.
run_chromium() {
  local profile
  profile=$(mktemp -d "$work/profile.XXXXXX")
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" "$@" 2>>"$work/chromium.log"
}

fail() { echo "FAIL: $*"; echo "--- chromium log (tail)"; tail -n 20 "$work/chromium.log" || true; exit 1; }

run_chromium --dump-dom "file://$report" >"$work/dom.html" || fail "chromium --dump-dom exited with $?"
[ -s "$work/dom.html" ] || fail "empty DOM dump"

emitted=$(grep -o '<rect' "$report" | wc -l)
parsed=$(grep -o '<rect' "$work/dom.html" | wc -l)
echo "rect elements: emitted $emitted, in the browser's DOM $parsed"
[ "$emitted" -gt 20 ] || fail "the sample report has too few rects ($emitted)"
[ "$emitted" -eq "$parsed" ] || fail "rect count changed in parsing"

for element in '<svg' '<polyline' '<circle' '<table' '<tr'; do
  a=$(grep -o "$element" "$report" | wc -l)
  b=$(grep -o "$element" "$work/dom.html" | wc -l)
  [ "$a" -eq "$b" ] || fail "$element: emitted $a, parsed $b"
done
# Known labels survive: a phase as an SVG segment and legend entry, an escaped kernel name as text.
grep -q 'data-phase="backward"' "$work/dom.html" || fail "no backward segment in the DOM"
grep -q '<li><span class="swatch"[^>]*></span>optimizer</li>' "$work/dom.html" || fail "no optimizer legend entry"
grep -q 'void f&lt;int&gt;(a&amp;b)' "$work/dom.html" || fail "escaped kernel name missing"
if grep -q 'f<int>' "$work/dom.html"; then fail "a kernel name became markup"; fi
# The explanation paragraph, escaped, and one median label per run in the step-time chart.
grep -q '<p class="explanation">4x1 is the fastest: .*(&lt;4 small ones&gt; &amp; "fused")' "$work/dom.html" ||
  fail "no escaped explanation paragraph in the DOM"
labels=$(grep -o 'class="median-label"' "$work/dom.html" | wc -l)
[ "$labels" -eq 3 ] || fail "expected 3 median labels in the DOM, found $labels"
# The hardware counters' activity chart: its bars kept as SVG, a counter the sample lacks said in words.
grep -q '<svg class="chart" id="gpu-activity"' "$work/dom.html" || fail "no activity chart in the DOM"
a=$(grep -o 'data-metric="' "$report" | wc -l)
b=$(grep -o 'data-metric="' "$work/dom.html" | wc -l)
[ "$a" -gt 0 ] && [ "$a" -eq "$b" ] || fail "activity bars: emitted $a, parsed $b"
grep -q 'class="note">not sampled</text>' "$work/dom.html" || fail "no 'not sampled' label in the activity chart"

run_chromium --window-size=1280,2600 --screenshot="$work/report.png" "file://$report" >/dev/null ||
  fail "chromium --screenshot exited with $?"
[ -f "$work/report.png" ] || fail "no screenshot written"
magic=$(head -c 8 "$work/report.png" | od -An -tx1 | tr -d ' \n')
[ "$magic" = "89504e470d0a1a0a" ] || fail "screenshot is not a PNG ($magic)"
size=$(stat -c %s "$work/report.png")
echo "screenshot: $work/report.png, $size bytes"
[ "$size" -gt 50000 ] || fail "screenshot suspiciously small ($size bytes)"
echo "PASS"
