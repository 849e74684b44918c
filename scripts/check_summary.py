#!/usr/bin/env python3
"""Checks a traceml JSON summary for impossible numbers: every share and every coverage within
[0, 1] (null: not measured), every percentage of a whole within [0, 100] (a gap between runs may be
larger), busy + idle == window wherever the
three are given, host + kernel gaps + other == idle where the idle split is given, every statistics object with a count, and every hardware-counter object resting on
no more steps than its sample set has (sampled steps are measured steps; the agreement's steps are
sampled and recorded). Prints one line per problem and exits 1 when there is any.

    scripts/check_summary.py out/accumulation_summary.json
"""
import json
import sys


def walk(node, path, problems):
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}"
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if "share" in key and not -1e-9 <= value <= 1 + 1e-9:
                    problems.append(f"{here} = {value}: a share outside [0, 1]")
                if key == "coverage" and not -1e-9 <= value <= 1 + 1e-9:
                    problems.append(f"{here} = {value}: a coverage outside [0, 1]")
                # A percentage of a whole; a difference against another run (median_gap_pct: 1x4
                # is 308% slower than 4x1) is not one.
                if key.endswith("_pct") and "gap" not in key and not -1e-6 <= value <= 100 + 1e-6:
                    problems.append(f"{here} = {value}: a percentage outside [0, 100]")
        if all(k in node for k in ("busy_ms", "idle_ms", "window_ms")):
            b, i, w = (node[k] for k in ("busy_ms", "idle_ms", "window_ms"))
            mean = lambda v: v["mean"] if isinstance(v, dict) else v
            if abs(mean(b) + mean(i) - mean(w)) > 1e-6 * max(1.0, abs(mean(w))):
                problems.append(f"{path}: busy {mean(b)} + idle {mean(i)} != window {mean(w)}")
        if isinstance(node.get("idle_split"), dict) and isinstance(node.get("idle_ms"), dict):
            split, idle = node["idle_split"], node["idle_ms"]["mean"]
            parts = sum(split.get(k, 0) for k in ("host_ms", "kernel_gap_ms", "other_ms"))
            if abs(parts - idle) > 1e-6 * max(1.0, abs(idle)):
                problems.append(f"{path}: idle by kind {parts} != idle {idle}")
        if {"median", "mean", "p10", "p90"} <= node.keys() and "count" not in node:
            problems.append(f"{path}: statistics without a count")
        for key, value in node.items():
            walk(value, f"{path}.{key}", problems)
    elif isinstance(node, list):
        for n, value in enumerate(node):
            walk(value, f"{path}[{n}]", problems)


def check_counters(counters, path, measured_steps, recorded_steps, problems):
    """One hardware-counter object: its steps within the measured ones, its statistics over those
    steps, its agreement over recorded steps among them."""
    steps = counters.get("steps")
    if not isinstance(steps, int):
        problems.append(f"{path}: hardware counters without a step count")
        return
    if steps > measured_steps:
        problems.append(f"{path}.steps = {steps}: more sampled steps than the {measured_steps} measured")
    for key in ("window_ms", "busy_ms", "idle_ms"):
        stats = counters.get(key)
        if isinstance(stats, dict) and stats.get("count") != steps:
            problems.append(f"{path}.{key}.count = {stats.get('count')}: not the {steps} sampled steps")
    agreement = counters.get("agreement_on_recorded")
    if isinstance(agreement, dict) and isinstance(agreement.get("steps"), int):
        both = agreement["steps"]
        if both > steps or both > recorded_steps:
            problems.append(f"{path}.agreement_on_recorded.steps = {both}: more than the {steps} sampled "
                            f"or the {recorded_steps} recorded steps")


def check_sample_sets(doc, problems):
    for n, run in enumerate(doc.get("runs", []) if isinstance(doc, dict) else []):
        summary = run.get("summary", {}) if isinstance(run, dict) else {}
        if not isinstance(summary.get("steps"), int) or not isinstance(summary.get("warmup_steps"), int):
            continue
        measured = summary["steps"] - summary["warmup_steps"]
        recorded = summary.get("recording", {}).get("recorded_steps", 0)
        here = f"$.runs[{n}].summary"
        step_counters = summary.get("gpu", {}).get("step_counters")
        if isinstance(step_counters, dict):
            check_counters(step_counters, f"{here}.gpu.step_counters", measured, recorded, problems)
        for m, phase in enumerate(summary.get("phases", [])):
            if isinstance(phase, dict) and isinstance(phase.get("counters"), dict):
                check_counters(phase["counters"], f"{here}.phases[{m}].counters", measured, recorded, problems)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    problems = []
    walk(doc, "$", problems)
    check_sample_sets(doc, problems)
    for p in problems:
        print(p)
    print(f"{sys.argv[1]}: {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
