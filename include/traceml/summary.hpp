// traceml: what a run produced. Per step: wall time of each phase summed over its micro-batches,
// end-to-end step time, the residual (step time inside no phase) and, when a GPU source is
// attached, GPU facts. Per run: statistics over the steps after warm-up. Pure functions.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/intervals.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/record.hpp"
#include "traceml/stats.hpp"

TRACEML_BEGIN_NAMESPACE

/// One phase's wall time within one step, summed over every occurrence (micro-batches).
struct phase_time {
  phase_kind kind = phase_kind::user;
  std::string name;
  double wall_ms = 0;
  int count = 0;           ///< occurrences in the step
  bool top_level = true;   ///< false when nested inside another phase (excluded from the residual sum)
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

  const phase_time* find(phase_kind kind, const std::string& name) const {
    for (const auto& p : phases)
      if (p.kind == kind && p.name == name) return &p;
    return nullptr;
  }
};

/// One kernel name's figures over a run's recorded steps, per step.
struct kernel_figure {
  std::string name;
  std::uint64_t launches = 0;      ///< over all recorded steps
  double launches_per_step = 0;    ///< launches / recorded steps
  double ms_per_step = 0;          ///< summed duration / recorded steps
  double mean_us = 0;              ///< summed duration / launches
};

/// What the kernel records of the recorded steps say about one phase (or the whole step). Every
/// figure here rests on the same `steps` steps, the wall time included, so any ratio of two of them
/// is a ratio over one sample set. A recorded step on which the phase did not run counts as zeros.
struct kernel_summary {
  std::size_t steps = 0;           ///< recorded steps (after warm-up) these figures rest on
  summary_stats wall_ms;           ///< the phase's CPU wall time on those steps
  summary_stats window_ms;         ///< the GPU window busy and idle time were measured in
  summary_stats kernel_ms;         ///< summed kernel durations
  summary_stats busy_ms;           ///< the GPU ran the phase's own work (inside the window)
  summary_stats idle_ms;           ///< window - busy
  double busy_share = 0;           ///< total busy / total window over the steps, in [0, 1]
  double idle_share = 0;           ///< total idle / total window, = 1 - busy_share (0 without a window)
  double kernels_per_step = 0;     ///< launches / steps
  double kernels_per_microbatch = 0;  ///< launches / the phase's micro-batch occurrences (0: outside micro-batches)
  double mean_kernel_us = 0;       ///< kernel time / launches
  std::vector<kernel_figure> top_kernels;  ///< merged over the steps first, then the longest top_kernel_count
};

/// The explanation's sample set: per-step means over the measured steps on which no kernel records
/// were taken and that do not follow a recorded step (recording's after-effects, which the budget
/// charges too). These steps carry none of the profiler's recording cost, so a difference between
/// two runs computed from them is a difference between the training loops. When every measured step
/// was recorded (every-step recording), the set is all measured steps and `untraced` is false.
struct baseline_means {
  std::size_t steps = 0;
  bool untraced = true;
  double step_ms = 0;
  double residual_ms = 0;
};

/// The per-phase part of baseline_means, over the same steps.
struct phase_baseline {
  double wall_ms = 0;
  double gpu_ms = -1;  ///< GPU time between the phase's boundaries; -1 unless measured on every baseline step
};

/// Statistics of one phase over the measured steps (a step without the phase counts as 0 ms).
struct phase_summary {
  phase_kind kind = phase_kind::user;
  std::string name;
  bool top_level = true;
  summary_stats wall_ms;           ///< every measured step (wall_ms.count of them)
  double share = 0;                ///< wall mean / step mean, over those same steps
  /// GPU time between the phase's boundaries on its stream (CUDA events on every step, boundary
  /// markers on recorded steps), over the steps where it was measured (gpu_ms->count).
  std::optional<summary_stats> gpu_ms;
  std::optional<kernel_summary> kernels;  ///< recorded steps only; nullopt when none was recorded
  phase_baseline baseline;
};

