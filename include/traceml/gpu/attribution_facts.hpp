// traceml: stages 4 and 5 of attribution (attribution.hpp) -- assigned records become per-step and
// per-phase gpu_facts (gpu_facts.hpp).
//
// Two kinds of sums, on purpose:
//   * kernel, memcpy and memset time, counts and bytes go to the innermost phase only (a kernel is
//     counted once), and to the step total;
//   * busy time is measured per window: the union of the window's own records *and those of the
//     phases nested in it* (the GPU was not idle for the outer phase either), clipped to the window
//     busy and idle are measured in (window::measured). idle = window - busy, so busy + idle ==
//     window and 0 <= busy <= window, per occurrence and therefore summed over occurrences;
//   * idle time is split by kind (gpu/idle_split.hpp) against every record of the step, and copy
//     time is the union of the window's copies, clipped like busy time.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/intervals.hpp"
#include "traceml/gpu/activity.hpp"
#include "traceml/gpu/attribution_assign.hpp"
#include "traceml/gpu/attribution_io.hpp"
#include "traceml/gpu/attribution_windows.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/gpu/idle_split.hpp"
#include "traceml/phase_key.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// One (kind, name, micro-batch) entry of a step while records are added.
struct phase_entry_acc {
  phase_gpu_facts facts;
  std::unordered_map<const char*, std::size_t> kernel_index;  // by interned name; merged by text at the end
  std::vector<kernel_stat> kernels;
  std::vector<interval> own;  // its innermost records (gpu_facts::own_ns, hidden_ns)
  bool span_known = true;
};

struct step_acc {
  step_gpu_report report;
  interval window;                       // the step's measured window
  std::vector<interval> busy;            // every record of the step
  std::vector<std::int32_t> busy_entry;  // per record in busy: its phase entry, -1: unattributed
  std::vector<interval> all;             // busy merged (finish_reports): what ran on the GPU during the step
  std::vector<interval> copies;          // every copy of the step
  std::uint32_t first_stream = 0;
  bool streams = false;  // records on more than one stream: work may run side by side
  std::vector<phase_entry_acc> phases;
  std::unordered_map<phase_key, std::size_t, phase_key_hash> phase_index;
};

/// Stage 4's state: the reports being filled and, per phase window, what its busy time rests on.
struct round_acc {
  std::vector<step_acc> steps;                              // in step order
  std::unordered_map<std::int32_t, std::size_t> step_slot;  // step number -> steps
  std::vector<std::int32_t> entry;                          // per window: its entry in its step's phases, -1: none
  std::vector<std::int32_t> parent;           // per window: the phase window directly enclosing it, -1: none
  std::vector<std::vector<interval>> busy;    // per phase window: its own and its nested phases' records
  std::vector<std::vector<interval>> copies;  // per phase window: the copies among them
  records_as_counted counted;                 // attribution_options::counted
  /// Every timed record of the round (assigned, left over or orphaned), its boundary markers and the
  /// previous round's tail, each begun where counted.begin_of() says (when modelled): the counters
  /// see the whole GPU, so a neighbouring step's work leaks into a window's edge samples too, and the
  /// graphics engine's set-up of every operation (kernel, memset or copy alike). Merged by
  /// finish_reports.
  std::vector<interval> counted_busy;

  /// One record into the as-counted timeline (when modelled).
  void count(const gpu_record& rec) {
    if (counted.on()) counted_busy.emplace_back(counted.begin_of(rec.begin_ns), rec.end_ns);
  }
  /// A boundary marker (a tiny memset of ours, boundary_markers.hpp): no record holds it, but the
  /// counters see it at every window's edge; counted as a memset record is.
  void count(const marker_time& m) {
    if (counted.on()) counted_busy.emplace_back(counted.begin_of(m.begin_ns), m.end_ns);
  }
};

/// The phase directly enclosing each phase window: same step and thread, smaller nesting, a CPU
/// window that contains it (scopes of one thread nest). -1 for top-level phases and steps.
inline std::vector<std::int32_t> enclosing_phases(const std::vector<window>& ws, const window_index& ix) {
  std::vector<std::int32_t> parent(ws.size(), -1);
  for (const auto& step : ix.phases_by_step) {
    std::vector<std::size_t> order = step.second;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return std::make_tuple(ws[a].thread, ws[a].cpu_begin, ws[a].depth) <
             std::make_tuple(ws[b].thread, ws[b].cpu_begin, ws[b].depth);
    });
    std::vector<std::size_t> open;  // windows of one thread containing the current one, outermost first
    for (auto w : order) {
      if (!open.empty() && ws[open.back()].thread != ws[w].thread) open.clear();
      while (!open.empty() && ws[open.back()].cpu_end < ws[w].cpu_end) open.pop_back();
      for (auto it = open.rbegin(); it != open.rend(); ++it) {
        if (ws[*it].depth < ws[w].depth) {
          parent[w] = static_cast<std::int32_t>(*it);
          break;
        }
      }
      open.push_back(w);
    }
  }
  return parent;
}

