// traceml: kernel attribution, a pure function of GPU activity records and phase intervals.
//
// Question answered: which step, micro-batch and phase *launched* each kernel, memcpy and memset?
// No CUDA here: GPU sources (cupti_source.hpp) turn CUPTI records into gpu_record values and hand
// them over with the step's span_records; tests feed synthetic records (tests/gpu).
//
// How (docs/attribution.md has the long form):
//   * Exact, by stream order. At each phase (and step) boundary the GPU source enqueues a tiny
//     marker operation on the boundary thread's current stream. A stream runs its work in launch
//     order, so every operation on that stream that starts after the begin marker finished and before
//     the end marker started was launched inside the phase -- from whichever thread launched it
//     (autograd workers included) and whether it came from a CUDA-graph replay or not. The marker's
//     GPU interval is a `marker_time`; the boundary it stands for is referenced from `marked_span`.
//   * By GPU time, for streams without markers (side streams the phase did not run on): the
//     innermost phase whose marker window, on any stream of the same device, contains the start.
//   * By CPU time, when a span has no markers (markers off, dropped, or the stream was being
//     captured): the innermost phase whose CPU window contains the start, else the phase of the
//     same step that ended last before it (the GPU starts work after its launch, never before).
//   * A kernel belongs to exactly one phase, the innermost; kernels inside a step but outside its
//     phases count as `unattributed_kernels` of that step.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/gpu/activity.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE

/// How a record was attributed (for tests and diagnostics).
enum class attribution_method : std::uint8_t { none, stream_order, gpu_time, cpu_time };

/// Inputs of one attribution round: the spans of a run of consecutive steps (step spans and their
/// phase spans; micro-batch spans may be included and are ignored), marker times and records.
struct attribution_input {
  std::vector<marked_span> spans;
  std::vector<marker_time> markers;
  std::vector<gpu_record> records;
  /// Per step (by step index): records lost before they reached us, reported as dropped_records.
  std::unordered_map<std::int32_t, std::uint64_t> dropped;
  /// Per step: peak memory sampled at its end (-1: unknown).
  std::unordered_map<std::int32_t, std::pair<std::int64_t, std::int64_t>> memory;
  /// The last round of the run: nothing is left over for later steps.
  bool final_round = false;
};

struct attribution_options {
  std::size_t top_kernels = 10;  ///< kernel_stat entries per phase
  bool keep_activities = false;  ///< fill step_gpu_report::activities
};

struct attribution_output {
  std::vector<step_gpu_report> reports;  ///< one per step span of the input, in step order
  std::vector<gpu_record> leftover;      ///< records that may belong to a later step (not final)
  std::vector<attribution_method> method;  ///< per input record (leftovers: none)
  std::uint64_t orphans = 0;  ///< records inside no step window (counted as unattributed)
  std::uint64_t invalid = 0;  ///< records without timestamps (counted as dropped)
};

