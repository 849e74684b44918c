// traceml: what a schedule sweep (sweep.hpp) found: the candidates MxA with their figures, ranked
// by time per example, and the recommendation with its reason and confidence. Pure: computed from
// the candidates' runs, so that the sinks (sinks/sweep_report.hpp) only format, and a test can rank
// hand-made runs.
//
//   traceml::sweep_result r;                 // candidates with status measured and their runs
//   traceml::rank_sweep(r);                  // figures, ranks, recommendation
//   r.recommendation.schedule;               // "4x2"
//
// The recommendation: the fastest per example, `clear` when the range of its repeats' medians
// overlaps no other candidate's; when ranges overlap the difference is noise (compare.hpp's noise
// check, per example), the confidence is `tie`, and of the tied candidates the one needing the
// least memory is recommended. The reason quotes the figures; the explanation is the comparison
// engine's (compare.hpp) on the recommended candidate and its nearest rival.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "traceml/analysis/compare.hpp"
#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/format.hpp"

TRACEML_BEGIN_NAMESPACE

/// The largest effective batch a sweep accepts (2^20 examples per optimizer step): anything above is
/// a typing error, and M x A then stays far inside 64 bits.
inline constexpr std::int64_t max_sweep_batch = std::int64_t{1} << 20;

/// One way to reach an effective batch: micro-batch M (examples per forward/backward), accumulation A
/// (forward/backward passes per optimizer step).
struct sweep_schedule {
  std::int64_t micro_batch = 1;
  std::int64_t accumulation = 1;
  std::int64_t effective_batch() const noexcept { return micro_batch * accumulation; }
  std::string name() const { return std::to_string(micro_batch) + "x" + std::to_string(accumulation); }
  bool operator==(const sweep_schedule& o) const noexcept {
    return micro_batch == o.micro_batch && accumulation == o.accumulation;
  }
};

/// What became of a candidate.
enum class sweep_status {
  measured,       ///< ran every repeat
  out_of_memory,  ///< ran out of memory (in the fit probe, or in a repeat)
  failed,         ///< threw something else
  not_measured,   ///< fits, but was not among the candidates measured (sweep_options::max_candidates)
};

inline const char* to_string(sweep_status s) noexcept {
  switch (s) {
    case sweep_status::measured: return "measured";
    case sweep_status::out_of_memory: return "out of memory";
    case sweep_status::failed: return "failed";
    case sweep_status::not_measured: return "not measured";
  }
  return "?";
}

/// One candidate schedule and what the sweep found; the figures are computed once, here.
struct sweep_candidate {
  sweep_schedule schedule;
  sweep_status status = sweep_status::not_measured;
  std::string note;              ///< why it has no figures ("out of memory in the fit probe: ...")
  std::vector<run_result> runs;  ///< one per repeat when measured
  compared_run column;           ///< make_compared_run(name, runs): median, spread, phases
  std::size_t rank = 0;          ///< 1 = fastest per example; 0 = not ranked
  /// Median step time per example (= column.median_ms / effective batch) and the spread of the
  /// repeats' medians (p10..p90 of the steps with one repeat), per example likewise.
  double ms_per_example = 0, spread_lo_ms_per_example = 0, spread_hi_ms_per_example = 0;
  double examples_per_s = 0;  ///< 1000 / ms_per_example
  double ratio_to_best = 0;   ///< ms_per_example / the fastest candidate's
  /// Peaks over the measured steps of every repeat (-1: unknown, as on the CPU).
  std::int64_t peak_reserved_bytes = -1, peak_allocated_bytes = -1;
  double headroom = -1;  ///< 1 - peak reserved / device memory; -1: unknown

  std::string name() const { return schedule.name(); }
  bool ranked() const noexcept { return rank > 0; }
};

/// How sure the recommendation is.
enum class sweep_confidence {
  none,            ///< nothing to recommend: no candidate could be measured
  only_candidate,  ///< one candidate was measured
  clear,           ///< faster than every other candidate beyond the repeats' spread
  tie,             ///< at least one other candidate is as fast within the spread
};

inline const char* to_string(sweep_confidence c) noexcept {
  switch (c) {
    case sweep_confidence::none: return "none";
    case sweep_confidence::only_candidate: return "only candidate";
    case sweep_confidence::clear: return "clear";
    case sweep_confidence::tie: return "tie";
  }
  return "?";
}

struct sweep_recommendation {
  std::string schedule;  ///< "4x2"; empty when none
  sweep_confidence confidence = sweep_confidence::none;
  std::vector<std::string> tied;  ///< the other candidates inside the spread of the fastest
  std::string compared_with;      ///< the candidate the explanation holds it against
  std::string reason;             ///< in words, every number from the candidates' figures
  /// The comparison engine's explanation of `compared_with` against the recommendation (compare.hpp;
  /// within one effective batch only), empty otherwise.
  std::string explanation;
};