/// What recording kernels cost: recorded steps against the baseline's (untraced) steps.
struct recording_summary {
  std::size_t recorded_steps = 0;  ///< measured steps with kernel records
  double recorded_step_ms = 0;     ///< median wall time of the recorded steps
  double untraced_step_ms = 0;     ///< median wall time of the untraced baseline steps
  /// recorded / untraced - 1, from the two medians: how much slower a recorded step ran. nullopt
  /// when either set is empty.
  std::optional<double> cost;
};

/// Statistics of a whole run.
struct run_summary {
  std::size_t steps = 0;          ///< steps recorded
  std::size_t warmup_steps = 0;   ///< excluded from the statistics
  summary_stats step_ms;          ///< every measured step; step_ms.count is their number
  summary_stats residual_ms;
  std::vector<phase_summary> phases;
  double tokens_per_s = 0;        ///< from the mean step; 0 when the caller gave no tokens per step
  double samples_per_s = 0;
  std::optional<summary_stats> step_gpu_ms;    ///< GPU time of the step window (events or markers)
  std::optional<kernel_summary> step_kernels;  ///< the whole step window, recorded steps only
  recording_summary recording;
  baseline_means baseline;
  std::int64_t peak_allocated_bytes = -1;
  std::int64_t peak_reserved_bytes = -1;
  std::uint64_t dropped_records = 0;       ///< CPU records lost to full rings
  std::uint64_t dropped_gpu_records = 0;
  std::uint64_t unattributed_kernels = 0;
  std::string gpu_status;                  ///< what the GPU source measured, or why not

  std::size_t measured_steps() const noexcept { return steps - warmup_steps; }
};

/// A named run: its configuration, every step, and the summary.
struct run_result {
  std::string name;
  std::vector<std::pair<std::string, std::string>> config;
  std::vector<step_result> steps;
  run_summary summary;
};

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

/// How many kernels per phase the summaries keep (after merging every recorded step).
inline constexpr std::size_t top_kernel_count = 10;

