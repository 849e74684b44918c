// traceml: what a run produced. Per step: wall time of each phase summed over its micro-batches,
// end-to-end step time, the residual (step time inside no phase) and, when a GPU source is
// attached, GPU facts. Per run: statistics over named sample sets of the steps after warm-up (the
// types here; run_accumulator.hpp computes them). Pure functions.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traceml/analysis/outside_steps.hpp"
#include "traceml/analysis/stats.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/intervals.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/phase_key.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/rank_identity.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE

/// One phase's wall time within one step, summed over every occurrence (micro-batches).
struct phase_time {
  phase_kind kind = phase_kind::user;
  std::string name;
  double wall_ms = 0;
  int count = 0;          ///< occurrences in the step
  bool top_level = true;  ///< false when nested inside another phase (excluded from the residual sum)
};

/// Everything known about one step.
struct step_result {
  std::int32_t step = -1;
  std::int64_t begin_ns = 0;
  double wall_ms = 0;
  double residual_ms = 0;  ///< step time inside no top-level phase on the step's thread
  int microbatches = 0;
  std::vector<phase_time> phases;  ///< in order of first appearance
  std::optional<step_gpu_report> gpu;
  /// CPU records (phases, rarely micro-batches) that full per-thread rings dropped since the previous
  /// step's end: a thread recorded more than detail::thread_ring::phase_room phases in between. The
  /// step itself is kept, its figures computed from the phases that were kept, so they undercount
  /// by this many phases; 0 for a whole step. (Other threads' records that a step end left out to
  /// bound its cost are not counted here: run_summary::capped_records.)
  std::uint64_t lost_phases = 0;

  const phase_time* find(phase_kind kind, const std::string& name) const {
    for (const auto& p : phases)
      if (p.kind == kind && p.name == name) return &p;
    return nullptr;
  }
};

/// One kernel name's figures over a run's recorded steps, per step.
struct kernel_figure {
  std::string name;
  std::uint64_t launches = 0;    ///< over all recorded steps
  double launches_per_step = 0;  ///< launches / recorded steps
  double ms_per_step = 0;        ///< summed duration / recorded steps
  double mean_us = 0;            ///< summed duration / launches
};

/// What the kernel records of the recorded steps say about one phase (or the whole step). Every
/// figure here rests on the same `steps` steps, the wall time included, so any ratio of two of them
/// is a ratio over one sample set. A recorded step on which the phase did not run counts as zeros.
struct kernel_summary {
  std::size_t steps = 0;              ///< recorded steps (after warm-up) these figures rest on
  summary_stats wall_ms;              ///< the phase's CPU wall time on those steps
  summary_stats window_ms;            ///< the GPU window busy and idle time were measured in
  summary_stats kernel_ms;            ///< summed kernel durations
  summary_stats busy_ms;              ///< the GPU ran the phase's own work (inside the window)
  summary_stats idle_ms;              ///< window - busy
  double busy_share = 0;              ///< total busy / total window over the steps, in [0, 1]
  double idle_share = 0;              ///< total idle / total window, = 1 - busy_share (0 without a window)
  double kernels_per_step = 0;        ///< launches / steps
  double kernels_per_microbatch = 0;  ///< launches / the phase's micro-batch occurrences (0: outside micro-batches)
  double mean_kernel_us = 0;          ///< kernel time / launches
  /// Of the phase's own GPU time (the union of its records), the share during which other work of
  /// the step ran beside it on another stream (gpu_facts::hidden_ns): for communication, how much of
  /// it was hidden under compute (backward, with DDP-style overlap). 0 when everything ran on one stream.
  double hidden_share = 0;
  /// The idle time by kind (gpu/idle_split.hpp), mean ms per step over the same steps: host wait,
  /// kernel-to-kernel wait (gaps under idle_kernel_gap_ns), other wait (other work of the step ran
  /// beside the idle window). They sum to idle_ms.mean.
  double idle_host_ms = 0;
  double idle_kernel_gap_ms = 0;
  double idle_other_ms = 0;
  /// Copies (memcpy records): the union of the window's copies inside it, mean ms per step, and its
  /// total over the total window, in [0, 1] (0 without a window).
  double copy_ms = 0;
  double copy_share = 0;
  /// The median kernel duration over every kernel of these steps, read from a DDSketch of them
  /// (quantile_sketch.hpp: within 0.5% of the exact median); 0 without kernels.
  double median_kernel_us = 0;
  double short_kernel_share = 0;           ///< launches shorter than short_kernel_ns / launches, in [0, 1]
  std::vector<kernel_figure> top_kernels;  ///< merged over the steps first, then the longest top_kernel_count
};