struct sweep_result {
  /// Ranked candidates first (rank 1, 2, ...), then those out of memory, failed, not measured, each
  /// group in plan order (effective batch, then micro-batch from the largest).
  std::vector<sweep_candidate> candidates;
  sweep_recommendation recommendation;
  std::int64_t largest_fitting_micro_batch = 0;  ///< 0: none fits (or not probed: every one measured failed)
  std::int64_t device_memory_bytes = -1;
  std::size_t repeats = 0, steps = 0, warmup = 0, probe_steps = 0;

  const sweep_candidate* find(const std::string& schedule) const {
    for (const auto& c : candidates)
      if (c.name() == schedule) return &c;
    return nullptr;
  }
};

namespace detail {

inline std::string gib_text(std::int64_t bytes) {
  return fixed_text(static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0), 1) + " GiB";
}

/// "72.0 ms per step (9.00 ms per example)" or, across effective batches, per example first.
inline std::string speed_text(const sweep_candidate& c) {
  return fixed_text(c.column.median_ms, 1) + " ms per step, " + fixed_text(c.ms_per_example, 2) + " ms per example";
}

/// "72.0..75.1 ms per step" (one effective batch) or "9.00..9.39 ms per example".
inline std::string spread_text(const sweep_candidate& c, bool per_example) {
  return per_example
             ? fixed_text(c.spread_lo_ms_per_example, 2) + ".." + fixed_text(c.spread_hi_ms_per_example, 2) +
                   " ms per example"
             : fixed_text(c.column.spread_lo_ms, 1) + ".." + fixed_text(c.column.spread_hi_ms, 1) + " ms per step";
}

inline std::string memory_text(const sweep_candidate& c) {
  if (c.peak_reserved_bytes < 0) return "";
  std::string s = "peak " + gib_text(c.peak_reserved_bytes) + " reserved";
  if (c.headroom >= 0) s += ", " + fixed_text(c.headroom * 100, 0) + "% of the device free";
  return s;
}

/// What a candidate's spread is: its repeats' medians, or with one repeat its steps' p10..p90.
inline const char* spread_basis(const sweep_candidate& c) {
  return c.column.repeats > 1 ? "the ranges of the repeats' medians" : "the p10..p90 ranges of step time";
}

/// The ranges of two candidates' medians (per example) overlap: they cannot be told apart.
inline bool within_spread(const sweep_candidate& a, const sweep_candidate& b) {
  return a.spread_lo_ms_per_example <= b.spread_hi_ms_per_example &&
         b.spread_lo_ms_per_example <= a.spread_hi_ms_per_example;
}

/// Figures of a measured candidate (step 4); false when it has no measured step to rank.
inline bool fill_figures(sweep_candidate& c, std::int64_t device_bytes) {
  c.column = make_compared_run(c.name(), c.runs);
  for (const auto& r : c.runs) {
    c.peak_reserved_bytes = std::max(c.peak_reserved_bytes, r.summary.peak_reserved_bytes);
    c.peak_allocated_bytes = std::max(c.peak_allocated_bytes, r.summary.peak_allocated_bytes);
  }
  if (device_bytes > 0 && c.peak_reserved_bytes >= 0)
    c.headroom = 1.0 - static_cast<double>(c.peak_reserved_bytes) / static_cast<double>(device_bytes);
  const std::string why = why_not_compared(c.column);
  if (!why.empty() || c.column.median_ms <= 0) {
    c.note = why.empty() ? "no step time measured" : why;
    return false;
  }
  const double e = static_cast<double>(c.schedule.effective_batch());
  c.ms_per_example = c.column.median_ms / e;
  c.spread_lo_ms_per_example = c.column.spread_lo_ms / e;
  c.spread_hi_ms_per_example = c.column.spread_hi_ms / e;
  c.examples_per_s = 1000.0 / c.ms_per_example;
  return true;
}

