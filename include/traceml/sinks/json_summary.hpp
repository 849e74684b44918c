// traceml: the JSON summary (schema "traceml.summary/1", docs/json-schema.md) and the per-step
// JSONL lines. Both are produced from run_result, so they always agree with the terminal table.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/json_writer.hpp"
#include "traceml/detail/output_file.hpp"
#include "traceml/summary.hpp"

TRACEML_BEGIN_NAMESPACE

/// Identifies the layout of the JSON summary; bumped on any incompatible change.
inline constexpr const char* json_schema = "traceml.summary/1";

namespace detail {

inline void write_stats(json_writer& w, const summary_stats& s) {
  w.begin_object();
  w.member("count", static_cast<std::uint64_t>(s.count)).member("median", s.median).member("mean", s.mean);
  w.member("min", s.min).member("max", s.max).member("p10", s.p10).member("p90", s.p90).member("stddev", s.stddev);
  w.end_object();
}

inline void write_gpu_facts(json_writer& w, const gpu_facts& f) {
  w.member("kernel_ms", static_cast<double>(f.kernel_ns) / 1e6);
  w.member("busy_ms", static_cast<double>(f.busy_ns) / 1e6);
  w.member("idle_ms", static_cast<double>(f.idle_ns) / 1e6);
  w.member("kernel_count", f.kernel_count);
  w.member("memcpy_ms", static_cast<double>(f.memcpy_ns) / 1e6).member("memcpy_bytes", f.memcpy_bytes);
  w.member("memset_ms", static_cast<double>(f.memset_ns) / 1e6).member("memset_bytes", f.memset_bytes);
  if (f.span_ns >= 0) w.member("gpu_span_ms", static_cast<double>(f.span_ns) / 1e6);
}

inline void write_kernels(json_writer& w, const std::vector<kernel_stat>& ks) {
  w.begin_array();
  for (const auto& k : ks) {
    w.begin_object().member("name", k.name).member("count", k.count);
    w.member("total_ms", static_cast<double>(k.total_ns) / 1e6).member("mean_us", static_cast<double>(k.mean_ns()) / 1e3);
    w.end_object();
  }
  w.end_array();
}

/// One step as an object; `run_name`, when given, comes first (JSONL lines stand alone).
inline void write_step(json_writer& w, const step_result& st, std::optional<bool> warmup,
                       const std::string* run_name = nullptr) {
  w.begin_object();
  if (run_name) w.member("run", *run_name);
  w.member("step", st.step).member("wall_ms", st.wall_ms).member("residual_ms", st.residual_ms);
  w.member("microbatches", st.microbatches);
  if (warmup) w.member("warmup", *warmup);  // known only once the run's length is known
  w.key("phases").begin_array();
  for (const auto& p : st.phases) {
    w.begin_object().member("kind", to_string(p.kind)).member("name", p.name).member("wall_ms", p.wall_ms);
    w.member("count", p.count).member("top_level", p.top_level).end_object();
  }
  w.end_array();
  if (st.gpu) {
    const auto& g = *st.gpu;
    w.key("gpu").begin_object().member("kernels_measured", g.kernels_measured);
    write_gpu_facts(w, g.total);
    w.member("peak_allocated_bytes", g.peak_allocated_bytes).member("peak_reserved_bytes", g.peak_reserved_bytes);
    w.member("unattributed_kernels", g.unattributed_kernels).member("dropped_records", g.dropped_records);
    w.key("phases").begin_array();
    for (const auto& p : g.phases) {
      w.begin_object().member("kind", to_string(p.kind)).member("name", p.name).member("microbatch", p.microbatch);
      write_gpu_facts(w, p.facts);
      w.end_object();
    }
    w.end_array().end_object();
  }
  w.end_object();
}

inline void write_summary(json_writer& w, const run_summary& s) {
  w.begin_object();
  w.member("steps", static_cast<std::uint64_t>(s.steps)).member("warmup_steps", static_cast<std::uint64_t>(s.warmup_steps));
  w.key("step_ms");
  write_stats(w, s.step_ms);
  w.key("residual_ms");
  write_stats(w, s.residual_ms);
  w.member("tokens_per_s", s.tokens_per_s).member("samples_per_s", s.samples_per_s);
  w.key("phases").begin_array();
  for (const auto& p : s.phases) {
    w.begin_object().member("kind", to_string(p.kind)).member("name", p.name).member("top_level", p.top_level);
    w.member("share", p.share).key("wall_ms");
    write_stats(w, p.wall_ms);
    if (p.kernel_ms) {
      w.key("kernel_ms");
      write_stats(w, *p.kernel_ms);
      w.key("busy_ms");
      write_stats(w, *p.busy_ms);
      w.key("idle_ms");
      write_stats(w, *p.idle_ms);
      w.member("kernels_per_step", p.kernels_per_step).member("kernels_per_microbatch", p.kernels_per_microbatch);
      w.key("top_kernels");
      write_kernels(w, p.top_kernels);
    }
    if (p.gpu_span_ms) {
      w.key("gpu_span_ms");
      write_stats(w, *p.gpu_span_ms);
    }
    w.end_object();
  }
  w.end_array();
  w.key("gpu").begin_object().member("status", s.gpu_status);
  if (s.step_kernel_ms) {
    w.key("step_kernel_ms");
    write_stats(w, *s.step_kernel_ms);
    w.key("step_busy_ms");
    write_stats(w, *s.step_busy_ms);
  }
  if (s.step_gpu_span_ms) {
    w.key("step_gpu_span_ms");
    write_stats(w, *s.step_gpu_span_ms);
  }
  w.member("peak_allocated_bytes", s.peak_allocated_bytes).member("peak_reserved_bytes", s.peak_reserved_bytes);
  w.member("unattributed_kernels", s.unattributed_kernels).member("dropped_records", s.dropped_gpu_records);
  w.end_object();
  w.member("dropped_records", s.dropped_records);
  w.end_object();
}

}  // namespace detail

/// One run as a JSON object: name, config, summary, steps.
inline void write_run_json(detail::json_writer& w, const run_result& run) {
  w.begin_object().member("name", run.name);
  w.key("config").begin_object();
  for (const auto& [k, v] : run.config) w.member(k, v);
  w.end_object();
  w.key("summary");
  detail::write_summary(w, run.summary);
  w.key("steps").begin_array();
  for (std::size_t i = 0; i < run.steps.size(); ++i) detail::write_step(w, run.steps[i], i < run.summary.warmup_steps);
  w.end_array().end_object();
}

/// The whole JSON summary document for one or more runs (compare runs by putting them together).
inline std::string json_summary(const std::vector<run_result>& runs) {
  std::string out;
  detail::json_writer w(out);
  w.begin_object().member("schema", json_schema).member("traceml_version", TRACEML_VERSION_STRING);
  w.key("runs").begin_array();
  for (const auto& r : runs) write_run_json(w, r);
  w.end_array().end_object();
  out += '\n';
  return out;
}

/// Writes json_summary(runs) to `path`; false (reported once) when it cannot.
inline bool write_json_summary(const std::string& path, const std::vector<run_result>& runs) {
  return detail::write_whole_file(path, "JSON summary", json_summary(runs));
}

/// One JSONL line for a finished step: {"run":..., "step":..., ...}.
inline std::string step_jsonl_line(const std::string& run_name, const step_result& st) {
  std::string out;
  detail::json_writer w(out);
  detail::write_step(w, st, std::nullopt, &run_name);
  out += '\n';
  return out;
}

TRACEML_END_NAMESPACE
