#!/usr/bin/env python3
"""Kernel census of a traceml Chrome trace: which kernels each phase launches, how often, how long.

    scripts/trace_kernels.py trace_1x4.json [--top 25] [--skip-steps 5]

Per phase (from each GPU event's args.phase): launches and GPU time per step for the most frequent
kernels, so that "why so many launches" has a name. Steps before --skip-steps are ignored (warm-up).
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--skip-steps", type=int, default=5)
    args = ap.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    count = collections.Counter()
    time_us = collections.Counter()
    steps = set()
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "kernel":
            continue
        a = e.get("args", {})
        if a.get("step", -1) < args.skip_steps:
            continue
        steps.add(a["step"])
        key = (a.get("phase") or "(none)", e["name"])
        count[key] += 1
        time_us[key] += e.get("dur", 0.0)
    n = max(1, len(steps))
    print(f"{len(steps)} steps; launches and GPU time per step")
    by_phase = collections.defaultdict(list)
    for (phase, name), c in count.items():
        by_phase[phase].append((c, time_us[(phase, name)], name))
    for phase, rows in sorted(by_phase.items()):
        total = sum(c for c, _, _ in rows)
        print(f"\n{phase}: {total / n:.0f} launches, {sum(t for _, t, _ in rows) / n / 1e3:.2f} ms per step")
        for c, t, name in sorted(rows, reverse=True)[: args.top]:
            print(f"  {c / n:8.1f}  {t / n / 1e3:8.3f} ms  {name}")


if __name__ == "__main__":
    main()
