// traceml: comparing runs. One column per run (or per configuration run several times), ranked by
// median step time, and the explanation of the difference between the slowest and the fastest.
// Works for any runs: with or without GPU data, with different or user-defined phases; a run
// without measured steps is named rather than compared.
//
//   auto c = traceml::compare_runs({traceml::make_compared_run("1x4", {run_a}),
//                                   traceml::make_compared_run("4x1", {run_b})});
//   std::puts(c.explanation.c_str());
//
// The explanation splits the step-time gap between the slowest and the fastest column into:
//   - GPU idle inside forward/backward: the GPU waited for the CPU (more, smaller launches);
//   - GPU busy inside forward/backward: the same work took longer on the GPU (shape/tiling efficiency);
//   - the optimizer: a fixed per-step cost that should not depend on the schedule;
//   - the rest: data loading, user phases and host time outside those GPU windows.
// It uses each run's baseline steps (no kernel records on them, nor on the step before), so the
// profiler's recording cost is in none of the parts: forward/backward and optimizer GPU windows and
// step time from those steps (CUDA events), busy time from hardware counters on those same steps
// where both runs have them, else from the recorded steps (kernel durations do not change when
// CUPTI's host-side cost is added), idle = window - busy. The parts add up to the gap
// exactly, whatever number of steps was recorded. A gap inside the runs' noise (their p10..p90
// step-time ranges overlap, or with repeats the ranges of their medians), or a run whose step time is
// unstable (analysis/verdicts.hpp: drift, two groups, a wide spread), is said to be so first, before
// the split, which may then be noise rather than a difference. Every number comes from the run
// summaries; this header picks, subtracts and words: the
// explanation is part of a comparison (comparison::explanation, which the sweep's recommendation
// quotes), so it is built here, its numbers formatted by detail/format.hpp; the sinks
// (comparison_table.hpp, comparison_json.hpp) only lay the comparison out.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "traceml/analysis/summary.hpp"
#include "traceml/analysis/verdicts.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/format.hpp"
#include "traceml/gpu/gpu_facts.hpp"

TRACEML_BEGIN_NAMESPACE

/// One top-level phase of a compared run: means per step over the run's measured steps, kernel
/// figures over its recorded steps, and the baseline means the explanation subtracts.
struct compared_phase {
  phase_kind kind = phase_kind::user;
  std::string name;
  double wall_ms = 0;               ///< mean over the measured steps
  std::optional<double> gpu_ms;     ///< GPU time between the phase's boundaries (mean), where measured
  std::optional<double> kernel_ms;  ///< recorded steps only, like busy_ms and window_ms
  std::optional<double> busy_ms;
  std::optional<double> window_ms;
  /// Hardware counters over the run's sampled steps (means): GPU busy inside the phase's window, and
  /// the shares of that window the engine was busy and the SMs were active.
  std::optional<double> counter_busy_ms;
  double counter_busy_share = -1, sm_active_share = -1;
  phase_baseline baseline;
};

