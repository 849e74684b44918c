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
#include "traceml/gpu_source.hpp"
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

/// Statistics of one phase over the measured steps (a step without the phase counts as 0 ms).
struct phase_summary {
  phase_kind kind = phase_kind::user;
  std::string name;
  bool top_level = true;
  summary_stats wall_ms;
  double share = 0;  ///< mean wall / mean step time
  // GPU columns, present when a GPU source measured kernels (CUPTI) on the measured steps.
  std::optional<summary_stats> kernel_ms;
  std::optional<summary_stats> busy_ms;
  std::optional<summary_stats> idle_ms;
  double kernels_per_step = 0;
  double kernels_per_microbatch = 0;  ///< for phases inside micro-batches
  std::vector<kernel_stat> top_kernels;  ///< over the measured steps
  /// GPU time between the phase's boundaries on its stream (CUDA events, or CUPTI markers).
  std::optional<summary_stats> gpu_span_ms;
};

/// Statistics of a whole run.
struct run_summary {
  std::size_t steps = 0;          ///< steps recorded
  std::size_t warmup_steps = 0;   ///< excluded from the statistics
  summary_stats step_ms;
  summary_stats residual_ms;
  std::vector<phase_summary> phases;
  double tokens_per_s = 0;        ///< 0 when the caller gave no tokens per step
  double samples_per_s = 0;
  std::optional<summary_stats> step_kernel_ms;  ///< GPU kernel time per step
  std::optional<summary_stats> step_busy_ms;
  std::optional<summary_stats> step_gpu_span_ms;  ///< GPU time of the step window (events or markers)
  std::int64_t peak_allocated_bytes = -1;
  std::int64_t peak_reserved_bytes = -1;
  std::uint64_t dropped_records = 0;       ///< CPU records lost to full rings
  std::uint64_t dropped_gpu_records = 0;
  std::uint64_t unattributed_kernels = 0;
  std::string gpu_status;                  ///< what the GPU source measured, or why not
};

/// A named run: its configuration, every step, and the summary.
struct run_result {
  std::string name;
  std::vector<std::pair<std::string, std::string>> config;
  std::vector<step_result> steps;
  run_summary summary;
};

/// Length of the union of [begin, end) intervals, each clipped to [lo, hi).
inline std::int64_t union_length(std::vector<std::pair<std::int64_t, std::int64_t>> iv, std::int64_t lo,
                                 std::int64_t hi) {
  std::sort(iv.begin(), iv.end());
  std::int64_t total = 0, cur_b = 0, cur_e = 0;
  bool open = false;
  for (auto [b, e] : iv) {
    b = std::max(b, lo);
    e = std::min(e, hi);
    if (e <= b) continue;
    if (open && b <= cur_e) {
      cur_e = std::max(cur_e, e);
    } else {
      if (open) total += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
      open = true;
    }
  }
  if (open) total += cur_e - cur_b;
  return total;
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
  std::vector<std::pair<std::int64_t, std::int64_t>> top_level;
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
  const auto inside = union_length(std::move(top_level), step_rec->begin_ns, step_rec->end_ns);
  out.residual_ms = static_cast<double>(step_rec->duration_ns() - inside) / 1e6;
  return out;
}

namespace detail {
inline void merge_kernels(std::vector<kernel_stat>& into, const std::vector<kernel_stat>& from) {
  for (const auto& k : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const kernel_stat& x) { return x.name == k.name; });
    if (it == into.end()) {
      into.push_back(k);
    } else {
      it->count += k.count;
      it->total_ns += k.total_ns;
    }
  }
}
}  // namespace detail

/// How many kernels per phase the summaries keep.
inline constexpr std::size_t top_kernel_count = 10;

