// traceml: the one place where raw GPU activity becomes per-step reports.
//
// A GPU source delivers raw activity (gpu/activity.hpp): finished steps with their spans, boundary
// markers and CUDA-event times, plus whatever activity records and marker times arrived. The
// profiler hands every delivery to this stage and attaches the reports it returns to the steps:
//   * recorded steps (kernel records were on) go through the pure attribution engine
//     (attribution.hpp) in one round per delivery: kernels, copies, busy, idle and window;
//   * unrecorded steps get a report with kernels_measured = false, their memory and dropped counts;
//     so do a schedule's warm-up steps, whose records take part in the round (and are discarded);
//   * on every step, span_ns of the step and of each phase comes from the CUDA events when the step
//     was timed with them (the same measurement on recorded and unrecorded steps), else from the
//     markers attribution found (recorded steps) or -1.
// Records and marker times that no step of the round can claim yet (a later step's) are kept for
// the next delivery. Not thread-safe: one thread at a time, the attribution worker's
// (attribution_worker.hpp), which calls it outside every lock.
//
//   traceml::attribution_stage stage;
//   for (auto& rep : stage.add(source->collect(false))) attach(rep);
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <unordered_map>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/gpu/activity.hpp"
#include "traceml/gpu/attribution.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/phase_key.hpp"

TRACEML_BEGIN_NAMESPACE

class attribution_stage {
 public:
  /// Diagnostics and tests: sees each attribution round (its input and output).
  using round_tap = std::function<void(const attribution_input&, const attribution_output&)>;

  /// Fill step_gpu_report::activities (for the Chrome trace).
  void keep_activities(bool on) noexcept { keep_activities_ = on; }
  void counter_view(records_as_counted v) noexcept { counted_ = v; }
  void set_round_tap(round_tap tap) { tap_ = std::move(tap); }

  /// One report per delivered step, in the delivery's order. Attribution runs only when the
  /// delivery holds a recorded step or records are left over from the last round. Cost:
  /// O(records x log windows) on such rounds, nothing else.
  std::vector<step_gpu_report> add(gpu_delivery d) {
    records_.insert(records_.end(), d.records.begin(), d.records.end());
    for (const auto& m : d.markers) markers_[m.seq] = m;
    std::unordered_map<std::int32_t, step_gpu_report> attributed;
    // A warm-up step's records (discarded) still need a round: it claims them, no other step does.
    const bool any_recorded = std::any_of(d.steps.begin(), d.steps.end(),
                                          [](const step_activity& s) { return s.recorded || s.discard_records; });
    std::uint64_t orphan_kernels = 0;
    if (!d.steps.empty() && (any_recorded || !records_.empty())) {
      attributed = attribute_round(d.steps, d.final, orphan_kernels);
    } else if (d.final) {
      // The run is over and no step can claim them: unattributed, not silently lost.
      for (const auto& r : records_) orphan_kernels += r.what == gpu_activity::type::kernel;
      records_.clear();
      markers_.clear();
    }
    std::vector<step_gpu_report> out;
    out.reserve(d.steps.size());
    for (const auto& s : d.steps) {
      auto it = s.recorded ? attributed.find(s.step) : attributed.end();
      if (s.recorded && it == attributed.end())
        report_once("attribution-missing",
                    "attribution returned no report for a recorded step; it is reported "
                    "as unrecorded");
      out.push_back(it != attributed.end() ? std::move(it->second) : unrecorded_report(s));
      out.back().schedule = s.schedule;
      apply_event_spans(s, out.back());
    }
    if (!out.empty())
      out.front().unattributed_kernels += orphan_kernels;
    else if (orphan_kernels)
      report_once("gpu-orphans", "GPU kernels arrived after the last step of the run; they are in no step's figures");
    return out;
  }

  /// Records and marker times kept for a later delivery (tests, diagnostics).
  std::size_t leftover_records() const noexcept { return records_.size(); }
  std::size_t leftover_markers() const noexcept { return markers_.size(); }