/// One column of a comparison: a run, or the repeats of one configuration (all times per step).
struct compared_run {
  std::string name;
  std::size_t repeats = 0;
  std::size_t steps = 0;  ///< every step of every repeat, warm-up included
  double total_s = 0;     ///< their wall time
  double steps_per_s = 0;
  double median_ms = 0;  ///< median step (with repeats: the median of the runs' medians)
  /// The run's noise: p10..p90 of step time within the run, or with repeats min..max of their medians.
  double spread_lo_ms = 0, spread_hi_ms = 0;
  std::size_t measured_steps = 0;      ///< steps after warm-up of the representative run
  std::vector<compared_phase> phases;  ///< top-level phases, in the loop's order
  std::size_t gpu_steps = 0;           ///< steps the phases' gpu_ms rest on
  double residual_ms = 0;
  // Kernel figures: recorded steps only (`recorded_steps` of them), per recorded step.
  std::size_t recorded_steps = 0;     ///< 0: no kernel records
  double kernels_per_step = 0;        ///< launches in top-level phases
  double kernels_per_microbatch = 0;  ///< forward + backward launches of one micro-batch
  double fb_kernels_per_step = 0;     ///< forward + backward launches of one step
  double fb_kernel_ms = 0;            ///< forward + backward kernel time of one step
  double fb_idle_pct = 0;             ///< GPU idle share of the forward+backward GPU windows
  /// Every forward+backward kernel, merged over phases and recorded steps first, then sorted.
  std::vector<kernel_figure> fb_kernels;
  /// False when the run's steps were not kept: fb_kernels then merges each phase's top list, and a
  /// kernel missing from one of them is missing from the sum.
  bool fb_kernels_complete = true;
  // Hardware-counter figures: sampled steps only (`sampled_steps` of them; normally every measured step).
  std::size_t sampled_steps = 0;         ///< 0: no hardware counters
  double fb_counter_busy_pct = -1;       ///< GPU busy share of the forward+backward windows
  double fb_sm_active_pct = -1;          ///< SMs active, share of the forward+backward windows
  std::optional<double> recording_cost;  ///< recording_summary::cost of the representative run
  baseline_means baseline;
  std::int64_t peak_allocated_bytes = -1;
  double tokens_per_s = 0;
  double ratio_to_fastest = 0;  ///< median step / the fastest column's; 0 without measured steps
  /// The `unstable` verdict (analysis/verdicts.hpp) of the first repeat that has one: its step time
  /// drifts, falls into two groups or spreads widely, so its means and median may not hold for
  /// another run; the explanation says so before it splits a gap.
  std::optional<verdict> unstable;

  bool kernels() const noexcept { return recorded_steps > 0; }
  bool counters() const noexcept { return sampled_steps > 0; }
  const compared_phase* find(const std::string& phase) const {
    for (const auto& p : phases)
      if (p.name == phase) return &p;
    return nullptr;
  }
};