/// Stage 4a: one report per step window, in step order, with what the input says about the step.
inline round_acc open_steps(const attribution_input& in, const std::vector<window>& ws, const window_index& ix) {
  round_acc acc;
  acc.steps.resize(ix.steps.size());
  for (std::size_t k = 0; k < ix.steps.size(); ++k) {
    const window& w = ws[ix.steps[k]];
    step_acc& s = acc.steps[k];
    s.window = w.measured();
    s.report.step = w.step;
    s.report.kernels_measured = true;
    s.report.total.window_ns = s.window.second - s.window.first;
    s.report.total.span_ns = w.has_gpu ? w.gpu_end - w.gpu_begin : -1;
    const auto d = in.dropped.find(w.step);
    if (d != in.dropped.end()) s.report.dropped_records = d->second;
    const auto m = in.memory.find(w.step);
    if (m != in.memory.end()) {
      s.report.peak_allocated_bytes = m->second.first;
      s.report.peak_reserved_bytes = m->second.second;
    }
    acc.step_slot[w.step] = k;
  }
  acc.entry.assign(ws.size(), -1);
  acc.parent = enclosing_phases(ws, ix);
  acc.busy.resize(ws.size());
  acc.copies.resize(ws.size());
  return acc;
}

/// Stage 4b: one entry per (kind, name, micro-batch) of each step, in order of first CPU begin;
/// each occurrence adds its measured window and its marker span (unknown if one lacks markers).
inline void open_phase_entries(const attribution_input& in, const std::vector<window>& ws, round_acc& acc) {
  std::vector<std::size_t> phases;
  for (std::size_t w = 0; w < ws.size(); ++w)
    if (!ws[w].is_step && acc.step_slot.count(ws[w].step)) phases.push_back(w);
  std::stable_sort(phases.begin(), phases.end(),
                   [&](std::size_t a, std::size_t b) { return ws[a].cpu_begin < ws[b].cpu_begin; });
  for (auto w : phases) {
    const span_record& sp = in.spans[ws[w].span].span;
    step_acc& s = acc.steps[acc.step_slot[sp.step]];
    auto it = s.phase_index.emplace(phase_key{sp.kind, sp.name, sp.microbatch}, s.phases.size()).first;
    if (it->second == s.phases.size()) {
      s.phases.emplace_back();
      phase_gpu_facts& pf = s.phases.back().facts;
      pf.kind = sp.kind;
      pf.name = sp.name;
      pf.microbatch = sp.microbatch;
      pf.facts.window_ns = 0;
      pf.facts.span_ns = 0;
    }
    phase_entry_acc& pa = s.phases[it->second];
    const interval m = ws[w].measured();
    pa.facts.facts.window_ns += m.second - m.first;
    if (ws[w].has_gpu)
      pa.facts.facts.span_ns += ws[w].gpu_end - ws[w].gpu_begin;
    else
      pa.span_known = false;
    acc.entry[w] = static_cast<std::int32_t>(it->second);
  }
}

inline void add_to(gpu_facts& f, const gpu_record& rec) {
  const std::int64_t d = rec.end_ns - rec.begin_ns;
  switch (rec.what) {
    case gpu_activity::type::kernel:
      f.kernel_ns += d;
      ++f.kernel_count;
      f.short_kernel_count += d < short_kernel_ns;
      break;
    case gpu_activity::type::memcpy:
      f.memcpy_ns += d;
      f.memcpy_bytes += rec.bytes;
      break;
    case gpu_activity::type::memset:
      f.memset_ns += d;
      f.memset_bytes += rec.bytes;
      break;
  }
}

inline void add_kernel(phase_entry_acc& pa, const gpu_record& rec) {
  auto k = pa.kernel_index.find(rec.name);
  if (k == pa.kernel_index.end()) {
    k = pa.kernel_index.emplace(rec.name, pa.kernels.size()).first;
    pa.kernels.push_back(kernel_stat{rec.name ? rec.name : "", 0, 0});
  }
  ++pa.kernels[k->second].count;
  pa.kernels[k->second].total_ns += rec.end_ns - rec.begin_ns;
}