 private:
  /// One attribution round over the steps of a delivery; reports of its recorded steps, by step.
  /// Unrecorded steps take part too: records switched off late (record_switch.hpp) fall into the
  /// unrecorded step after a recorded one and are claimed by it -- and not reported, since that
  /// step's kernels were not measured -- rather than counted as unattributed. Kernels no step of
  /// the round could claim are added to `orphan_kernels` when attribution filed them under an
  /// unrecorded step.
  std::unordered_map<std::int32_t, step_gpu_report> attribute_round(const std::vector<step_activity>& steps, bool final,
                                                                    std::uint64_t& orphan_kernels) {
    attribution_input in;
    std::unordered_set<std::uint64_t> used;
    std::unordered_set<std::int32_t> recorded;
    for (const auto& s : steps) {
      if (s.recorded) recorded.insert(s.step);
      for (const auto& ts : s.spans) {
        in.spans.push_back(ts.marked);
        for (std::uint64_t seq : {ts.marked.begin_marker, ts.marked.end_marker}) {
          auto m = seq ? markers_.find(seq) : markers_.end();
          if (m == markers_.end()) continue;
          in.markers.push_back(m->second);
          used.insert(seq);
        }
      }
      in.memory[s.step] = {s.memory.peak_allocated_bytes, s.memory.peak_reserved_bytes};
      in.dropped[s.step] = s.dropped_records;
    }
    in.records.swap(records_);
    in.final_round = final;
    in.counted_context.swap(counted_tail_);
    if (counted_.on())  // markers of later steps are on the GPU already: the counters see them too
      for (const auto& m : markers_)
        if (!used.count(m.first))
          in.counted_context.emplace_back(counted_.begin_of(m.second.begin_ns), m.second.end_ns);
    attribution_options ao;
    ao.keep_activities = keep_activities_;
    ao.counted = counted_;
    attribution_output out = attribute(in, ao);
    if (tap_) {
      try {
        tap_(in, out);
      } catch (const std::exception& e) {
        report_once("attribution-tap", std::string("the attribution round tap threw: ") + e.what());
      }
    }
    records_ = std::move(out.leftover);
    counted_tail_ = final ? std::vector<std::pair<std::int64_t, std::int64_t>>{} : std::move(out.counted_tail);
    // Markers of this round are spent; those of scopes outside steps are never used: forget every
    // marker older than the newest one used. A later step's markers are newer and stay.
    std::uint64_t newest = 0;
    for (auto seq : used) newest = std::max(newest, seq);
    for (auto it = markers_.begin(); it != markers_.end();)
      it = it->first <= newest ? markers_.erase(it) : std::next(it);
    if (final) markers_.clear();
    // Attribution files the round's orphans under its first report; when that step is unrecorded
    // (its report is not used), they are counted here: placed nowhere and not left over.
    if (!out.reports.empty() && !recorded.count(out.reports.front().step)) {
      std::uint64_t unplaced = 0;
      for (std::size_t i = 0; i < in.records.size() && i < out.method.size(); ++i) {
        const auto& r = in.records[i];
        unplaced += out.method[i] == attribution_method::none && r.what == gpu_activity::type::kernel &&
                    (r.begin_ns != 0 || r.end_ns != 0);
      }
      for (const auto& r : records_) unplaced -= r.what == gpu_activity::type::kernel ? 1 : 0;
      orphan_kernels += unplaced;
    }
    std::unordered_map<std::int32_t, step_gpu_report> by_step;
    for (auto& r : out.reports)
      if (recorded.count(r.step)) by_step[r.step] = std::move(r);
    return by_step;
  }

  /// A step without kernel records: what was measured anyway (memory, dropped), and per phase an
  /// entry whose GPU fields say "not measured" (window_ns = -1, span_ns filled from events later).
  static step_gpu_report unrecorded_report(const step_activity& s) {
    step_gpu_report rep;
    rep.step = s.step;
    rep.kernels_measured = false;
    rep.peak_allocated_bytes = s.memory.peak_allocated_bytes;
    rep.peak_reserved_bytes = s.memory.peak_reserved_bytes;
    rep.dropped_records = s.dropped_records;
    std::vector<const span_record*> phases;
    for (const auto& ts : s.spans)
      if (ts.marked.span.kind != phase_kind::step && ts.marked.span.kind != phase_kind::microbatch)
        phases.push_back(&ts.marked.span);
    std::stable_sort(phases.begin(), phases.end(),
                     [](const span_record* a, const span_record* b) { return a->begin_ns < b->begin_ns; });
    std::unordered_set<phase_key, phase_key_hash> seen;
    for (const span_record* p : phases) {
      if (!seen.insert(phase_key{p->kind, p->name, p->microbatch}).second) continue;
      phase_gpu_facts f;
      f.kind = p->kind;
      f.name = p->name;
      f.microbatch = p->microbatch;
      rep.phases.push_back(std::move(f));
    }
    return rep;
  }

  /// Where the step was timed with CUDA events, span_ns of the step and of every phase are the
  /// events' (summed over a phase's scopes in the step; -1 when none of them was timed).
  static void apply_event_spans(const step_activity& s, step_gpu_report& rep) {
    apply_counters(s, rep);
    const bool timed = std::any_of(s.spans.begin(), s.spans.end(), [](const timed_span& t) { return t.event_ns >= 0; });
    if (!timed) return;
    std::unordered_map<phase_key, std::int64_t, phase_key_hash> phase_ns;
    rep.total.span_ns = -1;
    for (const auto& ts : s.spans) {
      const span_record& sp = ts.marked.span;
      if (sp.kind == phase_kind::microbatch) continue;
      if (sp.kind == phase_kind::step) {
        rep.total.span_ns = ts.event_ns;
        continue;
      }
      auto it = phase_ns.emplace(phase_key{sp.kind, sp.name, sp.microbatch}, -1).first;
      if (ts.event_ns >= 0) it->second = (it->second < 0 ? 0 : it->second) + ts.event_ns;
    }
    for (auto& p : rep.phases) {
      auto it = phase_ns.find(phase_key{p.kind, p.name, p.microbatch});
      p.facts.span_ns = it == phase_ns.end() ? -1 : it->second;
    }
  }

  /// Hardware-counter facts of the step and of each phase (summed over a phase's scopes).
  static void apply_counters(const step_activity& s, step_gpu_report& rep) {
    for (const auto& ts : s.spans) {
      if (!ts.counters.measured()) continue;
      const span_record& sp = ts.marked.span;
      if (sp.kind == phase_kind::microbatch) continue;
      if (sp.kind == phase_kind::step) {
        rep.total.counters += ts.counters;
        continue;
      }
      for (auto& p : rep.phases)
        if (p.kind == sp.kind && p.microbatch == sp.microbatch && std::string_view(p.name) == sp.name)
          p.facts.counters += ts.counters;
    }
  }

  bool keep_activities_ = false;
  records_as_counted counted_;
  round_tap tap_;
  std::vector<gpu_record> records_;  // not yet claimed by a step
  std::vector<std::pair<std::int64_t, std::int64_t>>
      counted_tail_;                                        // the last round's, as counted (next round's edges)
  std::unordered_map<std::uint64_t, marker_time> markers_;  // by sequence number, not yet used
};

TRACEML_END_NAMESPACE