namespace detail {
/// Figures per step back to totals over `steps` steps, so that a list can go through merge_kernels.
inline std::vector<kernel_stat> kernel_totals(const std::vector<kernel_figure>& figures, std::size_t steps) {
  std::vector<kernel_stat> out;
  for (const auto& f : figures)
    out.push_back({f.name, f.launches, std::llround(f.ms_per_step * 1e6 * static_cast<double>(steps))});
  return out;
}

/// Every forward+backward kernel of a run's recorded steps, merged by name first and only then
/// sorted: from the kept steps (each phase's full list) when the run kept them, otherwise from each
/// phase's top list (`complete` false).
inline std::vector<kernel_figure> forward_backward_kernels(const run_result& run, bool& complete) {
  const auto& s = run.summary;
  std::vector<kernel_stat> merged;
  complete = run.steps.size() == s.steps;
  std::size_t recorded = 0;
  if (complete) {
    for (std::size_t i = s.warmup_steps; i < run.steps.size(); ++i) {
      const auto& g = run.steps[i].gpu;
      if (!g || !g->kernels_measured) continue;
      ++recorded;
      for (const auto& p : g->phases)
        if (is_forward_backward(p.kind)) merge_kernels(merged, p.kernels);
    }
  } else {
    for (const auto& p : s.phases)
      if (p.top_level && p.kernels && is_forward_backward(p.kind)) {
        recorded = p.kernels->steps;
        merge_kernels(merged, kernel_totals(p.kernels->top_kernels, p.kernels->steps));
      }
  }
  const std::size_t all = merged.size();  // every kernel: the comparison truncates after comparing
  return top_kernel_figures(std::move(merged), recorded, all);
}

/// The phase columns and kernel figures of a column, from its representative run.
inline void fill_phases(compared_run& c, const run_result& run) {
  const auto& s = run.summary;
  double fb_idle = 0, fb_window = 0, fb_counter_window = 0, fb_counter_busy = 0, fb_sm = 0;
  for (const auto& p : s.phases) {
    if (!p.top_level) continue;
    compared_phase cp;
    cp.kind = p.kind;
    cp.name = p.name;
    cp.wall_ms = p.wall_ms.mean;
    cp.baseline = p.baseline;
    if (p.gpu_ms) {
      cp.gpu_ms = p.gpu_ms->mean;
      c.gpu_steps = std::max(c.gpu_steps, p.gpu_ms->count);
    }
    if (p.kernels) {
      const auto& k = *p.kernels;
      cp.kernel_ms = k.kernel_ms.mean;
      cp.busy_ms = k.busy_ms.mean;
      cp.window_ms = k.window_ms.mean;
      c.recorded_steps = k.steps;
      c.kernels_per_step += k.kernels_per_step;
      if (is_forward_backward(p.kind)) {
        c.fb_kernels_per_step += k.kernels_per_step;
        c.kernels_per_microbatch += k.kernels_per_microbatch;
        c.fb_kernel_ms += k.kernel_ms.mean;
        fb_idle += k.idle_ms.mean;
        fb_window += k.window_ms.mean;
      }
    }
    if (p.counters) {
      const auto& k = *p.counters;
      cp.counter_busy_ms = k.busy_ms.mean;
      cp.counter_busy_share = k.busy_share;
      cp.sm_active_share = k.sm_active_share;
      c.sampled_steps = std::max(c.sampled_steps, k.steps);
      if (is_forward_backward(p.kind)) {
        fb_counter_window += k.window_ms.mean;
        fb_counter_busy += k.busy_ms.mean;
        fb_sm += k.sm_active_share * k.window_ms.mean;
      }
    }
    c.phases.push_back(std::move(cp));
  }
  // Both over the same recorded steps and windows: a share in [0, 100].
  if (fb_window > 0) c.fb_idle_pct = 100.0 * fb_idle / fb_window;
  // Over the same sampled steps and windows: shares in [0, 100].
  if (fb_counter_window > 0) {
    c.fb_counter_busy_pct = std::clamp(100.0 * fb_counter_busy / fb_counter_window, 0.0, 100.0);
    c.fb_sm_active_pct = std::clamp(100.0 * fb_sm / fb_counter_window, 0.0, 100.0);
  }
  if (c.recorded_steps) c.fb_kernels = forward_backward_kernels(run, c.fb_kernels_complete);
}
}  // namespace detail

/// A column from the runs of one configuration (one per repeat; one run is the usual case). The
/// representative run, the one with the median median step, fills the per-phase columns.
inline compared_run make_compared_run(const std::string& name, const std::vector<run_result>& repeats) {
  compared_run c;
  c.name = name;
  c.repeats = repeats.size();
  if (repeats.empty()) return c;
  std::vector<std::pair<double, std::size_t>> medians;
  for (std::size_t i = 0; i < repeats.size(); ++i) {
    medians.push_back({repeats[i].summary.step_ms.median, i});
    c.total_s += repeats[i].summary.total_wall_ms / 1e3;
    c.steps += repeats[i].summary.steps;
  }
  std::sort(medians.begin(), medians.end());
  const auto& rep = repeats[medians[medians.size() / 2].second];
  const auto& s = rep.summary;
  c.median_ms = medians[medians.size() / 2].first;
  if (repeats.size() > 1) {
    c.spread_lo_ms = medians.front().first;
    c.spread_hi_ms = medians.back().first;
  } else {
    c.spread_lo_ms = s.step_ms.p10;
    c.spread_hi_ms = s.step_ms.p90;
  }
  c.steps_per_s = c.total_s > 0 ? static_cast<double>(c.steps) / c.total_s : 0;
  c.measured_steps = s.measured_steps();
  c.residual_ms = s.residual_ms.mean;
  c.tokens_per_s = s.tokens_per_s;
  c.peak_allocated_bytes = s.peak_allocated_bytes;
  c.baseline = s.baseline;
  c.recording_cost = s.recording.cost;
  for (const auto& r : repeats) {
    for (auto& v : judge_run(r.summary))
      if (v.code == verdict_code::unstable) c.unstable = std::move(v);
    if (c.unstable) break;
  }
  detail::fill_phases(c, rep);
  return c;
}

