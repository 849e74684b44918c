// traceml: the terminal summary table, formatted from run_summary (the same numbers as the JSON).
#pragma once
#include <cstdio>
#include <string>

#include "traceml/config.hpp"
#include "traceml/summary.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}
inline std::string pad(std::string s, std::size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}
}  // namespace detail

/// Milliseconds printed with three decimals (the table's rounding; JSON keeps full precision).
inline std::string format_ms(double ms) { return detail::fmt("%.3f", ms); }

/// The table: one row per phase (nested phases indented), then residual and step. Mean columns add
/// up: the top-level phases' means plus the residual's mean equal the step's mean.
inline std::string format_table(const run_result& run) {
  using detail::pad;
  const auto& s = run.summary;
  const bool gpu = s.step_kernel_ms.has_value();
  const bool span_only = !gpu && s.step_gpu_span_ms.has_value();  // CUDA-event timing
  std::string out;
  out += "traceml: " + run.name + "  (" + std::to_string(s.steps - s.warmup_steps) + " steps measured, " +
         std::to_string(s.warmup_steps) + " warm-up excluded)\n";
  std::string header = pad("phase", 22, true) + pad("mean ms", 11) + pad("median", 11) + pad("p10", 11) +
                       pad("p90", 11) + pad("min", 11) + pad("max", 11) + pad("std", 10) + pad("share", 8);
  if (gpu) header += pad("kernel ms", 11) + pad("gpu idle%", 10) + pad("kernels", 9);
  if (span_only) header += pad("gpu ms", 11);
  out += header + "\n" + std::string(header.size(), '-') + "\n";
  const auto row = [&](const std::string& name, const summary_stats& w, double share, const phase_summary* p) {
    std::string line = pad(name, 22, true) + pad(format_ms(w.mean), 11) + pad(format_ms(w.median), 11) +
                       pad(format_ms(w.p10), 11) + pad(format_ms(w.p90), 11) + pad(format_ms(w.min), 11) +
                       pad(format_ms(w.max), 11) + pad(format_ms(w.stddev), 10) +
                       pad(detail::fmt("%.1f%%", share * 100), 8);
    if (gpu && p && p->kernel_ms) {
      const double idle_pct = p->wall_ms.mean > 0 ? 100.0 * p->idle_ms->mean / p->wall_ms.mean : 0;
      line += pad(format_ms(p->kernel_ms->mean), 11) + pad(detail::fmt("%.1f", idle_pct), 10) +
              pad(detail::fmt("%.0f", p->kernels_per_step), 9);
    }
    if (span_only && p && p->gpu_span_ms) line += pad(format_ms(p->gpu_span_ms->mean), 11);
    out += line + "\n";
  };
  for (const auto& p : s.phases) row(p.top_level ? p.name : "  " + p.name + " (nested)", p.wall_ms, p.share, &p);
  row("(residual)", s.residual_ms, s.step_ms.mean > 0 ? s.residual_ms.mean / s.step_ms.mean : 0, nullptr);
  out += std::string(header.size(), '-') + "\n";
  std::string step_line = pad("step", 22, true) + pad(format_ms(s.step_ms.mean), 11) + pad(format_ms(s.step_ms.median), 11) +
                          pad(format_ms(s.step_ms.p10), 11) + pad(format_ms(s.step_ms.p90), 11) +
                          pad(format_ms(s.step_ms.min), 11) + pad(format_ms(s.step_ms.max), 11) +
                          pad(format_ms(s.step_ms.stddev), 10) + pad("100.0%", 8);
  if (gpu) {
    const double idle_pct = s.step_ms.mean > 0 ? 100.0 * (1.0 - s.step_busy_ms->mean / s.step_ms.mean) : 0;
    step_line += pad(format_ms(s.step_kernel_ms->mean), 11) + pad(detail::fmt("%.1f", idle_pct), 10);
  }
  if (span_only) step_line += pad(format_ms(s.step_gpu_span_ms->mean), 11);
  out += step_line + "\n";
  if (s.tokens_per_s > 0) out += "throughput: " + detail::fmt("%.1f", s.tokens_per_s) + " tokens/s\n";
  if (s.samples_per_s > 0) out += "throughput: " + detail::fmt("%.2f", s.samples_per_s) + " samples/s\n";
  if (s.peak_allocated_bytes >= 0)
    out += "gpu memory: peak allocated " + detail::fmt("%.2f", static_cast<double>(s.peak_allocated_bytes) / (1 << 30)) +
           " GiB, peak reserved " + detail::fmt("%.2f", static_cast<double>(s.peak_reserved_bytes) / (1 << 30)) + " GiB\n";
  if (!s.gpu_status.empty()) out += "gpu: " + s.gpu_status + "\n";
  if (s.dropped_records) out += "warning: " + std::to_string(s.dropped_records) + " CPU records dropped (ring full)\n";
  if (s.dropped_gpu_records) out += "warning: " + std::to_string(s.dropped_gpu_records) + " GPU records dropped\n";
  return out;
}

TRACEML_END_NAMESPACE