/// Stage 4b: room in each step for its assigned records, counted once, so that a recorded step's
/// thousands of records do not grow its vectors one reallocation at a time.
inline void reserve_records(round_acc& acc, const std::vector<assignment>& assigned, const std::vector<window>& ws,
                            bool keep_activities) {
  std::vector<std::size_t> per_window(ws.size(), 0);
  for (const assignment& a : assigned)
    if (a.fate == record_fate::assigned) ++per_window[static_cast<std::size_t>(a.step_window)];
  for (std::size_t w = 0; w < ws.size(); ++w) {
    if (!per_window[w]) continue;
    step_acc& s = acc.steps[acc.step_slot.at(ws[w].step)];
    s.busy.reserve(s.busy.size() + per_window[w]);
    s.busy_entry.reserve(s.busy_entry.size() + per_window[w]);
    if (keep_activities) s.report.activities.reserve(s.report.activities.size() + per_window[w]);
  }
}

/// Stage 4c: one assigned record into its step, its innermost phase (sums, kernel list) and the
/// busy time of that phase and every phase enclosing it.
inline void add_record(round_acc& acc, const gpu_record& rec, const assignment& a, const std::vector<window>& ws,
                       const std::vector<marked_span>& spans, bool keep_activities) {
  step_acc& s = acc.steps[acc.step_slot.at(ws[static_cast<std::size_t>(a.step_window)].step)];
  add_to(s.report.total, rec);
  const bool kernel = rec.what == gpu_activity::type::kernel;
  const std::int32_t entry = a.phase_window >= 0 ? acc.entry[static_cast<std::size_t>(a.phase_window)] : -1;
  if (s.busy.empty()) s.first_stream = rec.stream;
  s.streams = s.streams || rec.stream != s.first_stream;
  const bool copy = rec.what == gpu_activity::type::memcpy;
  s.busy.emplace_back(rec.begin_ns, rec.end_ns);
  s.busy_entry.push_back(entry);
  if (copy) s.copies.emplace_back(rec.begin_ns, rec.end_ns);
  if (entry >= 0) {
    phase_entry_acc& pa = s.phases[static_cast<std::size_t>(entry)];
    add_to(pa.facts.facts, rec);
    pa.own.emplace_back(rec.begin_ns, rec.end_ns);
    if (kernel) {
      add_kernel(pa, rec);
      pa.facts.kernel_durations_ns.push_back(rec.end_ns - rec.begin_ns);
    }
    for (std::int32_t w = a.phase_window; w >= 0; w = acc.parent[static_cast<std::size_t>(w)]) {
      acc.busy[static_cast<std::size_t>(w)].emplace_back(rec.begin_ns, rec.end_ns);
      if (copy) acc.copies[static_cast<std::size_t>(w)].emplace_back(rec.begin_ns, rec.end_ns);
    }
  } else if (kernel) {
    ++s.report.unattributed_kernels;
    s.report.unattributed_kernel_durations_ns.push_back(rec.end_ns - rec.begin_ns);
  }
  if (!keep_activities) return;
  gpu_activity act;
  act.what = rec.what;
  act.name = rec.name;
  act.begin_ns = rec.begin_ns;
  act.end_ns = rec.end_ns;
  act.device = rec.device;
  act.stream = rec.stream;
  act.bytes = rec.bytes;
  act.step = s.report.step;
  if (a.phase_window >= 0) {
    const span_record& sp = spans[ws[static_cast<std::size_t>(a.phase_window)].span].span;
    act.microbatch = sp.microbatch;
    act.phase = sp.kind;
    act.phase_name = sp.name;
  }
  s.report.activities.push_back(act);
}

/// Each entry's own time (the union of its records) and the part of it during which other work of
/// the step ran beside it: |own and others| = |own| + |others| - |all|. The second merge per entry
/// only when the step's records ran on more than one stream (on one, nothing runs side by side).
inline void own_and_hidden(step_acc& s) {
  const std::int64_t all = s.streams ? union_length(s.busy) : 0;
  for (std::size_t e = 0; e < s.phases.size(); ++e) {
    gpu_facts& f = s.phases[e].facts.facts;
    f.own_ns = union_length(std::move(s.phases[e].own));
    if (!s.streams || f.own_ns == 0) continue;
    std::vector<interval> others;
    others.reserve(s.busy.size());
    for (std::size_t r = 0; r < s.busy.size(); ++r)
      if (s.busy_entry[r] != static_cast<std::int32_t>(e)) others.push_back(s.busy[r]);
    f.hidden_ns = std::clamp<std::int64_t>(f.own_ns + union_length(std::move(others)) - all, 0, f.own_ns);
  }
}