/// Whether the difference between two columns is within their noise.
struct noise_check {
  bool within = false;
  bool repeats = false;  ///< ranges of repeat medians (true) or p10..p90 of step time within each run
  double slow_lo_ms = 0, slow_hi_ms = 0, fast_lo_ms = 0, fast_hi_ms = 0;
  double median_gap_ms = 0;   ///< slow median - fast median
  double median_gap_pct = 0;  ///< of the fast median
};

/// The gap between the slowest and the fastest column, split into its parts (ms per step, means over
/// each run's baseline steps; busy from its recorded steps).
struct gap_breakdown {
  std::string slow, fast;
  std::size_t slow_steps = 0, fast_steps = 0;        ///< baseline steps of each
  std::size_t slow_recorded = 0, fast_recorded = 0;  ///< recorded steps busy time comes from
  bool untraced = true;                              ///< both baselines are steps without kernel records
  double gap_ms = 0;                                 ///< slow - fast baseline mean step
  bool forward_backward = false;                     ///< both runs have forward or backward phases
  double fb_window_ms = 0;  ///< forward+backward GPU window difference (= idle + busy with kernel facts)
  double fb_idle_ms = 0;    ///< more GPU idle time inside forward/backward
  double fb_busy_ms = 0;    ///< more GPU busy time inside forward/backward
  double optimizer_ms = 0;  ///< fixed per-step cost difference (its GPU window where measured)
  double other_ms = 0;      ///< data loading, user phases, host time outside those GPU windows
  bool gpu = false;         ///< busy/idle known (hardware counters or kernel records in both runs)
  /// Where busy time came from: hardware counters on the very baseline steps the windows are from
  /// (preferred: one sample set for window, busy and idle), else the kernel records of the recorded steps.
  enum class busy_source { none, hardware_counters, kernel_records } busy_from = busy_source::none;
  double slow_sm_active_pct = -1, fast_sm_active_pct = -1;     ///< SMs active in the fwd+bwd windows (counters)
  std::size_t slow_counter_steps = 0, fast_counter_steps = 0;  ///< sampled baseline steps the busy shares rest on
  bool gpu_windows = false;  ///< forward/backward windows are GPU-side (events), not wall time
  double kernel_ratio = 0;   ///< kernels per step, slow / fast
  double slow_mean_kernel_us = 0, fast_mean_kernel_us = 0;  ///< mean forward+backward kernel duration
  struct kernel_delta {
    std::string name;
    double slow_ms = 0, fast_ms = 0, slow_count = 0, fast_count = 0;  ///< per recorded step
  };
  std::vector<kernel_delta> kernels;  ///< the 5 largest per-step differences, largest first
  bool kernels_complete = true;       ///< both runs' forward+backward lists are complete
  noise_check noise;
  /// The `unstable` verdicts of the two columns (compared_run::unstable), said before the split.
  std::optional<verdict> slow_unstable, fast_unstable;
};

/// The columns ranked (ratio_to_fastest filled), the breakdown of the gap, and the words.
struct comparison {
  std::vector<compared_run> runs;
  std::optional<gap_breakdown> gap;  ///< nullopt: fewer than two columns with measured steps
  std::string explanation;           ///< the explanation, or why there is none
};

