// traceml: stage 3 of attribution (attribution.hpp) -- each record to a step and a phase, by the
// first rule that can decide it: stream order, else GPU time on the same device, else CPU time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/gpu/activity.hpp"
#include "traceml/gpu/attribution_io.hpp"
#include "traceml/gpu/attribution_windows.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// What became of one record in this round.
enum class record_fate : std::uint8_t {
  assigned,  ///< to a step window (and maybe a phase window)
  leftover,  ///< may belong to a later step: handed back for the next round
  orphan,    ///< inside no step of the round (reported as unattributed)
  invalid,   ///< no timestamps (reported as dropped)
};

struct assignment {
  record_fate fate = record_fate::orphan;
  attribution_method method = attribution_method::none;
  std::int32_t step_window = -1;   ///< index into the windows
  std::int32_t phase_window = -1;  ///< index into the windows; -1: step-level
};

/// The innermost of two phase windows: the deeper one, else the later-opened of two concurrent ones,
/// else the first in input order (so the answer never depends on how candidates were found).
inline bool inner_than(const std::vector<window>& ws, std::size_t cand, std::int32_t cur) {
  if (cur < 0) return true;
  const window& a = ws[static_cast<std::size_t>(cur)];
  const window& b = ws[cand];
  if (b.depth != a.depth) return b.depth > a.depth;
  if (b.cpu_begin != a.cpu_begin) return b.cpu_begin > a.cpu_begin;
  return cand < static_cast<std::size_t>(cur);
}

/// Among the GPU windows of `g` that contain t: the innermost phase, and the step last in input order.
inline void pick_containing(const window_group& g, std::int64_t t, const std::vector<window>& ws, assignment& a) {
  g.for_each_containing(t, [&](std::uint32_t w) {
    if (ws[w].is_step) {
      if (static_cast<std::int32_t>(w) > a.step_window) a.step_window = static_cast<std::int32_t>(w);
    } else if (inner_than(ws, w, a.phase_window)) {
      a.phase_window = static_cast<std::int32_t>(w);
    }
  });
}

/// Rule 1, exact: a record on a stream that carries markers belongs to the windows of that stream
/// that contain its start. Between them: after the stream's last step it waits for a later round
/// (or is an orphan in the final one); elsewhere an orphan. A marked stream without a marked step
/// leaves the record to the next rule. Returns whether the record's fate is decided.
inline bool by_stream_order(const gpu_record& rec, const std::vector<window>& ws, const window_index& ix,
                            bool final_round, assignment& a) {
  const auto g = ix.by_stream.find(stream_key(rec.device, rec.stream));
  if (g == ix.by_stream.end()) return false;
  pick_containing(g->second, rec.begin_ns, ws, a);
  if (a.phase_window >= 0 || a.step_window >= 0) {
    a.fate = record_fate::assigned;
    a.method = attribution_method::stream_order;
    return true;
  }
  if (g->second.last_step_end == std::numeric_limits<std::int64_t>::lowest()) return false;
  a.fate = rec.begin_ns > g->second.last_step_end && !final_round ? record_fate::leftover : record_fate::orphan;
  return true;
}

/// Rule 2: a record on an unmarked stream (a side stream, a graph's internal stream) belongs to the
/// GPU windows, on any stream of the same device, that contain its start.
inline bool by_gpu_time(const gpu_record& rec, const std::vector<window>& ws, const window_index& ix, assignment& a) {
  const auto g = ix.by_device.find(rec.device);
  if (g == ix.by_device.end()) return false;
  pick_containing(g->second, rec.begin_ns, ws, a);
  if (a.phase_window < 0 && a.step_window < 0) return false;
  a.fate = record_fate::assigned;
  a.method = attribution_method::gpu_time;
  return true;
}

/// Rule 3, for spans without markers: the last step (by number) that began on the CPU before the
/// record started; in it, the innermost phase whose CPU window contains the start, else the phase
/// that ended last before it (the GPU starts work after its launch, never before). Scans the steps
/// and that one step's phases: rare, and never the whole round.
inline void by_cpu_time(const gpu_record& rec, const std::vector<window>& ws, const window_index& ix, bool final_round,
                        assignment& a) {
  const std::int64_t t = rec.begin_ns;
  if (t > ix.last_cpu_end && !final_round) {
    a.fate = record_fate::leftover;
    return;
  }
  for (auto s : ix.steps)
    if (ws[s].cpu_begin <= t) a.step_window = static_cast<std::int32_t>(s);
  if (a.step_window < 0) {
    a.fate = record_fate::orphan;
    return;
  }
  std::int32_t latest_before = -1;
  const auto phases = ix.phases_by_step.find(ws[static_cast<std::size_t>(a.step_window)].step);
  if (phases != ix.phases_by_step.end()) {
    for (auto p : phases->second) {
      const window& w = ws[p];
      if (t >= w.cpu_begin && t <= w.cpu_end) {
        if (inner_than(ws, p, a.phase_window)) a.phase_window = static_cast<std::int32_t>(p);
      } else if (w.cpu_end < t) {
        const window* l = latest_before < 0 ? nullptr : &ws[static_cast<std::size_t>(latest_before)];
        if (!l || w.cpu_end > l->cpu_end || (w.cpu_end == l->cpu_end && w.depth > l->depth))
          latest_before = static_cast<std::int32_t>(p);
      }
    }
  }
  if (a.phase_window < 0) a.phase_window = latest_before;
  a.fate = record_fate::assigned;
  a.method = attribution_method::cpu_time;
}

/// One record through the three rules. A phase then decides the step (its own step window),
/// whatever window matched the step first; a record left without a step is an orphan.
inline assignment assign_record(const gpu_record& rec, const std::vector<window>& ws, const window_index& ix,
                                bool final_round) {
  assignment a;
  if (rec.begin_ns == 0 && rec.end_ns == 0) {  // CUPTI could not time it (e.g. an aborted context)
    a.fate = record_fate::invalid;
    return a;
  }
  if (!by_stream_order(rec, ws, ix, final_round, a) && !by_gpu_time(rec, ws, ix, a))
    by_cpu_time(rec, ws, ix, final_round, a);
  if (a.fate != record_fate::assigned) return a;
  if (a.phase_window >= 0) {
    const auto s = ix.step_by_number.find(ws[static_cast<std::size_t>(a.phase_window)].step);
    if (s != ix.step_by_number.end()) a.step_window = static_cast<std::int32_t>(s->second);
  }
  if (a.step_window < 0) {
    a.fate = record_fate::orphan;
    a.method = attribution_method::none;
  }
  return a;
}

/// Stage 3: every record's fate, in input order. Cost: O(records x log windows) for marked work.
inline std::vector<assignment> assign_records(const std::vector<gpu_record>& records, const std::vector<window>& ws,
                                              const window_index& ix, bool final_round) {
  std::vector<assignment> out;
  out.reserve(records.size());
  for (const auto& rec : records) out.push_back(assign_record(rec, ws, ix, final_round));
  return out;
}

}  // namespace detail
TRACEML_END_NAMESPACE