namespace detail {

/// Length of the union of [b, e) intervals. Sorts its argument.
inline std::int64_t union_length(std::vector<std::pair<std::int64_t, std::int64_t>>& iv) {
  std::sort(iv.begin(), iv.end());
  std::int64_t total = 0, cb = 0, ce = 0;
  bool open = false;
  for (auto& p : iv) {
    if (p.second <= p.first) continue;
    if (!open || p.first > ce) {
      if (open) total += ce - cb;
      cb = p.first;
      ce = p.second;
      open = true;
    } else if (p.second > ce) {
      ce = p.second;
    }
  }
  if (open) total += ce - cb;
  return total;
}

/// Length of [b, e) covered by a sorted, merged interval list.
inline std::int64_t covered_in(const std::vector<std::pair<std::int64_t, std::int64_t>>& merged, std::int64_t b,
                               std::int64_t e) {
  if (e <= b) return 0;
  auto it = std::upper_bound(merged.begin(), merged.end(), std::make_pair(b, std::numeric_limits<std::int64_t>::max()));
  if (it != merged.begin()) --it;
  std::int64_t covered = 0;
  for (; it != merged.end() && it->first < e; ++it) {
    const std::int64_t lo = std::max(b, it->first), hi = std::min(e, it->second);
    if (hi > lo) covered += hi - lo;
  }
  return covered;
}

inline std::vector<std::pair<std::int64_t, std::int64_t>> merge_intervals(
    std::vector<std::pair<std::int64_t, std::int64_t>> iv) {
  std::sort(iv.begin(), iv.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (auto& p : iv) {
    if (p.second <= p.first) continue;
    if (out.empty() || p.first > out.back().second) out.push_back(p);
    else out.back().second = std::max(out.back().second, p.second);
  }
  return out;
}

struct window {
  std::size_t span = 0;        // index into input.spans
  bool has_gpu = false;        // both markers seen on one device+stream
  std::uint32_t device = 0, stream = 0;
  std::int64_t gpu_begin = 0, gpu_end = 0;  // end of begin marker .. start of end marker
  std::int64_t cpu_begin = 0, cpu_end = 0;
  bool is_step = false;
  int depth = 0;               // nesting among phases of one thread (larger = inner)
};

}  // namespace detail

/// Attribute every record to a step, micro-batch and phase and compute per-phase GPU facts.
/// Pure: same input, same output. Cost: O(records x spans) per round, off the training thread.
inline attribution_output attribute(const attribution_input& in, const attribution_options& opt = {}) {
  using detail::window;
  attribution_output out;
  out.method.assign(in.records.size(), attribution_method::none);

  std::unordered_map<std::uint64_t, const marker_time*> marker_by_seq;
  for (auto& m : in.markers) marker_by_seq[m.seq] = &m;

  // ---- windows --------------------------------------------------------------------------------
  std::vector<window> windows;
  std::vector<std::size_t> step_windows;  // indices into windows, sorted by step
  for (std::size_t i = 0; i < in.spans.size(); ++i) {
    const auto& ms = in.spans[i];
    if (ms.span.kind == phase_kind::microbatch) continue;
    window w;
    w.span = i;
    w.cpu_begin = ms.span.begin_ns;
    w.cpu_end = ms.span.end_ns;
    w.is_step = ms.span.kind == phase_kind::step;
    w.depth = w.is_step ? -1 : ms.span.nesting;
    auto b = marker_by_seq.find(ms.begin_marker);
    auto e = marker_by_seq.find(ms.end_marker);
    if (ms.begin_marker && ms.end_marker && b != marker_by_seq.end() && e != marker_by_seq.end() &&
        b->second->device == e->second->device && b->second->stream == e->second->stream &&
        e->second->begin_ns >= b->second->end_ns) {
      w.has_gpu = true;
      w.device = b->second->device;
      w.stream = b->second->stream;
      w.gpu_begin = b->second->end_ns;
      w.gpu_end = e->second->begin_ns;
    }
    windows.push_back(w);
    if (w.is_step) step_windows.push_back(windows.size() - 1);
  }
  std::sort(step_windows.begin(), step_windows.end(), [&](std::size_t a, std::size_t b) {
    return in.spans[windows[a].span].span.step < in.spans[windows[b].span].span.step;
  });
  if (step_windows.empty()) {
    // Nothing to attribute against: everything waits for a later round (or is orphaned).
    if (!in.final_round) out.leftover = in.records;
    else out.orphans = in.records.size();
    return out;
  }
  auto step_of = [&](const window& w) { return in.spans[w.span].span.step; };

  // Streams that carry markers (per device): their records are attributed by stream order only.
  auto stream_key = [](std::uint32_t dev, std::uint32_t st) { return (std::uint64_t{dev} << 32) | st; };
  std::unordered_map<std::uint64_t, bool> marked_stream;
  for (auto& w : windows)
    if (w.has_gpu) marked_stream[stream_key(w.device, w.stream)] = true;

  // The end of the last step of this round: later records may belong to a later step.
  const window& last_step = windows[step_windows.back()];
  const std::int64_t last_cpu_end = last_step.cpu_end;

  // ---- attribution ----------------------------------------------------------------------------
  struct assignment {
    std::int32_t step_window = -1;   // index into windows, -1: orphan
    std::int32_t phase_window = -1;  // index into windows, -1: step-level
  };
  std::vector<assignment> assign(in.records.size());
  std::uint64_t orphan_kernels = 0;
  auto orphan = [&](const gpu_record& rec) {
    ++out.orphans;
    if (rec.what == gpu_activity::type::kernel) ++orphan_kernels;
  };
  auto better = [&](std::int32_t cur, std::size_t cand) {
    if (cur < 0) return true;
    const auto& a = windows[static_cast<std::size_t>(cur)];
    const auto& b = windows[cand];
    if (b.depth != a.depth) return b.depth > a.depth;
    return b.cpu_begin > a.cpu_begin;  // the later-opened of two concurrent phases
  };
  auto find_step_window = [&](std::int32_t step) -> std::int32_t {
    for (auto si : step_windows)
      if (step_of(windows[si]) == step) return static_cast<std::int32_t>(si);
    return -1;
  };

  for (std::size_t r = 0; r < in.records.size(); ++r) {
    const gpu_record& rec = in.records[r];
    if (rec.begin_ns == 0 && rec.end_ns == 0) {
      ++out.invalid;  // CUPTI could not time it (e.g. record of an aborted context)
      continue;
    }
    const std::int64_t t = rec.begin_ns;
    assignment a;
    attribution_method how = attribution_method::none;
    const bool on_marked = marked_stream.count(stream_key(rec.device, rec.stream)) != 0;
    bool decided = false;

    if (on_marked) {
      // Exact: windows of this very stream.
      for (std::size_t w = 0; w < windows.size(); ++w) {
        const auto& win = windows[w];
        if (!win.has_gpu || win.device != rec.device || win.stream != rec.stream) continue;
        if (t < win.gpu_begin || t > win.gpu_end) continue;
        if (win.is_step) a.step_window = static_cast<std::int32_t>(w);
        else if (better(a.phase_window, w)) a.phase_window = static_cast<std::int32_t>(w);
      }
      if (a.phase_window >= 0 || a.step_window >= 0) {
        how = attribution_method::stream_order;
        decided = true;
      } else {
        // Between marked windows of its own stream: launched outside every step of this round,
        // or (when the step has no markers) fall through to CPU time.
        bool any_marked_step = false;
        for (auto si : step_windows) any_marked_step |= windows[si].has_gpu;
        if (any_marked_step) {
          // After the last marked step: a later step's work.
          std::int64_t last_gpu_end = std::numeric_limits<std::int64_t>::min();
          for (auto si : step_windows)
            if (windows[si].has_gpu && windows[si].device == rec.device && windows[si].stream == rec.stream)
              last_gpu_end = std::max(last_gpu_end, windows[si].gpu_end);
          if (last_gpu_end != std::numeric_limits<std::int64_t>::min() && t > last_gpu_end && !in.final_round) {
            out.leftover.push_back(rec);
            continue;
          }
          if (last_gpu_end != std::numeric_limits<std::int64_t>::min()) {
            orphan(rec);
            continue;
          }
        }
      }
    }
    if (!decided) {
      // By GPU time: marker windows of other streams on the same device.
      for (std::size_t w = 0; w < windows.size(); ++w) {
        const auto& win = windows[w];
        if (!win.has_gpu || win.device != rec.device) continue;
        if (t < win.gpu_begin || t > win.gpu_end) continue;
        if (win.is_step) a.step_window = static_cast<std::int32_t>(w);
        else if (better(a.phase_window, w)) a.phase_window = static_cast<std::int32_t>(w);
      }
      if (a.phase_window >= 0 || a.step_window >= 0) {
        how = attribution_method::gpu_time;
        decided = true;
      }
    }
    if (!decided) {
      // By CPU time. The step: the one whose CPU window contains the start, else the last step
      // that began before it (work starts after its launch).
      if (t > last_cpu_end && !in.final_round) {
        out.leftover.push_back(rec);
        continue;
      }
      std::int32_t sw = -1;
      for (auto si : step_windows)
        if (windows[si].cpu_begin <= t) sw = static_cast<std::int32_t>(si);
      if (sw < 0) {
        orphan(rec);
        continue;
      }
      a.step_window = sw;
      const std::int32_t step = step_of(windows[static_cast<std::size_t>(sw)]);
      std::int32_t latest_before = -1;
      for (std::size_t w = 0; w < windows.size(); ++w) {
        const auto& win = windows[w];
        if (win.is_step || in.spans[win.span].span.step != step) continue;
        if (t >= win.cpu_begin && t <= win.cpu_end) {
          if (better(a.phase_window, w)) a.phase_window = static_cast<std::int32_t>(w);
        } else if (win.cpu_end < t) {
          if (latest_before < 0 || win.cpu_end > windows[static_cast<std::size_t>(latest_before)].cpu_end ||
              (win.cpu_end == windows[static_cast<std::size_t>(latest_before)].cpu_end &&
               win.depth > windows[static_cast<std::size_t>(latest_before)].depth))
            latest_before = static_cast<std::int32_t>(w);
        }
      }
      if (a.phase_window < 0) a.phase_window = latest_before;
      how = attribution_method::cpu_time;
    }
    // A phase decides the step (its own step window), whatever window matched the step first.
    if (a.phase_window >= 0) {
      const std::int32_t sw = find_step_window(in.spans[windows[static_cast<std::size_t>(a.phase_window)].span].span.step);
      if (sw >= 0) a.step_window = sw;
    }
    if (a.step_window < 0) {
      orphan(rec);
      continue;
    }
    assign[r] = a;
    out.method[r] = how;
  }

  // ---- facts ----------------------------------------------------------------------------------
  // Everything the GPU ran in this round, for idle time inside wall windows.
  std::vector<std::pair<std::int64_t, std::int64_t>> all_iv;
  all_iv.reserve(in.records.size());
  for (auto& rec : in.records)
    if (rec.end_ns > rec.begin_ns && rec.begin_ns != 0) all_iv.emplace_back(rec.begin_ns, rec.end_ns);
  const auto all_busy = detail::merge_intervals(std::move(all_iv));

  struct phase_acc {
    phase_gpu_facts facts;
    std::vector<std::pair<std::int64_t, std::int64_t>> iv;
    std::unordered_map<const char*, std::size_t> kernel_index;
    std::vector<kernel_stat> kernels;
    std::int64_t wall_ns = 0, covered_ns = 0;
    bool span_known = true;
    std::int64_t span_ns = 0;
  };
  struct step_acc {
    step_gpu_report report;
    std::vector<std::pair<std::int64_t, std::int64_t>> iv;
    std::vector<phase_acc> phases;
    std::unordered_map<std::string, std::size_t> phase_index;  // kind/name/microbatch
  };
  std::vector<step_acc> steps(step_windows.size());
  std::unordered_map<std::int32_t, std::size_t> step_slot;
  for (std::size_t k = 0; k < step_windows.size(); ++k) {
    const auto& w = windows[step_windows[k]];
    const auto& sp = in.spans[w.span].span;
    auto& s = steps[k];
    s.report.step = sp.step;
    s.report.kernels_measured = true;
    s.report.total.idle_ns = (w.cpu_end - w.cpu_begin) - detail::covered_in(all_busy, w.cpu_begin, w.cpu_end);
    s.report.total.span_ns = w.has_gpu ? w.gpu_end - w.gpu_begin : -1;
    auto d = in.dropped.find(sp.step);
    if (d != in.dropped.end()) s.report.dropped_records = d->second;
    auto m = in.memory.find(sp.step);
    if (m != in.memory.end()) {
      s.report.peak_allocated_bytes = m->second.first;
      s.report.peak_reserved_bytes = m->second.second;
    }
    step_slot[sp.step] = k;
  }
  if (!steps.empty()) steps.front().report.dropped_records += out.invalid;

  // Phase entries in order of first begin, one per (kind, name, micro-batch).
  std::vector<std::size_t> phase_windows;
  for (std::size_t w = 0; w < windows.size(); ++w)
    if (!windows[w].is_step) phase_windows.push_back(w);
  std::sort(phase_windows.begin(), phase_windows.end(),
            [&](std::size_t a, std::size_t b) { return windows[a].cpu_begin < windows[b].cpu_begin; });
  std::vector<std::int32_t> phase_slot(windows.size(), -1);
  for (auto w : phase_windows) {
    const auto& sp = in.spans[windows[w].span].span;
    auto st = step_slot.find(sp.step);
    if (st == step_slot.end()) continue;
    auto& s = steps[st->second];
    const std::string key = std::to_string(static_cast<int>(sp.kind)) + '/' + sp.name + '/' + std::to_string(sp.microbatch);
    auto it = s.phase_index.find(key);
    std::size_t idx;
    if (it == s.phase_index.end()) {
      idx = s.phases.size();
      s.phase_index.emplace(key, idx);
      s.phases.emplace_back();
      auto& pf = s.phases.back().facts;
      pf.kind = sp.kind;
      pf.name = sp.name;
      pf.microbatch = sp.microbatch;
    } else {
      idx = it->second;
    }
    auto& pa = s.phases[idx];
    pa.wall_ns += sp.end_ns - sp.begin_ns;
    pa.covered_ns += detail::covered_in(all_busy, sp.begin_ns, sp.end_ns);
    if (windows[w].has_gpu) pa.span_ns += windows[w].gpu_end - windows[w].gpu_begin;
    else pa.span_known = false;
    phase_slot[w] = static_cast<std::int32_t>(idx);
  }

  for (std::size_t r = 0; r < in.records.size(); ++r) {
    const auto& a = assign[r];
    if (a.step_window < 0) continue;
    const gpu_record& rec = in.records[r];
    const auto& sw = windows[static_cast<std::size_t>(a.step_window)];
    auto& s = steps[step_slot[in.spans[sw.span].span.step]];
    auto add = [&](gpu_facts& f) {
      const std::int64_t d = rec.end_ns - rec.begin_ns;
      switch (rec.what) {
        case gpu_activity::type::kernel: f.kernel_ns += d; ++f.kernel_count; break;
        case gpu_activity::type::memcpy: f.memcpy_ns += d; f.memcpy_bytes += rec.bytes; break;
        case gpu_activity::type::memset: f.memset_ns += d; f.memset_bytes += rec.bytes; break;
      }
    };
    add(s.report.total);
    s.iv.emplace_back(rec.begin_ns, rec.end_ns);
    phase_acc* pa = nullptr;
    if (a.phase_window >= 0 && phase_slot[static_cast<std::size_t>(a.phase_window)] >= 0)
      pa = &s.phases[static_cast<std::size_t>(phase_slot[static_cast<std::size_t>(a.phase_window)])];
    if (pa) {
      add(pa->facts.facts);
      pa->iv.emplace_back(rec.begin_ns, rec.end_ns);
      if (rec.what == gpu_activity::type::kernel) {
        auto k = pa->kernel_index.find(rec.name);
        if (k == pa->kernel_index.end()) {
          k = pa->kernel_index.emplace(rec.name, pa->kernels.size()).first;
          pa->kernels.push_back(kernel_stat{rec.name ? rec.name : "", 0, 0});
        }
        auto& ks = pa->kernels[k->second];
        ++ks.count;
        ks.total_ns += rec.end_ns - rec.begin_ns;
      }
    } else if (rec.what == gpu_activity::type::kernel) {
      ++s.report.unattributed_kernels;
    }
    if (opt.keep_activities) {
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
        const auto& sp = in.spans[windows[static_cast<std::size_t>(a.phase_window)].span].span;
        act.microbatch = sp.microbatch;
        act.phase = sp.kind;
        act.phase_name = sp.name;
      }
      s.report.activities.push_back(act);
    }
  }

