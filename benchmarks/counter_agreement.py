#!/usr/bin/env python3
"""Hardware counters against kernel records, per run and phase, from a traceml JSON summary.

On the steps that have both (kernel records and PM samples), the GPU busy share of each phase's
window from the two sources side by side, and their difference in percentage points; then what the
counters say on every sampled step (busy, SM active, tensor, DRAM) and how many steps that rests on.

    counter_agreement.py out/accumulation_summary.json [--limit-points 2]

The counters read the graphics engine active, which takes in each kernel's launch set-up; a kernel
record spans the kernel's execution alone. So the counters read more busy where kernels are short and
many; and they average the whole GPU over samples (100 us by default), so that busy time next to a
short window leaks into it. "engine us/kernel" is the difference per kernel launched in the phase (on
the recorded steps, from the phase's mean window and kernels per step). A summary written with
counters also holds the records as the counters would count them (kernel_records_as_counted_share:
every record of the step, each kernel begun the engine's launch time earlier -- qwen3_accumulation
--launch-engine-us, the figure pm_sampling_probe measures on isolated tiny kernels, part 5 -- seen
through the counters' samples), and that is compared with the counters.

Exit status 1 when a phase with recorded steps differs by more than --limit-points (where the records
were modelled as counted: that figure against the counters).
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
    modelled = False
    how = ""
    for run in doc.get("runs", []):
        s = run["summary"]
        status = s.get("gpu", {}).get("status", "")
        seen = s.get("gpu", {}).get("records_as_counted")
        if seen:
            modelled = True
            how = f"{seen['sample_interval_us']:g} us samples, {seen['launch_engine_us']:g} us per launch"
        print(f"{run['name']}: {s['steps'] - s['warmup_steps']} measured steps; {status}")
        print(f"  {'phase':<12} {'rec.steps':>9} {'records %':>9} {'counters %':>10} {'diff pts':>8} "
              f"{'engine us/kernel':>16} {'as counted %':>12} {'diff pts':>8} | "
              f"{'sampled':>7} {'busy %':>6} {'SM %':>6} {'tensor %':>8} {'DRAM %':>6} {'coverage':>8}")
        for p in s["phases"]:
            c = p.get("counters")
            if not c:
                continue
            ag = c["agreement_on_recorded"]
            rec, cnt = ag.get("kernel_records_busy_share"), ag.get("counters_busy_share")
            diff = None if rec is None or cnt is None else 100 * (cnt - rec)
            # Per kernel: the kernel summary rests on the recorded steps, as the agreement does.
            k = p.get("kernels") or {}
            window_ms, per_step = (k.get("window_ms") or {}).get("mean"), k.get("kernels_per_step")
            engine_us = None
            if diff is not None and window_ms and per_step and k.get("steps") == ag["steps"]:
                engine_us = (cnt - rec) * window_ms * 1000 / per_step
            model = ag.get("kernel_records_as_counted_share")
            model_diff = None if model is None or cnt is None else 100 * (cnt - model)
            judged = model_diff if seen else diff
            if judged is not None:
                worst = max(worst, abs(judged))
            print(f"  {p['name']:<12} {ag['steps']:>9} {pct(rec):>9} {pct(cnt):>10} "
                  f"{'   -' if diff is None else f'{diff:+8.2f}'} "
                  f"{'-' if engine_us is None else f'{engine_us:.3f}':>16} {pct(model):>12} "
                  f"{'   -' if model_diff is None else f'{model_diff:+8.2f}'} | {c['steps']:>7} {pct(c['busy_share'])} "
                  f"{pct(c['sm_active_share'])} {pct(c.get('tensor_share')):>8} {pct(c.get('dram_share'))} "
                  f"{100 * c['coverage']:7.1f}%")
    what = f"records as counted ({how}) against counters" if modelled else "records against counters"
    print(f"largest difference ({what}): {worst:.2f} points (limit {a.limit_points})")
    return 1 if worst > a.limit_points else 0


if __name__ == "__main__":
    sys.exit(main())