/// The recommendation from the ranked candidates (ranked.front() the fastest).
inline sweep_recommendation recommend(const std::vector<const sweep_candidate*>& ranked, double min_headroom) {
  sweep_recommendation rec;
  if (ranked.empty()) return rec;
  const auto& best = *ranked.front();
  const bool one_batch = std::all_of(ranked.begin(), ranked.end(), [&](const sweep_candidate* c) {
    return c->schedule.effective_batch() == best.schedule.effective_batch();
  });
  const sweep_candidate* pick = &best;
  const sweep_candidate* other = ranked.size() > 1 ? ranked[1] : nullptr;
  if (!other) {
    rec.confidence = sweep_confidence::only_candidate;
    rec.reason = best.name() + " is the only candidate measured: " + speed_text(best) + ".";
  } else {
    std::vector<const sweep_candidate*> tied{&best};
    for (std::size_t i = 1; i < ranked.size(); ++i)
      if (within_spread(best, *ranked[i])) tied.push_back(ranked[i]);
    if (tied.size() == 1) {
      rec.confidence = sweep_confidence::clear;
      rec.reason = best.name() + " is the fastest: " + speed_text(best) + ", " + fixed_text(other->ratio_to_best, 2) +
                   "x faster per example than the next, " + other->name() + " (" + speed_text(*other) +
                   "), beyond the noise (" + spread_basis(best) + ": " + best.name() + " " +
                   spread_text(best, !one_batch) + ", " + other->name() + " " + spread_text(*other, !one_batch) + ").";
    } else {
      rec.confidence = sweep_confidence::tie;
      std::string names;
      for (std::size_t i = 0; i < tied.size(); ++i)
        names += (i == 0                 ? ""
                  : i + 1 == tied.size() ? " and "
                                         : ", ") +
                 tied[i]->name() + " " + spread_text(*tied[i], !one_batch);
      rec.reason =
          std::string("A tie: ") + spread_basis(best) + " overlap (" + names + "), so the difference is noise. ";
      const bool memory =
          std::all_of(tied.begin(), tied.end(), [](const sweep_candidate* c) { return c->peak_reserved_bytes >= 0; });
      if (memory) {
        pick = *std::min_element(tied.begin(), tied.end(), [](const sweep_candidate* a, const sweep_candidate* b) {
          return a->peak_reserved_bytes < b->peak_reserved_bytes;
        });
        rec.reason +=
            pick->name() + " is recommended: of these it needs the least memory (" + memory_text(*pick) + ").";
      } else {
        rec.reason += best.name() + " has the lowest median; any of them will do.";
      }
      for (const auto* t : tied)
        if (t != pick) rec.tied.push_back(t->name());
      other = pick == &best ? tied[1] : &best;
    }
  }
  rec.schedule = pick->name();
  if (rec.confidence != sweep_confidence::tie && pick->peak_reserved_bytes >= 0)
    rec.reason += " Memory: " + memory_text(*pick) + ".";
  if (pick->headroom >= 0 && pick->headroom < min_headroom) {
    rec.reason += " It leaves less than " + fixed_text(min_headroom * 100, 0) +
                  "% of the device's memory free: fragmentation, a longer sequence or another process can push it "
                  "over.";
    for (const auto* c : ranked)
      if (c->headroom >= min_headroom) {
        rec.reason +=
            " The fastest with more room is " + c->name() + " (" + speed_text(*c) + ", " + memory_text(*c) + ").";
        break;
      }
  }
  if (!one_batch)
    rec.reason +=
        " Candidates of different effective batches are ranked by time per example; a larger effective "
        "batch also makes fewer optimizer updates per example, so compare the loss as well as the speed.";
  if (other && other->schedule.effective_batch() == pick->schedule.effective_batch()) {
    // The comparison engine on the pair: why the other one is slower (or that the gap is noise).
    rec.compared_with = other->name();
    rec.explanation = compare_runs({other->column, pick->column}).explanation;
  }
  return rec;
}

}  // namespace detail

/// Ranks what a sweep measured: the figures of every candidate whose status is `measured` (from
/// its runs and r.device_memory_bytes), their ranks by time per example, the order of the list
/// (ranked first, then out of memory, failed, not measured) and the recommendation; a
/// recommendation that leaves less than `min_headroom` of the device's memory free says so.
/// run_sweep() calls it; a caller with measurements of its own may too.
inline void rank_sweep(sweep_result& r, double min_headroom = 0.10) {
  using detail::fill_figures;
  using detail::recommend;
  std::vector<sweep_candidate*> ranked;
  for (auto& c : r.candidates)
    if (c.status == sweep_status::measured && fill_figures(c, r.device_memory_bytes)) ranked.push_back(&c);
  std::stable_sort(ranked.begin(), ranked.end(), [](const sweep_candidate* a, const sweep_candidate* b) {
    return a->ms_per_example < b->ms_per_example;
  });
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    ranked[i]->rank = i + 1;
    ranked[i]->ratio_to_best = ranked[i]->ms_per_example / ranked.front()->ms_per_example;
  }
  const auto group = [](const sweep_candidate& c) {
    if (c.ranked()) return 0;
    switch (c.status) {
      case sweep_status::measured: return 1;  // measured, but no step to rank
      case sweep_status::out_of_memory: return 2;
      case sweep_status::failed: return 3;
      case sweep_status::not_measured: return 4;
    }
    return 4;
  };
  std::stable_sort(r.candidates.begin(), r.candidates.end(), [&](const sweep_candidate& a, const sweep_candidate& b) {
    if (group(a) != group(b)) return group(a) < group(b);
    return a.ranked() && a.rank < b.rank;
  });
  std::vector<const sweep_candidate*> in_order;
  for (const auto& c : r.candidates)
    if (c.ranked()) in_order.push_back(&c);
  r.recommendation = recommend(in_order, min_headroom);
  if (in_order.empty()) {
    r.recommendation.reason = "Nothing to recommend: no candidate ran to the end";
    for (const auto& c : r.candidates)
      if (!c.note.empty()) {
        r.recommendation.reason += " (" + c.name() + ": " + c.note + ")";
        break;
      }
    r.recommendation.reason += ".";
  }
}

TRACEML_END_NAMESPACE