namespace detail {
/// The phase's GPU window on the baseline steps (events), else its wall time there; summed over kinds.
inline double baseline_window(const compared_run& c, bool (*of_kind)(phase_kind)) {
  double sum = 0;
  for (const auto& p : c.phases)
    if (of_kind(p.kind)) sum += p.baseline.gpu_ms >= 0 ? p.baseline.gpu_ms : p.baseline.wall_ms;
  return sum;
}
inline bool is_optimizer(phase_kind k) noexcept { return k == phase_kind::optimizer; }
/// Every phase of these kinds has a GPU window on every baseline step (and there is one).
inline bool baseline_gpu(const compared_run& c, bool (*of_kind)(phase_kind)) {
  bool any = false;
  for (const auto& p : c.phases)
    if (of_kind(p.kind)) {
      if (p.baseline.gpu_ms < 0) return false;
      any = true;
    }
  return any;
}
inline bool has_forward_backward(const compared_run& c) {
  return std::any_of(c.phases.begin(), c.phases.end(),
                     [](const compared_phase& p) { return is_forward_backward(p.kind); });
}
inline double fb_busy(const compared_run& c) {
  double sum = 0;
  for (const auto& p : c.phases)
    if (is_forward_backward(p.kind) && p.busy_ms) sum += *p.busy_ms;
  return sum;
}
/// Forward+backward busy from hardware counters on the baseline steps (each phase's sampled busy
/// share of its baseline GPU window); nullopt unless every such phase has both. `steps`: the fewest
/// sampled baseline steps a phase's share rests on.
inline std::optional<double> fb_counter_busy_on_baseline(const compared_run& c, std::size_t& steps) {
  double sum = 0;
  bool any = false;
  for (const auto& p : c.phases)
    if (is_forward_backward(p.kind)) {
      if (p.baseline.counter_busy_ms < 0 || p.baseline.gpu_ms < 0) return std::nullopt;
      sum += p.baseline.counter_busy_ms;
      steps = any ? std::min(steps, p.baseline.counter_steps) : p.baseline.counter_steps;
      any = true;
    }
  return any ? std::optional<double>(sum) : std::nullopt;
}

inline void kernel_deltas(gap_breakdown& g, const compared_run& slow, const compared_run& fast) {
  std::vector<gap_breakdown::kernel_delta> deltas;
  const auto add = [&](const std::vector<kernel_figure>& ks, bool is_slow) {
    for (const auto& k : ks) {
      auto it = std::find_if(deltas.begin(), deltas.end(), [&](const auto& d) { return d.name == k.name; });
      if (it == deltas.end()) it = deltas.insert(deltas.end(), gap_breakdown::kernel_delta{k.name});
      (is_slow ? it->slow_ms : it->fast_ms) += k.ms_per_step;
      (is_slow ? it->slow_count : it->fast_count) += k.launches_per_step;
    }
  };
  add(slow.fb_kernels, true);
  add(fast.fb_kernels, false);
  std::sort(deltas.begin(), deltas.end(), [](const auto& a, const auto& b) {
    const double da = std::fabs(a.slow_ms - a.fast_ms), db = std::fabs(b.slow_ms - b.fast_ms);
    return da != db ? da > db : a.name < b.name;
  });
  if (deltas.size() > 5) deltas.resize(5);  // merged and sorted first, truncated last
  g.kernels = std::move(deltas);
  g.kernels_complete = slow.fb_kernels_complete && fast.fb_kernels_complete;
}

/// Overlapping noise ranges: the runs cannot be told apart by their step times.
inline noise_check check_noise(const compared_run& slow, const compared_run& fast) {
  noise_check n;
  n.repeats = slow.repeats > 1 && fast.repeats > 1;
  n.slow_lo_ms = slow.spread_lo_ms;
  n.slow_hi_ms = slow.spread_hi_ms;
  n.fast_lo_ms = fast.spread_lo_ms;
  n.fast_hi_ms = fast.spread_hi_ms;
  n.median_gap_ms = slow.median_ms - fast.median_ms;
  n.median_gap_pct = fast.median_ms > 0 ? 100.0 * n.median_gap_ms / fast.median_ms : 0;
  n.within = slow.spread_lo_ms <= fast.spread_hi_ms && fast.spread_lo_ms <= slow.spread_hi_ms;
  return n;
}

/// The gap between two columns; both have measured steps.
inline gap_breakdown break_down_gap(const compared_run& slow, const compared_run& fast) {
  gap_breakdown g;
  g.slow = slow.name;
  g.fast = fast.name;
  g.slow_steps = slow.baseline.steps;
  g.fast_steps = fast.baseline.steps;
  g.untraced = slow.baseline.untraced && fast.baseline.untraced;
  g.noise = check_noise(slow, fast);
  g.slow_unstable = slow.unstable;
  g.fast_unstable = fast.unstable;
  // Means decompose exactly; every part below is a mean over the same baseline steps of each run.
  g.gap_ms = slow.baseline.step_ms - fast.baseline.step_ms;
  g.forward_backward = has_forward_backward(slow) && has_forward_backward(fast);
  g.gpu_windows = baseline_gpu(slow, is_forward_backward) && baseline_gpu(fast, is_forward_backward);
  g.fb_window_ms = baseline_window(slow, is_forward_backward) - baseline_window(fast, is_forward_backward);
  g.optimizer_ms = baseline_window(slow, is_optimizer) - baseline_window(fast, is_optimizer);
  g.other_ms = g.gap_ms - g.fb_window_ms - g.optimizer_ms;
  const auto slow_counters = fb_counter_busy_on_baseline(slow, g.slow_counter_steps);
  const auto fast_counters = fb_counter_busy_on_baseline(fast, g.fast_counter_steps);
  const bool counters = g.forward_backward && slow_counters && fast_counters;
  const bool records = slow.kernels() && fast.kernels() && g.forward_backward;
  g.gpu = counters || records;
  if (!g.gpu) return g;
  g.slow_recorded = slow.recorded_steps;
  g.fast_recorded = fast.recorded_steps;
  g.slow_sm_active_pct = slow.fb_sm_active_pct;
  g.fast_sm_active_pct = fast.fb_sm_active_pct;
  if (counters) {
    // Busy from the counters of the baseline steps themselves: window, busy and idle of one sample set.
    g.busy_from = gap_breakdown::busy_source::hardware_counters;
    g.fb_busy_ms = *slow_counters - *fast_counters;
  } else {
    // Busy time from the recorded steps (the GPU's own durations: recording's host-side cost does not
    // change them).
    g.busy_from = gap_breakdown::busy_source::kernel_records;
    g.fb_busy_ms = fb_busy(slow) - fb_busy(fast);
  }
  // Idle is the rest of the baseline window, so idle + busy = the window difference.
  g.fb_idle_ms = g.fb_window_ms - g.fb_busy_ms;
  if (!records) return g;
  g.kernel_ratio = fast.kernels_per_step > 0 ? slow.kernels_per_step / fast.kernels_per_step : 0;
  const auto mean_kernel_us = [](const compared_run& r) {
    return r.fb_kernels_per_step > 0 ? r.fb_kernel_ms * 1e3 / r.fb_kernels_per_step : 0;
  };
  g.slow_mean_kernel_us = mean_kernel_us(slow);
  g.fast_mean_kernel_us = mean_kernel_us(fast);
  kernel_deltas(g, slow, fast);
  return g;
}

inline std::string signed_ms(double v) { return (v >= 0 ? "+" : "") + fixed_text(v, 1) + " ms"; }
}  // namespace detail