/// What hardware-counter samples (CUPTI PM sampling, pm_sampling_source.hpp) say about one phase (or
/// the whole step) over the *sampled* steps: measured steps whose step window the samples covered.
/// Unlike kernel records, sampling costs nothing per launch, so this set is normally every measured
/// step. Busy per step is the sampled busy share of the phase's GPU window (CUDA events) times that
/// window; shares are sums over the steps divided by the time they were measured over, in [0, 1]. A
/// sampled step on which the phase did not run counts as 0 ms.
struct counter_summary {
  std::size_t steps = 0;        ///< sampled steps (after warm-up) these figures rest on
  summary_stats window_ms;      ///< the phase's GPU window (events) on those steps
  summary_stats busy_ms;        ///< GPU engine busy inside the window (sampled share x window)
  summary_stats idle_ms;        ///< window - busy
  double busy_share = 0;        ///< engine busy, share of the sampled time
  double sm_active_share = 0;   ///< SMs active (averaged over SMs): below busy when work fills few SMs
  double tensor_share = -1;     ///< tensor pipes active, share of peak; -1: not sampled on this GPU
  double dram_share = -1;       ///< DRAM throughput, share of peak; -1: not sampled
  double coverage = 0;          ///< sampled time / window time over those steps (the samples' reach)
  double samples_per_step = 0;  ///< samples overlapping the phase, per step
  /// The same counters on the steps that also had kernel records, beside the records' own busy share
  /// there: the two sources' agreement, over one set of steps (`recorded_steps`; 0: none).
  std::size_t recorded_steps = 0;
  double recorded_counter_busy_share = -1;  ///< counters' busy share on those steps
  double recorded_kernel_busy_share = -1;   ///< kernel records' busy / window on those steps
  /// The records as the counters would count them (gpu_facts::counted_busy_ns: the whole GPU, each
  /// kernel's launch set-up, the counters' sample interval), / window on those steps. -1: not modelled.
  double recorded_counted_share = -1;
};

/// The explanation's sample set: per-step means over the measured steps on which kernel records were
/// off (a schedule's warm-up steps had them on) and that do not follow a step with records on
/// (recording's after-effects, which the budget charges too). These steps carry none of the profiler's recording cost,
/// so a difference between two runs computed from them is a difference between the training loops. When every measured
/// step was recorded (every-step recording), the set is all measured steps and `untraced` is false.
struct baseline_means {
  std::size_t steps = 0;
  bool untraced = true;
  double step_ms = 0;
  double residual_ms = 0;
  /// The step time's quantiles over the same steps (0 when there are none).
  double p10_ms = 0, median_ms = 0, p90_ms = 0;
};

/// The per-phase part of baseline_means, over the same steps.
struct phase_baseline {
  double wall_ms = 0;
  double gpu_ms = -1;  ///< GPU time between the phase's boundaries; -1 unless measured on every baseline step
  /// GPU busy inside those boundaries from hardware counters: the busy share the samples saw over
  /// the baseline steps that were sampled (`counter_steps` of them) times `gpu_ms` (-1 unless both
  /// are known). With every baseline step sampled whole, exactly the mean busy time per step.
  double counter_busy_ms = -1;
  std::size_t counter_steps = 0;
};

/// Statistics of one phase over the measured steps (a step without the phase counts as 0 ms).
struct phase_summary {
  phase_kind kind = phase_kind::user;
  std::string name;
  bool top_level = true;
  summary_stats wall_ms;  ///< every measured step (wall_ms.count of them)
  double share = 0;       ///< wall mean / step mean, over those same steps
  /// GPU time between the phase's boundaries on its stream (CUDA events on every step, boundary
  /// markers on recorded steps), over the steps where it was measured (gpu_ms->count).
  std::optional<summary_stats> gpu_ms;
  std::optional<kernel_summary> kernels;    ///< recorded steps only; nullopt when none was recorded
  std::optional<counter_summary> counters;  ///< sampled steps only; nullopt without hardware counters
  phase_baseline baseline;
};

/// What recording kernels cost: recorded steps against the baseline's (untraced) steps.
struct recording_summary {
  std::size_t recorded_steps = 0;  ///< measured steps with kernel records
  double recorded_step_ms = 0;     ///< median wall time of the recorded steps
  double untraced_step_ms = 0;     ///< median wall time of the untraced baseline steps
  /// How much slower a recorded step ran: the median, over recorded steps, of each one's wall time
  /// against the median of the (up to 5) untraced steps just before it, minus 1. Paired with its
  /// neighbours so that a run whose step time drifts (a noisy machine) does not make recorded
  /// steps look cheaper or dearer than they were. nullopt when no recorded step had untraced
  /// steps before it.
  std::optional<double> cost;
  std::size_t paired_steps = 0;  ///< recorded steps `cost` rests on
};

