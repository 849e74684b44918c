// traceml: what bounds one run, judged from its summary alone (pure functions, no wording).
//
// Why: a table leaves the reading to the user; a verdict names what the numbers say (the input is
// slow, the host cannot launch fast enough, the GPU is full, the step times cannot be trusted) with
// the figures it rests on and the steps they come from. The words (evidence text, advice) are the
// sinks' (sinks/verdict_words.hpp); here only codes and figures.
//
// Every threshold is in verdict_thresholds, with the runs it was chosen from (docs/verdicts.md).
//
//   for (const auto& v : traceml::judge_run(result.summary)) ...   // code, phase, figures, steps
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/phase_kind.hpp"

TRACEML_BEGIN_NAMESPACE

enum class verdict_code {
  input_bound,     ///< the dataloader phase takes a large share of the step
  host_bound,      ///< the GPU idles inside forward/backward while short kernels are launched
  gpu_bound,       ///< the GPU is busy nearly all of the step
  small_kernels,   ///< the GPU is busy but few SMs are active: shapes that do not fill it
  residual_heavy,  ///< much of the step lies in no phase
  unstable,        ///< the step time drifts, splits in two, or spreads so widely that medians mislead
  outside_steps,   ///< much of the run's wall time lies between its steps (evaluation, checkpoints, epoch ends)
  copy_bound,      ///< host-device copies take a large share of a phase's GPU window
  memory_creep,    ///< allocated GPU memory rises along the run
};

inline const char* to_string(verdict_code c) noexcept {
  switch (c) {
    case verdict_code::input_bound: return "input_bound";
    case verdict_code::host_bound: return "host_bound";
    case verdict_code::gpu_bound: return "gpu_bound";
    case verdict_code::small_kernels: return "small_kernels";
    case verdict_code::residual_heavy: return "residual_heavy";
    case verdict_code::unstable: return "unstable";
    case verdict_code::outside_steps: return "outside_steps";
    case verdict_code::copy_bound: return "copy_bound";
    case verdict_code::memory_creep: return "memory_creep";
  }
  return "unknown";
}

/// Why `unstable` fired (several may hold; the first found is named).
enum class instability { none, drift, bimodal, spread };

/// One figure of a verdict's evidence: a name the words and the JSON use, its value (shares in
/// [0, 1], times in ms, counts as counts).
struct verdict_figure {
  std::string name;
  double value = 0;
};

struct verdict {
  verdict_code code = verdict_code::unstable;
  std::string phase;  ///< the phase it is about; empty: the whole step
  std::vector<verdict_figure> figures;
  std::size_t steps = 0;        ///< the steps the figures rest on
  const char* source = "wall";  ///< where the figures come from: "wall", "kernels", "counters", "timeline",
                                ///< "untraced" (the steps without kernel records, where some had them)
  instability why_unstable = instability::none;

  double figure(const std::string& name, double missing = -1) const {
    for (const auto& f : figures)
      if (f.name == name) return f.value;
    return missing;
  }
};

/// The thresholds, in one place. Where a run is measured, docs/verdicts.md says which runs put each
/// one where it is; change them there and here together.
struct verdict_thresholds {
  double input_share = 0.15;       ///< dataloader share of the step at or above which the run is input-bound
  double host_idle_share = 0.40;   ///< GPU idle share inside forward/backward at or above which ...
  double host_kernel_us = 10.0;    ///< ... with kernels this short on average (kernel records), the host is the bound
  double gpu_busy_share = 0.90;    ///< step's GPU busy share at or above which the run is GPU-bound
  double small_busy_share = 0.50;  ///< busy at least this much, and ...
  double small_sm_ratio = 0.50;    ///< ... SMs active under this fraction of busy: kernels too small to fill the GPU
  double residual_share = 0.20;    ///< time in no phase, share of the step
  double drift = 0.10;             ///< mean step of the run's second half against its first, either way
  double spread = 0.50;            ///< (p90 - p10) / median of the measured steps
  double bimodal_gap = 0.25;       ///< two groups of steps whose means differ by this much of the lower ...
  double bimodal_minority = 0.10;  ///< ... each holding at least this share of the steps ...
  double bimodal_separation =
      5.0;                    ///< ... and whose gap is this many times their pooled spread (uniform: 3.5, normal: 2.7)
  std::size_t min_steps = 8;  ///< fewer measured steps: no verdict on the step's shape
  double outside_share = 0.10;              ///< time between steps, share of the steps' span (first start to last end)
  double copy_share = 0.30;                 ///< copies (their union), share of a phase's GPU window: copy-bound ...
  double copy_min_window_ms = 0.1;          ///< ... for a mean GPU window at least this long (shorter: noise)
  double creep_share = 0.05;                ///< allocated memory, last quarter of the steps over the first, minus 1 ...
  double creep_bytes = 64.0 * 1024 * 1024;  ///< ... and a growth of at least this much (smaller: allocator noise)
  std::size_t creep_min_steps = 8;          ///< measured steps with a memory sample needed to judge a trend
};