namespace detail {
/// Why a run's step time is unstable, in words, with the figures of its verdict.
inline std::string instability_text(const std::string& name, const verdict& v) {
  switch (v.why_unstable) {
    case instability::drift:
      return name + "'s step time drifts (the second half's mean step is " +
             fixed_text(v.figure("second_half_over_first"), 2) + "x the first half's)";
    case instability::bimodal:
      return name + "'s steps fall into two groups (" + fixed_text(v.figure("low_ms"), 1) + " and " +
             fixed_text(v.figure("high_ms"), 1) + " ms, the smaller one " +
             fixed_text(100 * v.figure("minority_share"), 0) + "% of the steps)";
    case instability::spread:
      return name + "'s step times spread widely (p10..p90 " + fixed_text(v.figure("p10_ms"), 1) + ".." +
             fixed_text(v.figure("p90_ms"), 1) + " ms around a median of " + fixed_text(v.figure("median_ms"), 1) +
             " ms)";
    case instability::none: break;
  }
  return name + " is unstable";
}
}  // namespace detail

/// The plain-language explanation of a gap, every number taken from the measurements. When the gap
/// is within the runs' noise or a run is unstable, a line says so first: the split that follows is
/// still given (its parts add up to the gap whatever the noise), but may be noise, not a difference.
inline std::string explain(const gap_breakdown& g) {
  using detail::fixed_text;
  using detail::signed_ms;
  const auto& n = g.noise;
  std::string out;
  if (n.within) {
    const std::string basis = n.repeats ? "ranges of the repeats' median step times" : "p10..p90 of step time";
    out += "Noise: the difference (" + signed_ms(n.median_gap_ms) + ", " + (n.median_gap_pct >= 0 ? "+" : "") +
           fixed_text(n.median_gap_pct, 1) + "% in median step time) is within the runs' noise (" + basis + ": " +
           g.slow + " " + fixed_text(n.slow_lo_ms, 1) + ".." + fixed_text(n.slow_hi_ms, 1) + " ms, " + g.fast + " " +
           fixed_text(n.fast_lo_ms, 1) + ".." + fixed_text(n.fast_hi_ms, 1) +
           " ms overlap), so the split below may be noise, not a difference.\n";
  }
  for (const auto& [name, v] : {std::make_pair(g.slow, &g.slow_unstable), std::make_pair(g.fast, &g.fast_unstable)})
    if (*v)
      out += "Unstable: " + detail::instability_text(name, **v) +
             ", so its means may not hold for another run, nor the split below.\n";
  out += "Why " + g.slow + " is slower than " + g.fast + ": ";
  const auto pct = [&](double part) {
    return g.gap_ms != 0 ? fixed_text(100.0 * part / g.gap_ms, 0) + "%" : std::string("-");
  };
  out += signed_ms(g.gap_ms) + " per step (means over " + std::to_string(g.slow_steps) + " and " +
         std::to_string(g.fast_steps) +
         (g.untraced ? " steps without kernel records" : " steps, all with kernel records") + "), of which\n";
  const std::string window = g.gpu_windows ? "GPU window" : "wall time";
  if (!g.forward_backward) {
    out += "  - forward/backward: no forward or backward phase in both runs, so that part is in the rest.\n";
  } else if (g.gpu) {
    const bool counters = g.busy_from == gap_breakdown::busy_source::hardware_counters;
    const bool launches = g.kernel_ratio > 0;  // kernel records in both runs
    out += "  - GPU idle inside forward/backward: " + signed_ms(g.fb_idle_ms) + " (" + pct(g.fb_idle_ms) +
           ") -- the GPU waited for the CPU to launch work.";
    if (launches)
      out += " " + g.slow + " launches " + fixed_text(g.kernel_ratio, 1) + "x as many kernels per step as " + g.fast +
             " (mean forward/backward kernel " + fixed_text(g.slow_mean_kernel_us, 0) + " us vs " +
             fixed_text(g.fast_mean_kernel_us, 0) + " us, from " + std::to_string(g.slow_recorded) + " and " +
             std::to_string(g.fast_recorded) + " recorded steps).";
    out += "\n  - GPU busy inside forward/backward: " + signed_ms(g.fb_busy_ms) + " (" + pct(g.fb_busy_ms) +
           ") -- the same work took longer on the GPU (for smaller matrices: fewer SMs filled, less efficient tiles)";
    if (counters) {
      const bool all = g.slow_counter_steps == g.slow_steps && g.fast_counter_steps == g.fast_steps;
      out += all ? " (busy time from hardware counters on the same " + std::to_string(g.slow_steps) + " and " +
                       std::to_string(g.fast_steps) + " steps"
                 : " (busy share from hardware counters on " + std::to_string(g.slow_counter_steps) + " of the " +
                       std::to_string(g.slow_steps) + " and " + std::to_string(g.fast_counter_steps) + " of the " +
                       std::to_string(g.fast_steps) + " steps, of their GPU windows";
      if (g.slow_sm_active_pct >= 0 && g.fast_sm_active_pct >= 0)
        out += "; SMs active " + fixed_text(g.slow_sm_active_pct, 0) + "% vs " + fixed_text(g.fast_sm_active_pct, 0) +
               "% of the forward/backward windows";
      out += ").\n";
    } else {
      out += " (busy time from kernel records of " + std::to_string(g.slow_recorded) + " and " +
             std::to_string(g.fast_recorded) + " recorded steps).\n";
    }
  } else {
    out +=
        "  - forward/backward " + window + ": " + signed_ms(g.fb_window_ms) + " (" + pct(g.fb_window_ms) +
        ") -- neither kernel records nor hardware counters in both runs, so idle and busy time cannot be told apart.\n";
  }
  out += "  - optimizer (fixed per-step cost, " + window + "): " + signed_ms(g.optimizer_ms) + " (" +
         pct(g.optimizer_ms) + ")\n";
  out += "  - everything else (data loading, other phases, host time outside the forward/backward/optimizer " + window +
         "s): " + signed_ms(g.other_ms) + " (" + pct(g.other_ms) + ")\n";
  if (!g.kernels.empty()) {
    out += "  Kernels whose time per step changed most (forward+backward, ms and launches per recorded step, " +
           g.slow + " vs " + g.fast +
           (g.kernels_complete ? "" : "; from each phase's top 10: the steps were not kept") + "):\n";
    for (const auto& k : g.kernels)
      out += "    " + detail::pad(fixed_text(k.slow_ms, 2), 8) + " ms (" + fixed_text(k.slow_count, 0) + "x) vs " +
             detail::pad(fixed_text(k.fast_ms, 2), 8) + " ms (" + fixed_text(k.fast_count, 0) + "x)  " + k.name + "\n";
  }
  return out;
}