/// Consecutive steps folded into one point of the step-time timeline.
struct step_bucket {
  std::int32_t first_step = 0;
  std::uint32_t steps = 0;
  double mean_ms = 0, min_ms = 0, max_ms = 0;
  /// GPU memory along the run: the mean of the peak allocated bytes of the bucket's steps that
  /// sampled it (memory_steps of them; allocated_bytes is -1 when none did).
  std::uint32_t memory_steps = 0;
  double allocated_bytes = -1;
  /// The bucket's untraced steps (kernel records off, and not right after a step with records on:
  /// baseline_means' rule) and their mean: a run that records some steps mixes slower ones into
  /// mean_ms, and the step time's shape along the run is read from these. untraced_mean_ms is 0
  /// when untraced_steps is 0.
  std::uint32_t untraced_steps = 0;
  double untraced_mean_ms = 0;
};

/// How many points the step-time timeline keeps: beyond, neighbours merge (the resolution halves),
/// so that a run of any length draws the same-sized chart.
inline constexpr std::size_t timeline_points = 1024;

/// The GPU status of a run that had no GPU time source, so that every output says why it has no GPU
/// figures and how to get them rather than leaving the field empty.
inline constexpr const char* no_gpu_source_status =
    "no GPU time source attached (link traceml::cupti and attach one with "
    "profiler::set_gpu_source(traceml::make_best_gpu_source()); where no GPU is usable, that attaches none "
    "and says why once at start)";

/// Statistics of a whole run.
struct run_summary {
  std::size_t steps = 0;         ///< steps recorded
  std::size_t warmup_steps = 0;  ///< excluded from the statistics
  double total_wall_ms = 0;      ///< every step's wall time summed, warm-up included
  summary_stats step_ms;         ///< every measured step; step_ms.count is their number
  summary_stats residual_ms;
  std::vector<phase_summary> phases;
  double tokens_per_s = 0;  ///< from the mean step; 0 when the caller gave no tokens per step
  double samples_per_s = 0;
  std::optional<summary_stats> step_gpu_ms;      ///< GPU time of the step window (events or markers)
  std::optional<kernel_summary> step_kernels;    ///< the whole step window, recorded steps only
  std::optional<counter_summary> step_counters;  ///< the whole step window, sampled steps only
  recording_summary recording;
  baseline_means baseline;
  std::int64_t peak_allocated_bytes = -1;
  std::int64_t peak_reserved_bytes = -1;
  std::uint64_t dropped_records = 0;  ///< CPU records lost to full rings (the run's total)
  /// Steps that lost phases to a full ring (step_result::lost_phases > 0), warm-up included, and of
  /// them the measured steps, on which the statistics above rest: those undercount their phases.
  std::uint64_t steps_with_lost_phases = 0;
  std::uint64_t measured_steps_with_lost_phases = 0;
  /// CPU records of threads other than the training thread that step ends left out: beyond
  /// profiler_options::max_other_thread_records per step.
  std::uint64_t capped_records = 0;
  std::uint64_t overlapping_steps = 0;  ///< step scopes ignored: they began while another step was open
  /// The profiler's start-up, paid before the first step: from its construction to its GPU source's
  /// attachment (the source's own start-up included when it is made after the profiler, as the
  /// TRACEML_OUT session makes it: CUPTI, the hardware counters' configuration). -1: not measured.
  double startup_ms = -1;
  /// finish()'s work before the table is printed: the last steps, the GPU source's last records,
  /// every output written. -1: not measured (the JSON summary is written before it is known).
  double finish_ms = -1;
  std::uint64_t dropped_gpu_records = 0;
  std::uint64_t unattributed_kernels = 0;
  std::string gpu_status = no_gpu_source_status;  ///< what the GPU source measured, or why not
  /// How counter_summary::recorded_counted_share saw the records (gpu_source::counter_view): the
  /// counters' sample interval (0: not modelled) and the engine's time per kernel launch.
  double counted_interval_us = 0;
  double launch_engine_us = 0;
  /// Step time along the run, every step in order (warm-up included), at most timeline_points
  /// buckets of equal length (1 step each for runs up to that many steps).
  std::vector<step_bucket> timeline;
  /// Phases recorded outside any step and the gaps between steps (analysis/outside_steps.hpp).
  outside_steps_summary outside_steps;

  std::size_t measured_steps() const noexcept { return steps - warmup_steps; }
};