namespace detail {

inline double ms(std::int64_t ns) noexcept { return static_cast<double>(ns) / 1e6; }

template <class F>
void for_phase_entries(const step_gpu_report& g, phase_kind kind, const std::string& name, F&& f) {
  for (const auto& e : g.phases)
    if (e.kind == kind && name == e.name) f(e);
}

/// The kernel-record figures over `steps` (all recorded), from per-step facts `facts_of(step)` and
/// kernel lists `kernels_of(step, into)`.
template <class FactsOf, class KernelsOf>
kernel_summary summarize_kernels(const std::vector<const step_result*>& steps, FactsOf&& facts_of, KernelsOf&& kernels_of) {
  kernel_summary k;
  k.steps = steps.size();
  std::vector<double> wall, window, kernel, busy, idle;
  double launches = 0, entries = 0, kernel_total = 0, busy_total = 0, idle_total = 0, window_total = 0;
  std::vector<kernel_stat> merged;
  for (const step_result* st : steps) {
    double wall_ms = 0, step_entries = 0;
    const gpu_facts f = facts_of(*st, wall_ms, step_entries);
    const std::int64_t win = std::max<std::int64_t>(f.window_ns, 0);
    wall.push_back(wall_ms);
    window.push_back(ms(win));
    kernel.push_back(ms(f.kernel_ns));
    busy.push_back(ms(f.busy_ns));
    idle.push_back(ms(f.idle_ns));
    launches += static_cast<double>(f.kernel_count);
    entries += step_entries;
    kernel_total += static_cast<double>(f.kernel_ns);
    busy_total += static_cast<double>(f.busy_ns);
    idle_total += static_cast<double>(f.idle_ns);
    window_total += static_cast<double>(win);
    kernels_of(*st, merged);
  }
  k.wall_ms = summarize(wall);
  k.window_ms = summarize(window);
  k.kernel_ms = summarize(kernel);
  k.busy_ms = summarize(busy);
  k.idle_ms = summarize(idle);
  if (window_total > 0) {
    k.busy_share = std::clamp(busy_total / window_total, 0.0, 1.0);
    k.idle_share = std::clamp(idle_total / window_total, 0.0, 1.0);
  }
  const double n = static_cast<double>(std::max<std::size_t>(k.steps, 1));
  k.kernels_per_step = launches / n;
  k.kernels_per_microbatch = entries > 0 ? launches / entries : 0;
  k.mean_kernel_us = launches > 0 ? kernel_total / launches / 1e3 : 0;
  sort_kernels(merged);  // truncated only now, after every step was merged
  if (merged.size() > top_kernel_count) merged.resize(top_kernel_count);
  for (const auto& m : merged)
    k.top_kernels.push_back(kernel_figure{m.name, m.count, static_cast<double>(m.count) / n, ms(m.total_ns) / n,
                                          m.count ? static_cast<double>(m.total_ns) / static_cast<double>(m.count) / 1e3 : 0});
  return k;
}

inline double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace detail

/// Statistics over steps[warmup..]; tokens/samples per step give throughput (0 = unknown). Every
/// derived figure is computed here, once, over the steps it rests on; sinks only format.
inline run_summary summarize_run(const std::vector<step_result>& steps, std::size_t requested_warmup,
                                 double tokens_per_step = 0, double samples_per_step = 0) {
  using detail::ms;
  run_summary s;
  s.steps = steps.size();
  s.warmup_steps = effective_warmup(requested_warmup, steps.size());

  // The three sample sets: every measured step; the recorded ones (kernel records); the baseline
  // (neither recorded nor right after a recorded step).
  std::vector<const step_result*> measured, recorded, baseline;
  for (std::size_t i = s.warmup_steps; i < steps.size(); ++i) {
    const step_result& st = steps[i];
    measured.push_back(&st);
    const bool rec = st.gpu && st.gpu->kernels_measured;
    const bool after = i > 0 && steps[i - 1].gpu && steps[i - 1].gpu->kernels_measured;
    if (rec) recorded.push_back(&st);
    else if (!after) baseline.push_back(&st);
  }
  s.baseline.untraced = !baseline.empty() || measured.empty();
  if (baseline.empty()) baseline = measured;  // every step recorded: the only consistent set left

  std::vector<double> step_ms, residual_ms;
  for (const auto* st : measured) {
    step_ms.push_back(st->wall_ms);
    residual_ms.push_back(st->residual_ms);
  }
  s.step_ms = summarize(step_ms);
  s.residual_ms = summarize(residual_ms);
  if (s.step_ms.mean > 0) {
    s.tokens_per_s = tokens_per_step * 1e3 / s.step_ms.mean;
    s.samples_per_s = samples_per_step * 1e3 / s.step_ms.mean;
  }
  {
    std::vector<double> b_step, b_residual;
    for (const auto* st : baseline) {
      b_step.push_back(st->wall_ms);
      b_residual.push_back(st->residual_ms);
    }
    s.baseline.steps = baseline.size();
    s.baseline.step_ms = detail::mean_of(b_step);
    s.baseline.residual_ms = detail::mean_of(b_residual);
    s.recording.recorded_steps = recorded.size();
    if (!recorded.empty()) {
      std::vector<double> r;
      for (const auto* st : recorded) r.push_back(st->wall_ms);
      s.recording.recorded_step_ms = summarize(r).median;
      if (s.baseline.untraced && !b_step.empty()) {
        s.recording.untraced_step_ms = summarize(b_step).median;
        if (s.recording.untraced_step_ms > 0)
          s.recording.cost = s.recording.recorded_step_ms / s.recording.untraced_step_ms - 1.0;
      }
    }
  }

  // Phase keys in order of first appearance over all steps, warm-up included, so the table keeps
  // the loop's order even when a phase first appears late.
  for (const auto& st : steps)
    for (const auto& p : st.phases) {
      auto it = std::find_if(s.phases.begin(), s.phases.end(),
                             [&](const phase_summary& x) { return x.kind == p.kind && x.name == p.name; });
      if (it == s.phases.end()) {
        phase_summary ps;
        ps.kind = p.kind;
        ps.name = p.name;
        ps.top_level = p.top_level;
        s.phases.push_back(std::move(ps));
      } else {
        it->top_level = it->top_level && p.top_level;
      }
    }

  // Step-level GPU figures.
  {
    std::vector<double> span;
    for (const auto* st : measured) {
      if (!st->gpu) continue;
      if (st->gpu->total.span_ns >= 0) span.push_back(ms(st->gpu->total.span_ns));
      s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, st->gpu->peak_allocated_bytes);
      s.peak_reserved_bytes = std::max(s.peak_reserved_bytes, st->gpu->peak_reserved_bytes);
      s.unattributed_kernels += st->gpu->unattributed_kernels;
    }
    if (!span.empty()) s.step_gpu_ms = summarize(span);
    if (!recorded.empty())
      s.step_kernels = detail::summarize_kernels(
          recorded,
          [](const step_result& st, double& wall, double&) {
            wall = st.wall_ms;
            return st.gpu->total;
          },
          [](const step_result& st, std::vector<kernel_stat>& into) {
            for (const auto& p : st.gpu->phases) merge_kernels(into, p.kernels);
          });
  }
  for (const auto& st : steps)
    if (st.gpu) s.dropped_gpu_records += st.gpu->dropped_records;