namespace detail {

/// The measured steps' times along the run from the timeline (warm-up buckets left out), one value
/// per bucket weighted by its steps. `untraced`: only the untraced steps of each bucket (a step
/// with kernel records runs slower, and a run that records some steps would look unstable for it).
inline std::vector<std::pair<double, double>> measured_timeline(const run_summary& s, bool untraced) {
  std::vector<std::pair<double, double>> out;  // mean ms, steps
  for (const auto& b : s.timeline) {
    const auto end = static_cast<std::size_t>(b.first_step) + b.steps;
    if (end <= s.warmup_steps) continue;
    if (untraced && b.untraced_steps > 0) out.emplace_back(b.untraced_mean_ms, static_cast<double>(b.untraced_steps));
    if (!untraced && b.steps > 0) out.emplace_back(b.mean_ms, static_cast<double>(b.steps));
  }
  return out;
}

/// The steps the step time's shape is judged on: where some steps ran with kernel records, the
/// untraced ones, when there are at least `min_steps` of them; otherwise every measured step.
struct shape_sample {
  std::vector<std::pair<double, double>> points;  // the timeline's mean ms and steps
  double p10 = 0, median = 0, p90 = 0;
  std::size_t steps = 0;
  bool untraced = false;
};
inline shape_sample step_shape_sample(const run_summary& s, std::size_t min_steps) {
  shape_sample out;
  bool mixed = false;  // some measured bucket holds steps that are not untraced
  double untraced_steps = 0;
  for (const auto& b : s.timeline) {
    if (static_cast<std::size_t>(b.first_step) + b.steps <= s.warmup_steps) continue;
    mixed = mixed || b.untraced_steps < b.steps;
    untraced_steps += b.untraced_steps;
  }
  const bool untraced = mixed && untraced_steps >= static_cast<double>(min_steps) && s.baseline.untraced &&
                        s.baseline.steps >= min_steps && s.baseline.median_ms > 0;
  out.points = measured_timeline(s, untraced);
  out.untraced = untraced;
  if (untraced) {
    out.p10 = s.baseline.p10_ms;
    out.median = s.baseline.median_ms;
    out.p90 = s.baseline.p90_ms;
    out.steps = s.baseline.steps;
  } else {
    out.p10 = s.step_ms.p10;
    out.median = s.step_ms.median;
    out.p90 = s.step_ms.p90;
    out.steps = s.step_ms.count;
  }
  return out;
}

/// Second half's mean step over the first half's, from the timeline (0: not enough points).
inline double half_ratio(const std::vector<std::pair<double, double>>& pts) {
  double total = 0;
  for (const auto& p : pts) total += p.second;
  if (pts.size() < 4 || total <= 0) return 0;
  double seen = 0, first = 0, first_n = 0, second = 0, second_n = 0;
  for (const auto& p : pts) {
    if (seen + p.second / 2 < total / 2) {
      first += p.first * p.second;
      first_n += p.second;
    } else {
      second += p.first * p.second;
      second_n += p.second;
    }
    seen += p.second;
  }
  if (first_n <= 0 || second_n <= 0 || first <= 0) return 0;
  return (second / second_n) / (first / first_n);
}

/// Two groups of step times: the split of the sorted points that best separates them. Returns
/// {lower mean, upper mean, minority share, gap / pooled spread}; all 0 when no split exists.
struct two_groups {
  double low = 0, high = 0, minority = 0, separation = 0;
};
inline two_groups best_split(std::vector<std::pair<double, double>> pts) {
  two_groups best;
  if (pts.size() < 4) return best;
  std::sort(pts.begin(), pts.end());
  double total = 0;
  for (const auto& p : pts) total += p.second;
  for (std::size_t cut = 1; cut < pts.size(); ++cut) {
    double n[2] = {0, 0}, sum[2] = {0, 0};
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const int g = i < cut ? 0 : 1;
      n[g] += pts[i].second;
      sum[g] += pts[i].first * pts[i].second;
    }
    const double m0 = sum[0] / n[0], m1 = sum[1] / n[1];
    double ss = 0;
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const double d = pts[i].first - (i < cut ? m0 : m1);
      ss += d * d * pts[i].second;
    }
    const double pooled = std::sqrt(ss / total);
    const double separation = pooled > 0 ? (m1 - m0) / pooled : (m1 > m0 ? 1e9 : 0);
    if (separation > best.separation) best = two_groups{m0, m1, std::min(n[0], n[1]) / total, separation};
  }
  return best;
}