  // Orphans (inside no step of this round) are reported with the first step, so that they are
  // visible as unattributed rather than silently lost.
  if (!steps.empty()) steps.front().report.unattributed_kernels += orphan_kernels;

  for (auto& s : steps) {
    s.report.total.busy_ns = detail::union_length(s.iv);
    for (auto& pa : s.phases) {
      pa.facts.facts.busy_ns = detail::union_length(pa.iv);
      pa.facts.facts.idle_ns = pa.wall_ns - pa.covered_ns;
      pa.facts.facts.span_ns = pa.span_known ? pa.span_ns : -1;
      // Two interned pointers can carry the same text (synthetic inputs): merge them.
      std::unordered_map<std::string, std::size_t> by_name;
      std::vector<kernel_stat> merged;
      for (auto& k : pa.kernels) {
        auto it = by_name.find(k.name);
        if (it == by_name.end()) {
          by_name.emplace(k.name, merged.size());
          merged.push_back(k);
        } else {
          merged[it->second].count += k.count;
          merged[it->second].total_ns += k.total_ns;
        }
      }
      std::sort(merged.begin(), merged.end(), [](const kernel_stat& a, const kernel_stat& b) {
        return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
      });
      pa.facts.kernels = std::move(merged);
      s.report.phases.push_back(std::move(pa.facts));
    }
    std::sort(s.report.activities.begin(), s.report.activities.end(),
              [](const gpu_activity& a, const gpu_activity& b) { return a.begin_ns < b.begin_ns; });
    out.reports.push_back(std::move(s.report));
  }
  return out;
}

TRACEML_END_NAMESPACE