  for (auto& ps : s.phases) {
    const auto wall_of = [&](const step_result& st) {
      const phase_time* p = st.find(ps.kind, ps.name);
      return p ? p->wall_ms : 0.0;
    };
    // The phase's GPU time on one step: nullopt when the step has no GPU timing for it.
    const auto gpu_of = [&](const step_result& st) -> std::optional<double> {
      if (!st.gpu) return std::nullopt;
      gpu_facts f;
      bool any = false, known = true;
      detail::for_phase_entries(*st.gpu, ps.kind, ps.name, [&](const phase_gpu_facts& e) {
        any = true;
        known = known && e.facts.span_ns >= 0;
        f += e.facts;
      });
      if (any) return known ? std::optional<double>(ms(f.span_ns)) : std::nullopt;
      // Absent from this step: 0 where the step itself was timed on the GPU.
      return st.gpu->total.span_ns >= 0 ? std::optional<double>(0.0) : std::nullopt;
    };
    std::vector<double> wall, gpu;
    for (const auto* st : measured) {
      wall.push_back(wall_of(*st));
      if (auto g = gpu_of(*st)) gpu.push_back(*g);
    }
    ps.wall_ms = summarize(wall);
    ps.share = s.step_ms.mean > 0 ? ps.wall_ms.mean / s.step_ms.mean : 0;
    if (!gpu.empty()) ps.gpu_ms = summarize(gpu);

    std::vector<double> b_wall, b_gpu;
    for (const auto* st : baseline) {
      b_wall.push_back(wall_of(*st));
      if (auto g = gpu_of(*st)) b_gpu.push_back(*g);
    }
    ps.baseline.wall_ms = detail::mean_of(b_wall);
    ps.baseline.gpu_ms = !b_gpu.empty() && b_gpu.size() == baseline.size() ? detail::mean_of(b_gpu) : -1;

    // Kernel figures only for a phase that ran on a recorded step: zeros would read as "no kernels".
    const bool ran_recorded = std::any_of(recorded.begin(), recorded.end(), [&](const step_result* st) {
      return std::any_of(st->gpu->phases.begin(), st->gpu->phases.end(),
                         [&](const phase_gpu_facts& e) { return e.kind == ps.kind && ps.name == e.name; });
    });
    if (ran_recorded)
      ps.kernels = detail::summarize_kernels(
          recorded,
          [&](const step_result& st, double& wall_ms, double& entries) {
            wall_ms = wall_of(st);
            gpu_facts f;
            f.window_ns = 0;
            detail::for_phase_entries(*st.gpu, ps.kind, ps.name, [&](const phase_gpu_facts& e) {
              f += e.facts;
              if (e.microbatch >= 0) entries += 1;
            });
            return f;
          },
          [&](const step_result& st, std::vector<kernel_stat>& into) {
            detail::for_phase_entries(*st.gpu, ps.kind, ps.name,
                                      [&](const phase_gpu_facts& e) { merge_kernels(into, e.kernels); });
          });
  }
  return s;
}

TRACEML_END_NAMESPACE