/// Allocated memory over the measured steps from the timeline (warm-up buckets left out, buckets
/// without a memory sample too): {mean bytes, steps with a sample} per bucket.
inline std::vector<std::pair<double, double>> measured_memory(const run_summary& s) {
  std::vector<std::pair<double, double>> out;
  for (const auto& b : s.timeline) {
    const auto end = static_cast<std::size_t>(b.first_step) + b.steps;
    if (end <= s.warmup_steps || b.memory_steps == 0 || b.allocated_bytes < 0) continue;
    out.emplace_back(b.allocated_bytes, static_cast<double>(b.memory_steps));
  }
  return out;
}

/// The weighted mean of the first (`from_end` false) or last quarter of the points' weight; a bucket
/// across the quarter's edge counts with the part of its weight inside.
inline double quarter_mean(const std::vector<std::pair<double, double>>& pts, bool from_end) {
  double total = 0;
  for (const auto& p : pts) total += p.second;
  const double quarter = total / 4;
  double taken = 0, sum = 0;
  for (std::size_t i = 0; i < pts.size() && taken < quarter; ++i) {
    const auto& p = pts[from_end ? pts.size() - 1 - i : i];
    const double w = std::min(p.second, quarter - taken);
    sum += p.first * w;
    taken += w;
  }
  return taken > 0 ? sum / taken : 0;
}

}  // namespace detail

