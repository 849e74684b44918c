#!/usr/bin/env python3
"""Two or more runs of qwen3_accumulation side by side, per schedule: step time, MFU, peak memory, loss.

Each argument is LABEL=SUMMARY (the run's accumulation_summary.json). The first one is the baseline:
the others get their step time as a ratio to it and the largest per-step loss difference from it
(both runs must have run the same steps on the same examples for that to mean anything).

    summaries_side_by_side.py "chunk 0=out/a/accumulation_summary.json" "chunk 1024=out/b/accumulation_summary.json"
"""
import json
import sys


def load(arg):
    label, _, path = arg.partition("=")
    if not path:
        sys.exit(f"expected LABEL=SUMMARY, got {arg!r}")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return label, None, str(e)
    return label, doc, None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    runs = [load(a) for a in sys.argv[1:]]
    for label, doc, err in runs:
        if err:
            print(f"{label}: no summary ({err})")
    runs = [(label, doc) for label, doc, err in runs if not err]
    if not runs:
        return 1
    names = []
    for _, doc in runs:
        for col in doc["comparison"]["runs"]:
            if col["name"] not in names:
                names.append(col["name"])
    base_label, base = runs[0]
    print(f"{'schedule':>8} {'run':>16} {'median ms':>10} {'vs base':>8} {'MFU':>7} {'peak GiB':>9} "
          f"{'loss 1st':>9} {'loss last':>9} {'max |dloss|':>11} {'skipped':>8}")
    for name in names:
        base_col = next((c for c in base["comparison"]["runs"] if c["name"] == name), None)
        base_losses = base.get("training", {}).get(name, {}).get("losses")
        for label, doc in runs:
            col = next((c for c in doc["comparison"]["runs"] if c["name"] == name), None)
            if col is None or col.get("failed"):
                print(f"{name:>8} {label:>16}  {'(failed: ' + col['error'][:60] + ')' if col else '(missing)'}")
                continue
            trained = doc.get("training", {}).get(name, {})
            losses = trained.get("losses") or []
            ratio = (f"{col['median_step_ms'] / base_col['median_step_ms']:7.3f}x"
                     if base_col and not base_col.get("failed") and base_col["median_step_ms"] > 0 else "       -")
            mfu = f"{100 * col['mfu']:6.1f}%" if "mfu" in col else "      -"
            peak = col.get("peak_allocated_bytes", -1)
            peak = f"{peak / 2**30:9.2f}" if peak is not None and peak >= 0 else "        -"
            first = f"{losses[0]:9.4f}" if losses else "        -"
            last = f"{losses[-1]:9.4f}" if losses else "        -"
            if base_losses and losses and len(base_losses) == len(losses):
                diff = f"{max(abs(a - b) for a, b in zip(losses, base_losses)):11.5f}"
            else:
                diff = "          -"
            skipped = trained.get("skipped_steps")
            skipped = f"{len(skipped):8d}" if skipped is not None else "       -"
            print(f"{name:>8} {label:>16} {col['median_step_ms']:10.1f} {ratio} {mfu} {peak} {first} {last} {diff} {skipped}")
    print(f"(baseline: {base_label}; step times are medians after warm-up; compare only runs made in one go)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