/// A named run: its configuration, every step, and the summary.
struct run_result {
  std::string name;
  rank_identity rank;  ///< which rank of a data-parallel run wrote it (not distributed: rank -1)
  std::vector<std::pair<std::string, std::string>> config;
  std::vector<step_result> steps;
  run_summary summary;
};

/// The residual's share of the step: its mean over the mean step (0 without a step time), as the
/// table and the HTML report show it beside each phase's share.
inline double residual_share(const run_summary& s) noexcept {
  return s.step_ms.mean > 0 ? s.residual_ms.mean / s.step_ms.mean : 0;
}

/// The fastest median step time of the runs with measured steps; 0 when none has one.
inline double fastest_median_ms(const std::vector<run_result>& runs) noexcept {
  double fastest = 0;
  for (const auto& r : runs)
    if (r.summary.step_ms.count > 0 && r.summary.step_ms.median > 0 &&
        (fastest == 0 || r.summary.step_ms.median < fastest))
      fastest = r.summary.step_ms.median;
  return fastest;
}

/// A run's median step time over `fastest` (fastest_median_ms): the one ratio between runs,
/// median-based (a few slower recorded steps move a mean, not a median). NaN for a run without
/// measured steps, or when no run had a median to compare with.
inline double median_over_fastest(const run_summary& s, double fastest) noexcept {
  return s.step_ms.count > 0 && fastest > 0 ? s.step_ms.median / fastest : std::numeric_limits<double>::quiet_NaN();
}

/// Builds one step's result from its records: the step's own record, its micro-batches and phases
/// (on any thread). Records of other steps are ignored. Returns nullopt when no step record is
/// among them.
inline std::optional<step_result> compute_step(std::int32_t step, std::vector<span_record> spans) {
  // Records arrive in closing order (inner scopes first); phases are listed in opening order.
  std::stable_sort(spans.begin(), spans.end(),
                   [](const span_record& a, const span_record& b) { return a.begin_ns < b.begin_ns; });
  const span_record* step_rec = nullptr;
  for (const auto& r : spans)
    if (r.kind == phase_kind::step && r.step == step) step_rec = &r;
  if (!step_rec) return std::nullopt;
  step_result out;
  out.step = step;
  out.begin_ns = step_rec->begin_ns;
  out.wall_ms = static_cast<double>(step_rec->duration_ns()) / 1e6;
  std::vector<detail::interval> top_level;
  for (const auto& r : spans) {
    if (r.step != step) continue;
    if (r.kind == phase_kind::microbatch) {
      ++out.microbatches;
      continue;
    }
    if (!is_phase(r.kind)) continue;
    auto it = std::find_if(out.phases.begin(), out.phases.end(),
                           [&](const phase_time& p) { return p.kind == r.kind && p.name == r.name; });
    if (it == out.phases.end()) {
      out.phases.push_back(phase_time{r.kind, r.name, 0.0, 0, r.nesting == 0});
      it = out.phases.end() - 1;
    }
    it->wall_ms += static_cast<double>(r.duration_ns()) / 1e6;
    it->count += 1;
    it->top_level = it->top_level && r.nesting == 0;
    if (r.nesting == 0 && r.thread == step_rec->thread) top_level.emplace_back(r.begin_ns, r.end_ns);
  }
  const auto inside = detail::union_length(std::move(top_level), step_rec->begin_ns, step_rec->end_ns);
  out.residual_ms = static_cast<double>(step_rec->duration_ns() - inside) / 1e6;
  return out;
}

namespace detail {
/// Nanoseconds to milliseconds, the unit of every figure users see.
inline double ms(std::int64_t ns) noexcept { return static_cast<double>(ns) / 1e6; }
}  // namespace detail

/// How many kernels per phase the summaries keep (after merging every recorded step).
inline constexpr std::size_t top_kernel_count = 10;

/// The longest `keep` kernels of a list merged over `steps` recorded steps (merge_kernels), as figures
/// per step. Sorted and truncated only here, after the merge: a kernel 11th in every list that was
/// merged can still be first of the whole.
inline std::vector<kernel_figure> top_kernel_figures(std::vector<kernel_stat> merged, std::size_t steps,
                                                     std::size_t keep = top_kernel_count) {
  sort_kernels(merged);
  if (merged.size() > keep) merged.resize(keep);
  const double n = static_cast<double>(std::max<std::size_t>(steps, 1));
  std::vector<kernel_figure> out;
  out.reserve(merged.size());
  for (const auto& m : merged)
    out.push_back(kernel_figure{m.name, m.count, static_cast<double>(m.count) / n, detail::ms(m.total_ns) / n,
                                m.count ? static_cast<double>(m.total_ns) / static_cast<double>(m.count) / 1e3 : 0});
  return out;
}

TRACEML_END_NAMESPACE