namespace detail {

// One function per verdict (or family), each appending what fires to `out`; judge_run calls them in
// the verdicts' fixed order. `measured` is the run's measured steps.

/// input_bound: the dataloader phases' share of the step (they may be several: fetch, copy).
inline void judge_input(const run_summary& s, const verdict_thresholds& t, std::vector<verdict>& out) {
  double input_share = 0, input_ms = 0;
  for (const auto& p : s.phases)
    if (p.kind == phase_kind::dataloader && p.top_level) {
      input_share += p.share;
      input_ms += p.wall_ms.mean;
    }
  if (input_share >= t.input_share)
    out.push_back(verdict{verdict_code::input_bound,
                          "",
                          {{"share", std::min(input_share, 1.0)}, {"ms_per_step", input_ms}},
                          s.step_ms.count});
}

/// host_bound: forward/backward with the GPU idle most of their window, launching short kernels.
/// Kernel records say both; counters alone say the idle share (kernel length then unknown).
inline void judge_host(const run_summary& s, const verdict_thresholds& t, std::vector<verdict>& out) {
  for (const auto& p : s.phases) {
    if (!is_forward_backward(p.kind)) continue;
    if (p.kernels && p.kernels->steps > 0 && p.kernels->idle_share >= t.host_idle_share &&
        p.kernels->mean_kernel_us > 0 && p.kernels->mean_kernel_us < t.host_kernel_us) {
      out.push_back(verdict{verdict_code::host_bound,
                            p.name,
                            {{"idle_share", p.kernels->idle_share},
                             {"mean_kernel_us", p.kernels->mean_kernel_us},
                             {"kernels_per_step", p.kernels->kernels_per_step}},
                            p.kernels->steps,
                            "kernels"});
    } else if (!p.kernels && p.counters && p.counters->steps > 0 && 1.0 - p.counters->busy_share >= t.host_idle_share) {
      out.push_back(verdict{verdict_code::host_bound,
                            p.name,
                            {{"idle_share", 1.0 - p.counters->busy_share}},
                            p.counters->steps,
                            "counters"});
    }
  }
}

/// gpu_bound: the whole step window busy; counters (every step) before kernel records (some).
inline void judge_gpu(const run_summary& s, const verdict_thresholds& t, std::vector<verdict>& out) {
  if (s.step_counters && s.step_counters->steps > 0) {
    if (s.step_counters->busy_share >= t.gpu_busy_share)
      out.push_back(verdict{verdict_code::gpu_bound,
                            "",
                            {{"busy_share", s.step_counters->busy_share}},
                            s.step_counters->steps,
                            "counters"});
  } else if (s.step_kernels && s.step_kernels->steps > 0 && s.step_kernels->busy_share >= t.gpu_busy_share) {
    out.push_back(verdict{
        verdict_code::gpu_bound, "", {{"busy_share", s.step_kernels->busy_share}}, s.step_kernels->steps, "kernels"});
  }
}

/// small_kernels: busy, yet the SMs mostly idle (counters only: records cannot see SM occupancy).
inline void judge_small_kernels(const run_summary& s, const verdict_thresholds& t, std::vector<verdict>& out) {
  for (const auto& p : s.phases) {
    if (!is_forward_backward(p.kind) || !p.counters || p.counters->steps == 0) continue;
    const auto& c = *p.counters;
    if (c.busy_share >= t.small_busy_share && c.sm_active_share < t.small_sm_ratio * c.busy_share)
      out.push_back(verdict{verdict_code::small_kernels,
                            p.name,
                            {{"busy_share", c.busy_share}, {"sm_active_share", c.sm_active_share}},
                            c.steps,
                            "counters"});
  }
}

/// residual_heavy: time on the step's thread inside no top-level phase.
inline void judge_residual(const run_summary& s, const verdict_thresholds& t, std::vector<verdict>& out) {
  const double residual_share = s.residual_ms.mean / s.step_ms.mean;
  if (residual_share >= t.residual_share)
    out.push_back(verdict{verdict_code::residual_heavy,
                          "",
                          {{"share", std::min(residual_share, 1.0)}, {"ms_per_step", s.residual_ms.mean}},
                          s.step_ms.count});
}

/// unstable: drift between halves, two groups of step times, or a spread that makes medians mislead.
/// Judged on untraced steps where some were recorded: recording slows the steps it covers.
inline void judge_stability(const run_summary& s, const verdict_thresholds& t, std::vector<verdict>& out) {
  if (s.step_ms.count < t.min_steps) return;
  const auto sample = step_shape_sample(s, t.min_steps);
  const auto& pts = sample.points;
  const double halves = half_ratio(pts);
  const auto groups = best_split(pts);
  const double spread = sample.median > 0 ? (sample.p90 - sample.p10) / sample.median : 0;
  verdict v{verdict_code::unstable, "", {}, sample.steps, sample.untraced ? "untraced" : "timeline"};
  if (halves > 0 && std::abs(halves - 1.0) >= t.drift) {
    v.why_unstable = instability::drift;
    v.figures = {{"second_half_over_first", halves}};
  } else if (groups.low > 0 && groups.high >= groups.low * (1.0 + t.bimodal_gap) &&
             groups.minority >= t.bimodal_minority && groups.separation >= t.bimodal_separation) {
    v.why_unstable = instability::bimodal;
    v.figures = {{"low_ms", groups.low}, {"high_ms", groups.high}, {"minority_share", groups.minority}};
  } else if (spread >= t.spread) {
    v.why_unstable = instability::spread;
    v.figures = {{"p10_ms", sample.p10}, {"median_ms", sample.median}, {"p90_ms", sample.p90}};
    if (!sample.untraced) v.source = "wall";
  }
  if (v.why_unstable != instability::none) out.push_back(std::move(v));
}

/// outside_steps: the time between steps (an evaluation pass, a checkpoint, an epoch's end) is a
/// large part of the run, which no step figure shows. Every step counts (the gaps of warm-up too).
inline void judge_outside(const run_summary& s, const verdict_thresholds& t, std::vector<verdict>& out) {
  const auto& o = s.outside_steps;
  if (o.gaps.count > 0 && o.steps_span_ms > 0 && o.gap_share >= t.outside_share)
    out.push_back(verdict{verdict_code::outside_steps,
                          "",
                          {{"gap_share", std::min(o.gap_share, 1.0)},
                           {"gaps_ms", o.gaps.total_ms},
                           {"gaps", static_cast<double>(o.gaps.count)},
                           {"largest_ms", o.gaps.largest_ms},
                           {"largest_after_step", static_cast<double>(o.gaps.largest_after_step)},
                           {"epoch_gaps_ms", o.epoch_gaps.total_ms},
                           {"epoch_gaps", static_cast<double>(o.epoch_gaps.count)},
                           {"outside_phases_ms", o.phases_ms},
                           {"span_ms", o.steps_span_ms}},
                          s.steps});
}

/// copy_bound: copies fill a phase's GPU window (kernel records: the union of its copies inside it).
inline void judge_copies(const run_summary& s, const verdict_thresholds& t, std::vector<verdict>& out) {
  for (const auto& p : s.phases) {
    if (!p.kernels || p.kernels->steps == 0 || p.kernels->window_ms.mean < t.copy_min_window_ms) continue;
    if (p.kernels->copy_share >= t.copy_share)
      out.push_back(verdict{verdict_code::copy_bound,
                            p.name,
                            {{"copy_share", p.kernels->copy_share},
                             {"copy_ms_per_step", p.kernels->copy_ms},
                             {"window_ms", p.kernels->window_ms.mean}},
                            p.kernels->steps,
                            "kernels"});
  }
}

/// memory_creep: allocated memory of the last quarter of the measured steps against the first's.
inline void judge_memory(const run_summary& s, const verdict_thresholds& t, std::vector<verdict>& out) {
  const auto memory = measured_memory(s);
  double memory_steps = 0;
  for (const auto& m : memory) memory_steps += m.second;
  if (memory_steps < static_cast<double>(t.creep_min_steps)) return;
  const double first = quarter_mean(memory, false), last = quarter_mean(memory, true);
  const double growth = last - first;
  if (first > 0 && growth >= t.creep_bytes && growth >= t.creep_share * first)
    out.push_back(verdict{verdict_code::memory_creep,
                          "",
                          {{"first_quarter_mib", first / (1024.0 * 1024.0)},
                           {"last_quarter_mib", last / (1024.0 * 1024.0)},
                           {"growth_share", growth / first}},
                          static_cast<std::size_t>(memory_steps),
                          "timeline"});
}

}  // namespace detail

/// The verdicts of one run, in a fixed order (input, host, GPU, kernels, residual, stability, time
/// outside steps, copies, memory). A run without GPU figures gets only the CPU ones; a figure that was
/// not measured never fires a verdict.
inline std::vector<verdict> judge_run(const run_summary& s, const verdict_thresholds& t = {}) {
  std::vector<verdict> out;
  if (s.step_ms.count == 0 || s.step_ms.mean <= 0) return out;
  for (const auto judge :
       {detail::judge_input, detail::judge_host, detail::judge_gpu, detail::judge_small_kernels, detail::judge_residual,
        detail::judge_stability, detail::judge_outside, detail::judge_copies, detail::judge_memory})
    judge(s, t, out);
  return out;
}

/// Whether a run is unstable by its verdicts (the comparison's explanation says so before it splits a gap).
inline bool is_unstable(const std::vector<verdict>& vs) {
  return std::any_of(vs.begin(), vs.end(), [](const verdict& v) { return v.code == verdict_code::unstable; });
}

TRACEML_END_NAMESPACE
