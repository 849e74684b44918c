#!/usr/bin/env python3
"""Checks that traceml's headers include only downward: no header includes one of a higher tier.

The tiers, lowest first (docs/architecture.md draws them):
  0 core      the recording path and the helpers every tier uses: config.hpp, clock.hpp, phase*.hpp, steps.hpp,
              record.hpp, callback.hpp, the identities, stop_signal.hpp, and detail/ (ring, step worker,
              JSON writer, number formatting)
  1 gpu       gpu/: the GPU sources and the attribution of kernels to phases; the data they hand on
              (gpu_facts.hpp) is what the analysis reads, so gpu sits below it
  2 analysis  analysis/: records and facts turned into figures (summaries, statistics, comparison,
              sweep ranking, ranks); pure, no output
  3 sinks     sinks/: the figures written for people and programs (table, JSON, HTML, trace, live view)
  4 front     the headers a trainer includes, which wire the tiers together: profiler.hpp, session.hpp,
              session_gpu.hpp, session_torch.hpp, sweep.hpp, recording_window.hpp, distributed.hpp,
              torch_adapter.hpp, traceml.hpp

A header may include its own tier or any lower one. Every header must have a tier (a new one at the
top of include/traceml/ is named below), and every `#include "traceml/..."` or `<traceml/...>` in the
tree must name a header that exists, so that a moved header cannot leave a stale include behind.
Standard library only; exits 1 with one line per problem.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADERS = ROOT / "include" / "traceml"

TIER_NAMES = ["core", "gpu", "analysis", "sinks", "front"]
FOLDER_TIER = {"detail": 0, "gpu": 1, "analysis": 2, "sinks": 3}
TOP_LEVEL_TIER = {
    "config.hpp": 0, "clock.hpp": 0, "phase_kind.hpp": 0, "phase_key.hpp": 0, "phase.hpp": 0, "steps.hpp": 0,
    "record.hpp": 0, "callback.hpp": 0, "thread_identity.hpp": 0, "rank_identity.hpp": 0,
    "stop_signal.hpp": 0,
    "profiler.hpp": 4, "session.hpp": 4, "session_gpu.hpp": 4, "session_torch.hpp": 4, "sweep.hpp": 4,
    "recording_window.hpp": 4,
    "distributed.hpp": 4, "torch_adapter.hpp": 4, "traceml.hpp": 4,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]traceml/([^">]+)[">]', re.M)
SOURCE_DIRS = ["include", "src", "tools", "tests", "benchmarks", "examples"]
SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".cc", ".cu"}


def tier_of(rel):
    """The tier of a header path relative to include/traceml/, or None when it has none."""
    parts = pathlib.PurePosixPath(rel).parts
    if len(parts) == 1:
        return TOP_LEVEL_TIER.get(parts[0])
    return FOLDER_TIER.get(parts[0])


def main():
    problems = []
    headers = sorted(p.relative_to(HEADERS).as_posix() for p in HEADERS.rglob("*.hpp"))
    known = set(headers)
    edges = 0
    for rel in headers:
        tier = tier_of(rel)
        if tier is None:
            problems.append(f"include/traceml/{rel}: no tier (name it in scripts/check_tiers.py)")
            continue
        for target in INCLUDE.findall((HEADERS / rel).read_text(encoding="utf-8")):
            edges += 1
            target_tier = tier_of(target)
            if target not in known or target_tier is None:
                continue  # reported below, with every other stale include
            if target_tier > tier:
                problems.append(f"include/traceml/{rel} ({TIER_NAMES[tier]}) includes traceml/{target} "
                                f"({TIER_NAMES[target_tier]}): an upward include")
    for d in SOURCE_DIRS:
        for path in sorted((ROOT / d).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            for target in INCLUDE.findall(path.read_text(encoding="utf-8", errors="replace")):
                if target not in known:
                    problems.append(f"{path.relative_to(ROOT).as_posix()}: includes traceml/{target}, "
                                    "which does not exist")
    for p in problems:
        print("check_tiers: " + p)
    if problems:
        return 1
    print(f"check_tiers: {len(headers)} headers, {edges} includes, none upward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