/// Statistics over steps[warmup..]; tokens/samples per step give throughput (0 = unknown).
inline run_summary summarize_run(const std::vector<step_result>& steps, std::size_t requested_warmup,
                                 double tokens_per_step = 0, double samples_per_step = 0) {
  run_summary s;
  s.steps = steps.size();
  s.warmup_steps = effective_warmup(requested_warmup, steps.size());
  const auto first = steps.begin() + static_cast<std::ptrdiff_t>(s.warmup_steps);
  std::vector<double> step_ms, residual_ms;
  for (auto it = first; it != steps.end(); ++it) {
    step_ms.push_back(it->wall_ms);
    residual_ms.push_back(it->residual_ms);
  }
  s.step_ms = summarize(step_ms);
  s.residual_ms = summarize(residual_ms);
  if (s.step_ms.mean > 0) {
    s.tokens_per_s = tokens_per_step * 1e3 / s.step_ms.mean;
    s.samples_per_s = samples_per_step * 1e3 / s.step_ms.mean;
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

  std::vector<double> step_kernel, step_busy, step_span;
  for (auto it = first; it != steps.end(); ++it) {
    if (!it->gpu) continue;
    if (it->gpu->kernels_measured) {
      step_kernel.push_back(static_cast<double>(it->gpu->total.kernel_ns) / 1e6);
      step_busy.push_back(static_cast<double>(it->gpu->total.busy_ns) / 1e6);
    }
    if (it->gpu->total.span_ns >= 0) step_span.push_back(static_cast<double>(it->gpu->total.span_ns) / 1e6);
    s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, it->gpu->peak_allocated_bytes);
    s.peak_reserved_bytes = std::max(s.peak_reserved_bytes, it->gpu->peak_reserved_bytes);
    s.unattributed_kernels += it->gpu->unattributed_kernels;
  }
  for (const auto& st : steps)
    if (st.gpu) s.dropped_gpu_records += st.gpu->dropped_records;
  if (!step_kernel.empty()) {
    s.step_kernel_ms = summarize(step_kernel);
    s.step_busy_ms = summarize(step_busy);
  }
  if (!step_span.empty()) s.step_gpu_span_ms = summarize(step_span);

  for (auto& ps : s.phases) {
    std::vector<double> wall, kernel, busy, idle, span;
    double kernels = 0, micro_entries = 0;
    for (auto it = first; it != steps.end(); ++it) {
      const phase_time* p = it->find(ps.kind, ps.name);
      wall.push_back(p ? p->wall_ms : 0.0);
      if (!it->gpu) continue;
      gpu_facts f;
      bool has_span = false;
      double entries = 0;  // micro-batch entries of this phase in this step
      for (const auto& g : it->gpu->phases) {
        if (g.kind != ps.kind || ps.name != g.name) continue;
        f += g.facts;
        has_span = has_span || g.facts.span_ns >= 0;
        if (g.microbatch >= 0) entries += 1;
        detail::merge_kernels(ps.top_kernels, g.top_kernels);
      }
      if (has_span) span.push_back(static_cast<double>(f.span_ns) / 1e6);
      // CUDA events and unrecorded steps: zeros would mean "not measured"
      if (!it->gpu->kernels_measured) continue;
      micro_entries += entries;
      kernel.push_back(static_cast<double>(f.kernel_ns) / 1e6);
      busy.push_back(static_cast<double>(f.busy_ns) / 1e6);
      idle.push_back(static_cast<double>(f.idle_ns) / 1e6);
      kernels += static_cast<double>(f.kernel_count);
    }
    ps.wall_ms = summarize(wall);
    ps.share = s.step_ms.mean > 0 ? ps.wall_ms.mean / s.step_ms.mean : 0;
    if (!span.empty()) ps.gpu_span_ms = summarize(span);
    if (!kernel.empty()) {
      ps.kernel_ms = summarize(kernel);
      ps.busy_ms = summarize(busy);
      ps.idle_ms = summarize(idle);
      ps.kernels_per_step = kernels / static_cast<double>(kernel.size());
      ps.kernels_per_microbatch = micro_entries > 0 ? kernels / micro_entries : 0;
      std::sort(ps.top_kernels.begin(), ps.top_kernels.end(),
                [](const kernel_stat& a, const kernel_stat& b) { return a.total_ns > b.total_ns; });
      if (ps.top_kernels.size() > top_kernel_count) ps.top_kernels.resize(top_kernel_count);
    }
  }
  return s;
}

TRACEML_END_NAMESPACE