/// The window [lo, hi)'s busy, idle-by-kind and copy time from its own records and its copies
/// (unmerged) and every record of its step (merged), added to `f`.
inline void add_window_busy(gpu_facts& f, std::vector<interval> own, std::vector<interval> copies,
                            const std::vector<interval>& all, std::int64_t lo, std::int64_t hi) {
  const std::vector<interval> merged = merge_intervals(std::move(own));
  f.busy_ns += covered_in(merged, lo, hi);
  const idle_split idle = split_idle(merged, all, lo, hi);
  f.idle_host_ns += idle.host_ns;
  f.idle_kernel_gap_ns += idle.kernel_gap_ns;
  f.idle_other_ns += idle.other_ns;
  f.copy_busy_ns += union_length(std::move(copies), lo, hi);
}

/// Stage 5: busy time per window (clipped to it, summed per entry), idle = window - busy and its
/// split by kind, copy time, every kernel name merged and sorted (not truncated), activities in
/// time order.
inline std::vector<step_gpu_report> finish_reports(round_acc& acc, const std::vector<window>& ws) {
  // The records as the counters would count them: every window read from the round's one timeline.
  acc.counted_busy = merge_intervals(std::move(acc.counted_busy));
  const coverage counted(acc.counted_busy);
  const auto counted_in = [&](const interval& m) {
    return static_cast<std::int64_t>(sampled_busy_ns(counted, m.first, m.second, acc.counted.sample_interval_ns) + 0.5);
  };
  for (step_acc& s : acc.steps) s.all = merge_intervals(s.busy);
  for (std::size_t w = 0; w < ws.size(); ++w) {
    if (acc.entry[w] < 0) continue;
    step_acc& s = acc.steps[acc.step_slot.at(ws[w].step)];
    const interval m = ws[w].measured();
    gpu_facts& f = s.phases[static_cast<std::size_t>(acc.entry[w])].facts.facts;
    add_window_busy(f, std::move(acc.busy[w]), std::move(acc.copies[w]), s.all, m.first, m.second);
    if (acc.counted.on()) f.counted_busy_ns = std::max<std::int64_t>(f.counted_busy_ns, 0) + counted_in(m);
  }
  std::vector<step_gpu_report> reports;
  reports.reserve(acc.steps.size());
  for (step_acc& s : acc.steps) {
    own_and_hidden(s);
    gpu_facts& total = s.report.total;
    add_window_busy(total, s.all, std::move(s.copies), s.all, s.window.first, s.window.second);
    if (acc.counted.on()) total.counted_busy_ns = counted_in(s.window);
    total.idle_ns = total.window_ns - total.busy_ns;
    for (phase_entry_acc& pa : s.phases) {
      gpu_facts& f = pa.facts.facts;
      f.idle_ns = f.window_ns - f.busy_ns;
      if (!pa.span_known) f.span_ns = -1;
      merge_kernels(pa.facts.kernels, pa.kernels);  // two interned pointers may carry one text
      sort_kernels(pa.facts.kernels);
      s.report.phases.push_back(std::move(pa.facts));
    }
    std::stable_sort(s.report.activities.begin(), s.report.activities.end(),
                     [](const gpu_activity& a, const gpu_activity& b) { return a.begin_ns < b.begin_ns; });
    reports.push_back(std::move(s.report));
  }
  return reports;
}

/// What of a round's merged as-counted timeline the next round's first samples can still see: the
/// intervals that end after one sample interval before the round's last window end.
inline std::vector<interval> counted_tail(const std::vector<interval>& merged, const std::vector<window>& ws,
                                          std::int64_t sample_interval_ns) {
  std::int64_t last_end = std::numeric_limits<std::int64_t>::min();
  for (const window& w : ws) last_end = std::max(last_end, w.measured().second);
  std::vector<interval> tail;
  for (const interval& iv : merged)
    if (iv.second > last_end - sample_interval_ns) tail.push_back(iv);
  return tail;
}

}  // namespace detail
TRACEML_END_NAMESPACE
