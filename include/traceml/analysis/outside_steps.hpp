// traceml: the time a run spends outside its steps. A phase recorded while no step is open (an
// evaluation pass after an epoch, a checkpoint before the loop) belongs to no step's statistics, and
// the wall time between one step's end and the next one's beginning is in no step either; both used
// to vanish from every output. Here they are aggregated: per phase name, its occurrences and time;
// the gaps between consecutive steps, their count, total and largest, and the gap's share of the
// steps' span; the gaps that hold an epoch mark (TRACEML_EPOCH(), traceml::mark_epoch(), the end of a
// traceml::steps range) apart, as epoch gaps.
//
// The step worker feeds it (profiler.hpp): the records outside any step from each drain, the epoch
// marks the recorder noted, then each step's begin and end in order. Memory is bounded: one entry
// per distinct outside phase name, and the marks not yet placed in a gap. Pure: no clock, no output.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE

/// One phase (kind and name) recorded outside any step, over the whole run.
struct outside_phase {
  phase_kind kind = phase_kind::user;
  std::string name;
  bool top_level = true;    ///< false when any occurrence was nested in another phase (left out of the total)
  std::uint64_t count = 0;  ///< occurrences
  double total_ms = 0;      ///< their wall time summed
  double mean_ms = 0;       ///< total_ms / count
  double max_ms = 0;        ///< the longest occurrence
};

/// Wall time between consecutive steps (from one step's end to the next one's beginning).
struct step_gap_figures {
  std::uint64_t count = 0;  ///< gaps (pairs of consecutive steps) counted
  double total_ms = 0;
  double largest_ms = 0;
  std::int32_t largest_after_step = -1;  ///< the step the largest gap follows (-1: none)
};

/// One gap between two steps, as the Chrome trace draws it.
struct step_gap {
  std::int64_t begin_ns = 0;  ///< the earlier step's end
  std::int64_t end_ns = 0;    ///< the later step's beginning
  std::int32_t after_step = -1;
  bool epoch = false;  ///< an epoch mark fell inside it (or inside the step before it)
};

/// Everything the run did outside its steps.
struct outside_steps_summary {
  std::vector<outside_phase> phases;  ///< by total time, longest first
  double phases_ms = 0;               ///< top-level outside phases' time, summed (nested ones are inside them)
  step_gap_figures gaps;              ///< every gap between consecutive steps (warm-up included)
  step_gap_figures epoch_gaps;        ///< of them, those that hold an epoch mark
  std::uint64_t epoch_marks = 0;      ///< epoch marks the program made during the run
  std::uint64_t names_left_out = 0;   ///< occurrences of names beyond max_outside_phase_names (not in `phases`)
  double steps_span_ms = 0;           ///< from the first step's beginning to the last step's end
  double gap_share = 0;               ///< gaps.total_ms / steps_span_ms, in [0, 1]

  bool empty() const noexcept { return phases.empty() && gaps.count == 0 && epoch_marks == 0; }
};

/// Distinct outside phase names kept: a program that names phases at run time cannot make the
/// summary grow without bound (the occurrences beyond are counted in names_left_out).
inline constexpr std::size_t max_outside_phase_names = 256;

/// Builds an outside_steps_summary as the run goes (step worker only; not thread-safe).
class outside_steps_accumulator {
 public:
  /// A record of no step (step < 0). Steps and micro-batch boundaries are not phases: ignored.
  void add_record(const span_record& r) {
    if (r.step >= 0 || !is_phase(r.kind)) return;
    auto it = std::find_if(phases_.begin(), phases_.end(),
                           [&](const outside_phase& p) { return p.kind == r.kind && p.name == r.name; });
    if (it == phases_.end()) {
      if (phases_.size() >= max_outside_phase_names) {
        ++names_left_out_;
        return;
      }
      phases_.push_back(outside_phase{r.kind, r.name ? r.name : "", true, 0, 0, 0, 0});
      it = phases_.end() - 1;
    }
    const double ms = static_cast<double>(r.duration_ns()) / 1e6;
    ++it->count;
    it->total_ms += ms;
    it->max_ms = std::max(it->max_ms, ms);
    it->top_level = it->top_level && r.nesting == 0;
  }

  /// An epoch mark at `t_ns`. Marks arrive before the step that follows them (the drain that
  /// brings a mark precedes the steps it processes); a mark is placed in the gap before the first
  /// step that begins after it.
  void add_epoch_mark(std::int64_t t_ns) {
    ++marks_;
    if (unplaced_.size() < max_unplaced) unplaced_.push_back(t_ns);
  }

  /// The next step, in order. Returns the gap before it (none for the first step).
  std::optional<step_gap> add_step(std::int32_t step, std::int64_t begin_ns, std::int64_t end_ns) {
    std::optional<step_gap> out;
    // Marks up to this step's beginning belong to the gap before it (one made inside the previous
    // step, at its last batch, too); those before the first step to no gap.
    bool epoch = false;
    std::size_t kept = 0;
    for (const auto t : unplaced_) {
      if (t <= begin_ns)
        epoch = epoch || have_step_;
      else
        unplaced_[kept++] = t;
    }
    unplaced_.resize(kept);
    if (have_step_) {
      const std::int64_t gap_ns = std::max<std::int64_t>(0, begin_ns - last_end_ns_);
      out = step_gap{last_end_ns_, last_end_ns_ + gap_ns, last_step_, epoch};
      add_gap(gaps_, *out);
      if (epoch) add_gap(epoch_gaps_, *out);
    } else {
      first_begin_ns_ = begin_ns;
    }
    have_step_ = true;
    last_step_ = step;
    last_end_ns_ = std::max(end_ns, last_end_ns_);
    return out;
  }

  outside_steps_summary summary() const {
    outside_steps_summary s;
    s.phases = phases_;
    for (auto& p : s.phases) {
      p.mean_ms = p.count ? p.total_ms / static_cast<double>(p.count) : 0;
      if (p.top_level) s.phases_ms += p.total_ms;
    }
    std::stable_sort(s.phases.begin(), s.phases.end(),
                     [](const outside_phase& a, const outside_phase& b) { return a.total_ms > b.total_ms; });
    s.gaps = gaps_;
    s.epoch_gaps = epoch_gaps_;
    s.epoch_marks = marks_;
    s.names_left_out = names_left_out_;
    if (have_step_) s.steps_span_ms = static_cast<double>(last_end_ns_ - first_begin_ns_) / 1e6;
    s.gap_share = s.steps_span_ms > 0 ? std::min(1.0, gaps_.total_ms / s.steps_span_ms) : 0;
    return s;
  }

 private:
  static constexpr std::size_t max_unplaced = 4096;  // marks waiting for a step: bounded
  static void add_gap(step_gap_figures& f, const step_gap& g) {
    const double ms = static_cast<double>(g.end_ns - g.begin_ns) / 1e6;
    ++f.count;
    f.total_ms += ms;
    if (f.largest_after_step < 0 || ms > f.largest_ms) {
      f.largest_ms = ms;
      f.largest_after_step = g.after_step;
    }
  }

  std::vector<outside_phase> phases_;
  step_gap_figures gaps_;
  step_gap_figures epoch_gaps_;
  std::vector<std::int64_t> unplaced_;
  std::uint64_t marks_ = 0;
  std::uint64_t names_left_out_ = 0;
  bool have_step_ = false;
  std::int32_t last_step_ = -1;
  std::int64_t first_begin_ns_ = 0;
  std::int64_t last_end_ns_ = 0;
};

TRACEML_END_NAMESPACE
