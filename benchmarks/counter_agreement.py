#!/usr/bin/env python3
"""Hardware counters against kernel records, per run and phase, from a traceml JSON summary.

On the steps that have both (kernel records and PM samples), the GPU busy share of each phase's
window from the two sources side by side, and their difference in percentage points; then what the
counters say on every sampled step (busy, SM active, tensor, DRAM) and how many steps that rests on.

    counter_agreement.py out/accumulation_summary.json [--limit-points 2]

Exit status 1 when a phase with recorded steps differs by more than --limit-points.
"""
import argparse
import json
import sys


def pct(v):
    return "   -  " if v is None else f"{100 * v:6.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("summary")
    ap.add_argument("--limit-points", type=float, default=2.0)
    a = ap.parse_args()
    with open(a.summary) as f:
        doc = json.load(f)
    worst = 0.0
    for run in doc.get("runs", []):
        s = run["summary"]
        status = s.get("gpu", {}).get("status", "")
        print(f"{run['name']}: {s['steps'] - s['warmup_steps']} measured steps; {status}")
        print(f"  {'phase':<12} {'rec.steps':>9} {'records %':>9} {'counters %':>10} {'diff pts':>8} | "
              f"{'sampled':>7} {'busy %':>6} {'SM %':>6} {'tensor %':>8} {'DRAM %':>6} {'coverage':>8}")
        for p in s["phases"]:
            c = p.get("counters")
            if not c:
                continue
            ag = c["agreement_on_recorded"]
            rec, cnt = ag.get("kernel_records_busy_share"), ag.get("counters_busy_share")
            diff = None if rec is None or cnt is None else 100 * (cnt - rec)
            if diff is not None:
                worst = max(worst, abs(diff))
            print(f"  {p['name']:<12} {ag['steps']:>9} {pct(rec):>9} {pct(cnt):>10} "
                  f"{'   -' if diff is None else f'{diff:+8.2f}'} | {c['steps']:>7} {pct(c['busy_share'])} "
                  f"{pct(c['sm_active_share'])} {pct(c.get('tensor_share')):>8} {pct(c.get('dram_share'))} "
                  f"{100 * c['coverage']:7.1f}%")
    print(f"largest difference: {worst:.2f} points (limit {a.limit_points})")
    return 1 if worst > a.limit_points else 0


if __name__ == "__main__":
    sys.exit(main())
