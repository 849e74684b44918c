#!/usr/bin/env python3
"""Checks a traceml JSON summary for impossible numbers: every share within [0, 1], every percentage
within [0, 100], busy + idle == window wherever the three are given, and every statistics object
with a count. Prints one line per problem and exits 1 when there is any.

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
                if key.endswith("_pct") and not -1e-6 <= value <= 100 + 1e-6:
                    problems.append(f"{here} = {value}: a percentage outside [0, 100]")
        if all(k in node for k in ("busy_ms", "idle_ms", "window_ms")):
            b, i, w = (node[k] for k in ("busy_ms", "idle_ms", "window_ms"))
            mean = lambda v: v["mean"] if isinstance(v, dict) else v
            if abs(mean(b) + mean(i) - mean(w)) > 1e-6 * max(1.0, abs(mean(w))):
                problems.append(f"{path}: busy {mean(b)} + idle {mean(i)} != window {mean(w)}")
        if {"median", "mean", "p10", "p90"} <= node.keys() and "count" not in node:
            problems.append(f"{path}: statistics without a count")
        for key, value in node.items():
            walk(value, f"{path}.{key}", problems)
    elif isinstance(node, list):
        for n, value in enumerate(node):
            walk(value, f"{path}[{n}]", problems)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    problems = []
    walk(doc, "$", problems)
    for p in problems:
        print(p)
    print(f"{sys.argv[1]}: {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
