// traceml: a comparison (compare.hpp) as the JSON `comparison` object documented in
// docs/json-schema.md: the columns, the gap's parts with the noise check, and the explanation.
// Written with the core's json_writer, so the core still needs no JSON library.
#pragma once
#include <cstdint>
#include <string>

#include "traceml/analysis/compare.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/json_writer.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
inline void write_optional_member(json_writer& w, const char* key, const std::optional<double>& v) {
  if (v) w.member(key, *v);
}

inline void write_compared_run(json_writer& w, const compared_run& r) {
  const auto u = [](std::size_t n) { return static_cast<std::uint64_t>(n); };
  w.begin_object().member("name", r.name).member("repeats", u(r.repeats)).member("steps", u(r.steps));
  w.member("measured_steps", u(r.measured_steps)).member("total_s", r.total_s).member("steps_per_s", r.steps_per_s);
  w.member("median_step_ms", r.median_ms);
  w.key("spread_ms").begin_array().value(r.spread_lo_ms).value(r.spread_hi_ms).end_array();
  w.member("spread", r.repeats > 1 ? "repeat medians" : "p10..p90");
  w.member("ratio_to_fastest", r.ratio_to_fastest).member("residual_ms", r.residual_ms);
  w.member("tokens_per_s", r.tokens_per_s).member("peak_allocated_bytes", r.peak_allocated_bytes);
  w.key("phases").begin_array();
  for (const auto& p : r.phases) {
    w.begin_object().member("kind", to_string(p.kind)).member("name", p.name).member("wall_ms", p.wall_ms);
    write_optional_member(w, "gpu_ms", p.gpu_ms);
    write_optional_member(w, "kernel_ms", p.kernel_ms);
    write_optional_member(w, "busy_ms", p.busy_ms);
    write_optional_member(w, "window_ms", p.window_ms);
    write_optional_member(w, "counter_busy_ms", p.counter_busy_ms);
    const auto share = [&](const char* key, double v) {
      if (v >= 0)
        w.member(key, v);
      else
        w.key(key).null();
    };
    share("counter_busy_share", p.counter_busy_share);
    share("sm_active_share", p.sm_active_share);
    w.key("baseline").begin_object().member("wall_ms", p.baseline.wall_ms);
    share("gpu_ms", p.baseline.gpu_ms);
    share("counter_busy_ms", p.baseline.counter_busy_ms);
    w.end_object().end_object();
  }
  w.end_array();
  w.member("gpu_steps", u(r.gpu_steps));
  w.key("baseline").begin_object().member("steps", u(r.baseline.steps)).member("untraced", r.baseline.untraced);
  w.member("step_ms", r.baseline.step_ms).member("residual_ms", r.baseline.residual_ms).end_object();
  if (r.counters()) {
    w.key("counters").begin_object().member("steps", u(r.sampled_steps));
    w.member("fb_busy_pct", r.fb_counter_busy_pct).member("fb_sm_active_pct", r.fb_sm_active_pct).end_object();
  }
  if (r.kernels()) {
    w.key("kernels").begin_object().member("steps", u(r.recorded_steps)).member("kernels_per_step", r.kernels_per_step);
    w.member("kernels_per_microbatch", r.kernels_per_microbatch).member("fb_kernels_per_step", r.fb_kernels_per_step);
    w.member("fb_kernel_ms", r.fb_kernel_ms).member("fb_idle_pct", r.fb_idle_pct);
    w.member("recording_cost", r.recording_cost).member("fb_kernels_complete", r.fb_kernels_complete);
    w.key("fb_top_kernels").begin_array();
    for (std::size_t i = 0; i < r.fb_kernels.size() && i < top_kernel_count; ++i) {
      const auto& k = r.fb_kernels[i];
      w.begin_object().member("name", k.name).member("launches", k.launches);
      w.member("launches_per_step", k.launches_per_step)
          .member("ms_per_step", k.ms_per_step)
          .member("mean_us", k.mean_us);
      w.end_object();
    }
    w.end_array().end_object();
  }
  w.end_object();
}

inline void write_gap(json_writer& w, const gap_breakdown& g) {
  const auto u = [](std::size_t n) { return static_cast<std::uint64_t>(n); };
  w.begin_object().member("slow", g.slow).member("fast", g.fast);
  w.member("slow_steps", u(g.slow_steps)).member("fast_steps", u(g.fast_steps)).member("untraced", g.untraced);
  w.member("gap_ms", g.gap_ms).member("forward_backward", g.forward_backward).member("fb_window_ms", g.fb_window_ms);
  w.member("fb_idle_ms", g.fb_idle_ms).member("fb_busy_ms", g.fb_busy_ms).member("optimizer_ms", g.optimizer_ms);
  w.member("other_ms", g.other_ms).member("gpu", g.gpu).member("gpu_windows", g.gpu_windows);
  w.member("busy_from", g.busy_from == gap_breakdown::busy_source::hardware_counters ? "hardware counters"
                        : g.busy_from == gap_breakdown::busy_source::kernel_records  ? "kernel records"
                                                                                     : "none");
  if (g.slow_sm_active_pct >= 0 && g.fast_sm_active_pct >= 0)
    w.member("slow_sm_active_pct", g.slow_sm_active_pct).member("fast_sm_active_pct", g.fast_sm_active_pct);
  w.member("slow_recorded_steps", u(g.slow_recorded)).member("fast_recorded_steps", u(g.fast_recorded));
  w.member("kernel_ratio", g.kernel_ratio).member("slow_mean_kernel_us", g.slow_mean_kernel_us);
  w.member("fast_mean_kernel_us", g.fast_mean_kernel_us);
  w.key("kernels").begin_array();
  for (const auto& k : g.kernels) {
    w.begin_object().member("name", k.name).member("slow_ms", k.slow_ms).member("fast_ms", k.fast_ms);
    w.member("slow_launches", k.slow_count).member("fast_launches", k.fast_count).end_object();
  }
  w.end_array().member("kernels_complete", g.kernels_complete);
  const auto& n = g.noise;
  w.key("noise").begin_object().member("within", n.within).member("basis", n.repeats ? "repeat medians" : "p10..p90");
  w.key("slow_range_ms").begin_array().value(n.slow_lo_ms).value(n.slow_hi_ms).end_array();
  w.key("fast_range_ms").begin_array().value(n.fast_lo_ms).value(n.fast_hi_ms).end_array();
  w.member("median_gap_ms", n.median_gap_ms).member("median_gap_pct", n.median_gap_pct).end_object();
  w.end_object();
}
}  // namespace detail

/// The comparison object into a writer (as a member value, or a document of its own).
inline void write_comparison_json(detail::json_writer& w, const comparison& c) {
  w.begin_object().member("ratio", "median step / fastest median step");
  w.key("runs").begin_array();
  for (const auto& r : c.runs) detail::write_compared_run(w, r);
  w.end_array();
  if (c.gap) {
    w.key("gap");
    detail::write_gap(w, *c.gap);
  }
  w.member("explanation", c.explanation).end_object();
}

/// The comparison object as a JSON text.
inline std::string comparison_json(const comparison& c) {
  std::string out;
  detail::json_writer w(out);
  write_comparison_json(w, c);
  out += '\n';
  return out;
}

TRACEML_END_NAMESPACE