/// Why a column cannot be ranked: "" when it can.
inline std::string why_not_compared(const compared_run& c) {
  if (c.repeats == 0 || c.steps == 0) return c.name + " has no steps";
  if (c.measured_steps == 0)
    return c.name + " has no measured steps (all " + std::to_string(c.steps) + " were warm-up)";
  return "";
}

/// Ranks the columns (ratio_to_fastest), breaks down the gap between the slowest and the fastest
/// column with measured steps, and words it. With fewer than two such columns, the explanation says
/// which column has nothing to compare.
inline comparison compare_runs(std::vector<compared_run> runs) {
  comparison out;
  out.runs = std::move(runs);
  std::vector<const compared_run*> ranked;
  std::string skipped;
  for (const auto& r : out.runs) {
    const std::string why = why_not_compared(r);
    if (why.empty())
      ranked.push_back(&r);
    else
      skipped += (skipped.empty() ? "" : "; ") + why;
  }
  // Ties keep their order, so the first of equal columns counts as the slower one.
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const compared_run* a, const compared_run* b) { return a->median_ms > b->median_ms; });
  const double best = ranked.empty() ? 0 : ranked.back()->median_ms;
  for (auto& r : out.runs) r.ratio_to_fastest = why_not_compared(r).empty() && best > 0 ? r.median_ms / best : 0;
  if (ranked.size() < 2) {
    out.explanation = "Nothing to explain: fewer than two runs with measured steps" +
                      (skipped.empty() ? std::string(".") : " (" + skipped + ").") + "\n";
    return out;
  }
  out.gap = detail::break_down_gap(*ranked.front(), *ranked.back());
  out.explanation = explain(*out.gap);
  if (!skipped.empty()) out.explanation += "Not compared: " + skipped + ".\n";
  return out;
}

TRACEML_END_NAMESPACE
