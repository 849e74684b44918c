// traceml: the JSON summary (schema "traceml.summary/3", docs/json-schema.md) and the per-step
// JSONL lines. Both are produced from run_result, so they always agree with the terminal table.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/json_writer.hpp"
#include "traceml/detail/output_file.hpp"
#include "traceml/gpu/idle_split.hpp"
#include "traceml/sinks/verdict_words.hpp"

TRACEML_BEGIN_NAMESPACE

/// Identifies the layout of the JSON summary; bumped on any incompatible change.
inline constexpr const char* json_schema = "traceml.summary/3";

/// The most the summary's per-step list may take. The summary holds aggregates, whose size does
/// not grow with the run (the timeline has at most timeline_points points); the list of steps is a
/// convenience of short runs (the trace and HTML of a 100-step run read it back), and a run whose
/// list would be larger leaves it to the JSONL, so that the whole file stays under about 1 MB at
/// any length.
inline constexpr std::size_t summary_step_list_max_bytes = std::size_t{512} << 10;

namespace detail {

inline void write_stats(json_writer& w, const summary_stats& s) {
  w.begin_object();
  w.member("count", static_cast<std::uint64_t>(s.count)).member("median", s.median).member("mean", s.mean);
  w.member("min", s.min).member("max", s.max).member("p10", s.p10).member("p90", s.p90).member("stddev", s.stddev);
  w.member("quantile_error", s.quantile_error).end_object();
}

/// `key: stats`, only when the statistics exist.
inline void write_stats_member(json_writer& w, const char* key, const std::optional<summary_stats>& s) {
  if (!s) return;
  w.key(key);
  write_stats(w, *s);
}

/// A summary figure that may not have been measured (-1): null then, so that the key is always there
/// and a reader cannot take a missing measurement for a zero.
inline void member_or_null(json_writer& w, const char* key, double value) {
  if (value >= 0)
    w.member(key, value);
  else
    w.key(key).null();
}

/// A window's hardware-counter samples, written only where they reached it: the time they covered,
/// how many overlapped it, and the shares of that time; tensor and DRAM only where the GPU has those
/// counters (their absence means "not sampled", never 0%).
inline void write_counter_facts(json_writer& w, const counter_facts& c) {
  w.key("counters").begin_object().member("covered_ms", ms(c.covered_ns)).member("samples", c.samples);
  w.member("busy_share", busy_share(c)).member("sm_active_share", sm_active_share(c));
  if (c.tensor_covered_ns > 0) w.member("tensor_share", tensor_share(c));
  if (c.dram_covered_ns > 0) w.member("dram_share", dram_share(c));
  w.end_object();
}

/// One window's facts in a step object. GPU time (`gpu_span_ms`), the hardware counters and the
/// window busy and idle were measured in appear when measured; the kernel, copy and set fields only
/// on a recorded step, where their zeros mean "none ran" rather than "not measured".
inline void write_gpu_facts(json_writer& w, const gpu_facts& f, bool kernels_measured) {
  if (f.span_ns >= 0) w.member("gpu_span_ms", ms(f.span_ns));
  if (f.counters.measured()) write_counter_facts(w, f.counters);
  if (!kernels_measured) return;
  if (f.window_ns >= 0) {
    w.member("window_ms", ms(f.window_ns)).member("busy_ms", ms(f.busy_ns)).member("idle_ms", ms(f.idle_ns));
  }
  w.member("kernel_ms", ms(f.kernel_ns)).member("kernel_count", f.kernel_count);
  w.member("memcpy_ms", ms(f.memcpy_ns)).member("memcpy_bytes", f.memcpy_bytes);
  w.member("memset_ms", ms(f.memset_ns)).member("memset_bytes", f.memset_bytes);
}

/// A step's kernel list (every kernel of the window, longest total first).
inline void write_kernels(json_writer& w, const std::vector<kernel_stat>& ks) {
  w.begin_array();
  for (const auto& k : ks) {
    w.begin_object().member("name", k.name).member("count", k.count);
    w.member("total_ms", ms(k.total_ns)).member("mean_us", static_cast<double>(k.mean_ns()) / 1e3);
    w.end_object();
  }
  w.end_array();
}

/// A kernel_summary's idle time by kind, launch statistics and copies (gpu/idle_split.hpp), each with
/// the threshold it was split by; over the summary's `steps`.
inline void write_idle_split(json_writer& w, const kernel_summary& k) {
  w.key("idle_split").begin_object().member("host_ms", k.idle_host_ms).member("kernel_gap_ms", k.idle_kernel_gap_ms);
  w.member("other_ms", k.idle_other_ms).member("kernel_gap_under_us", static_cast<double>(idle_kernel_gap_ns) / 1e3);
  w.end_object();
  w.key("launches").begin_object().member("per_step", k.kernels_per_step);
  w.member("median_kernel_us", k.median_kernel_us);
  w.member("short_share", k.short_kernel_share).member("short_under_us", static_cast<double>(short_kernel_ns) / 1e3);
  w.end_object();
  w.member("copy_ms", k.copy_ms).member("copy_share", k.copy_share);
}

/// One kernel_summary: every figure over the same `steps` recorded steps.
inline void write_kernel_summary(json_writer& w, const kernel_summary& k) {
  w.begin_object().member("steps", static_cast<std::uint64_t>(k.steps));
  const std::pair<const char*, const summary_stats*> stats[] = {{"wall_ms", &k.wall_ms},
                                                                {"window_ms", &k.window_ms},
                                                                {"kernel_ms", &k.kernel_ms},
                                                                {"busy_ms", &k.busy_ms},
                                                                {"idle_ms", &k.idle_ms}};
  for (const auto& [key, st] : stats) {
    w.key(key);
    write_stats(w, *st);
  }
  w.member("busy_share", k.busy_share).member("idle_share", k.idle_share);
  w.member("kernels_per_step", k.kernels_per_step).member("kernels_per_microbatch", k.kernels_per_microbatch);
  w.member("mean_kernel_us", k.mean_kernel_us).member("hidden_share", k.hidden_share);
  write_idle_split(w, k);
  w.key("top_kernels").begin_array();
  for (const auto& f : k.top_kernels) {
    w.begin_object().member("name", f.name).member("launches", f.launches);
    w.member("launches_per_step", f.launches_per_step)
        .member("ms_per_step", f.ms_per_step)
        .member("mean_us", f.mean_us);
    w.end_object();
  }
  w.end_array().end_object();
}

/// One counter_summary: every figure over the same `steps` sampled steps; the agreement with the
/// kernel records over the recorded steps among them, with their own count.
inline void write_counter_summary(json_writer& w, const counter_summary& c) {
  w.begin_object().member("steps", static_cast<std::uint64_t>(c.steps));
  const std::pair<const char*, const summary_stats*> stats[] = {
      {"window_ms", &c.window_ms}, {"busy_ms", &c.busy_ms}, {"idle_ms", &c.idle_ms}};
  for (const auto& [key, st] : stats) {
    w.key(key);
    write_stats(w, *st);
  }
  w.member("busy_share", c.busy_share).member("sm_active_share", c.sm_active_share);
  member_or_null(w, "tensor_share", c.tensor_share);
  member_or_null(w, "dram_share", c.dram_share);
  w.member("coverage", c.coverage).member("samples_per_step", c.samples_per_step);
  w.key("agreement_on_recorded").begin_object().member("steps", static_cast<std::uint64_t>(c.recorded_steps));
  member_or_null(w, "counters_busy_share", c.recorded_counter_busy_share);
  member_or_null(w, "kernel_records_busy_share", c.recorded_kernel_busy_share);
  member_or_null(w, "kernel_records_as_counted_share", c.recorded_counted_share);
  w.end_object().end_object();
}

inline void write_step_gpu(json_writer& w, const step_gpu_report& g) {
  w.key("gpu").begin_object().member("kernels_measured", g.kernels_measured);
  if (g.schedule.phase != schedule_phase::unscheduled) {  // which window a step fed, or why it recorded nothing
    w.key("schedule").begin_object().member("phase", to_string(g.schedule.phase));
    w.member("cycle", g.schedule.cycle).end_object();
  }
  write_gpu_facts(w, g.total, g.kernels_measured);
  w.member("peak_allocated_bytes", g.peak_allocated_bytes).member("peak_reserved_bytes", g.peak_reserved_bytes);
  w.member("unattributed_kernels", g.unattributed_kernels).member("dropped_records", g.dropped_records);
  w.key("phases").begin_array();
  for (const auto& p : g.phases) {
    w.begin_object().member("kind", to_string(p.kind)).member("name", p.name).member("microbatch", p.microbatch);
    write_gpu_facts(w, p.facts, g.kernels_measured);
    if (g.kernels_measured) {
      w.key("kernels");
      write_kernels(w, p.kernels);
    }
    w.end_object();
  }
  w.end_array().end_object();
}

/// One step as an object; `run_name`, when given, comes first (JSONL lines stand alone).
inline void write_step(json_writer& w, const step_result& st, std::optional<bool> warmup,
                       const std::string* run_name = nullptr, rank_identity rank = {}) {
  w.begin_object();
  if (run_name) w.member("run", *run_name);
  if (rank.distributed())
    w.member("rank", rank.rank).member("world_size", rank.world_size);  // each line says whose it is
  w.member("step", st.step).member("wall_ms", st.wall_ms).member("residual_ms", st.residual_ms);
  w.member("microbatches", st.microbatches).member("lost_phases", st.lost_phases);
  if (warmup) w.member("warmup", *warmup);  // known only once the run's length is known
  w.key("phases").begin_array();
  for (const auto& p : st.phases) {
    w.begin_object().member("kind", to_string(p.kind)).member("name", p.name).member("wall_ms", p.wall_ms);
    w.member("count", p.count).member("top_level", p.top_level).end_object();
  }
  w.end_array();
  if (st.gpu) write_step_gpu(w, *st.gpu);
  w.end_object();
}

inline void write_gap_figures(json_writer& w, const step_gap_figures& g) {
  w.begin_object().member("count", g.count).member("total_ms", g.total_ms).member("largest_ms", g.largest_ms);
  w.member("largest_after_step", g.largest_after_step).end_object();
}

/// The run's time outside its steps (analysis/outside_steps.hpp; docs/json-schema.md).
inline void write_outside_steps(json_writer& w, const outside_steps_summary& o) {
  w.begin_object().key("phases").begin_array();
  for (const auto& p : o.phases) {
    w.begin_object().member("kind", to_string(p.kind)).member("name", p.name).member("top_level", p.top_level);
    w.member("count", p.count).member("total_ms", p.total_ms).member("mean_ms", p.mean_ms);
    w.member("max_ms", p.max_ms).end_object();
  }
  w.end_array().member("phases_ms", o.phases_ms).member("names_left_out", o.names_left_out);
  w.key("gaps");
  write_gap_figures(w, o.gaps);
  w.key("epoch_gaps");
  write_gap_figures(w, o.epoch_gaps);
  w.member("epoch_marks", o.epoch_marks).member("steps_span_ms", o.steps_span_ms);
  w.member("gap_share", o.gap_share).end_object();
}

inline void write_phase_summary(json_writer& w, const phase_summary& p) {
  w.begin_object().member("kind", to_string(p.kind)).member("name", p.name).member("top_level", p.top_level);
  w.member("share", p.share).key("wall_ms");
  write_stats(w, p.wall_ms);
  write_stats_member(w, "gpu_ms", p.gpu_ms);
  if (p.kernels) {
    w.key("kernels");
    write_kernel_summary(w, *p.kernels);
  }
  if (p.counters) {
    w.key("counters");
    write_counter_summary(w, *p.counters);
  }
  w.key("baseline").begin_object().member("wall_ms", p.baseline.wall_ms);
  member_or_null(w, "gpu_ms", p.baseline.gpu_ms);
  member_or_null(w, "counter_busy_ms", p.baseline.counter_busy_ms);
  w.member("counter_steps", static_cast<std::uint64_t>(p.baseline.counter_steps));
  w.end_object().end_object();
}

inline void write_summary(json_writer& w, const run_summary& s) {
  w.begin_object();
  w.member("steps", static_cast<std::uint64_t>(s.steps))
      .member("warmup_steps", static_cast<std::uint64_t>(s.warmup_steps));
  w.key("step_ms");
  write_stats(w, s.step_ms);
  w.key("residual_ms");
  write_stats(w, s.residual_ms);
  w.member("tokens_per_s", s.tokens_per_s).member("samples_per_s", s.samples_per_s);
  w.key("phases").begin_array();
  for (const auto& p : s.phases) write_phase_summary(w, p);
  w.end_array();
  w.key("gpu").begin_object().member("status", s.gpu_status);
  if (s.counted_interval_us > 0) {  // how the records were seen as the counters count (agreement_on_recorded)
    w.key("records_as_counted").begin_object().member("sample_interval_us", s.counted_interval_us);
    w.member("launch_engine_us", s.launch_engine_us).end_object();
  }
  write_stats_member(w, "step_gpu_ms", s.step_gpu_ms);
  if (s.step_kernels) {
    w.key("step_kernels");
    write_kernel_summary(w, *s.step_kernels);
  }
  if (s.step_counters) {
    w.key("step_counters");
    write_counter_summary(w, *s.step_counters);
  }
  w.member("peak_allocated_bytes", s.peak_allocated_bytes).member("peak_reserved_bytes", s.peak_reserved_bytes);
  w.member("unattributed_kernels", s.unattributed_kernels).member("dropped_records", s.dropped_gpu_records);
  w.end_object();
  const auto& r = s.recording;
  w.key("recording").begin_object().member("recorded_steps", static_cast<std::uint64_t>(r.recorded_steps));
  w.member("recorded_step_ms", r.recorded_step_ms).member("untraced_step_ms", r.untraced_step_ms);
  w.member("cost", r.cost).member("paired_steps", static_cast<std::uint64_t>(r.paired_steps)).end_object();
  const auto& b = s.baseline;
  w.key("baseline").begin_object().member("steps", static_cast<std::uint64_t>(b.steps)).member("untraced", b.untraced);
  w.member("step_ms", b.step_ms).member("residual_ms", b.residual_ms);
  w.member("p10_ms", b.p10_ms).member("median_ms", b.median_ms).member("p90_ms", b.p90_ms).end_object();
  w.member("dropped_records", s.dropped_records).member("capped_records", s.capped_records);
  w.member("steps_with_lost_phases", s.steps_with_lost_phases);
  w.member("measured_steps_with_lost_phases", s.measured_steps_with_lost_phases);
  w.member("overlapping_steps", s.overlapping_steps);
  w.member("startup_ms", s.startup_ms);
  w.key("outside_steps");
  write_outside_steps(w, s.outside_steps);
  w.end_object();
}

}  // namespace detail

/// One run as a JSON object: name, config, summary, steps.
inline void write_run_json(detail::json_writer& w, const run_result& run) {
  w.begin_object().member("name", run.name);
  if (run.rank.distributed()) w.member("rank", run.rank.rank).member("world_size", run.rank.world_size);
  w.key("config").begin_object();
  for (const auto& [k, v] : run.config) w.member(k, v);
  w.end_object();
  w.key("summary");
  detail::write_summary(w, run.summary);
  w.key("timeline").begin_array();
  for (const auto& b : run.summary.timeline) {
    w.begin_object().member("first_step", b.first_step).member("steps", static_cast<std::uint64_t>(b.steps));
    w.member("mean_ms", b.mean_ms).member("min_ms", b.min_ms).member("max_ms", b.max_ms);
    if (b.memory_steps > 0)
      w.member("memory_steps", static_cast<std::uint64_t>(b.memory_steps)).member("allocated_bytes", b.allocated_bytes);
    w.member("untraced_steps", static_cast<std::uint64_t>(b.untraced_steps))
        .member("untraced_mean_ms", b.untraced_mean_ms);
    w.end_object();
  }
  w.end_array();
  w.key("verdicts").begin_array();
  for (const auto& v : judge_run(run.summary)) {
    w.begin_object().member("code", to_string(v.code));
    if (!v.phase.empty()) w.member("phase", v.phase);  // run-wide verdicts name no phase
    w.member("evidence", verdict_evidence(v)).member("advice", verdict_advice(v));
    w.member("steps", static_cast<std::uint64_t>(v.steps)).member("source", v.source);
    w.key("figures").begin_object();
    for (const auto& f : v.figures) w.member(f.name, f.value);
    w.end_object().end_object();
  }
  w.end_array();
  // Every step, when the run kept them all (profiler_options::keep_steps) and their list fits in
  // summary_step_list_max_bytes; otherwise the steps are in the JSONL only, and the summary says so
  // instead of carrying a partial list.
  std::string list;
  if (run.steps.size() == run.summary.steps) {
    detail::json_writer lw(list);
    lw.begin_array();
    for (std::size_t i = 0; i < run.steps.size(); ++i)
      detail::write_step(lw, run.steps[i], i < run.summary.warmup_steps);
    lw.end_array();
    if (list.size() > summary_step_list_max_bytes) list.clear();
  }
  w.member("steps_included", !list.empty());
  if (list.empty())
    w.key("steps").begin_array().end_array();
  else
    w.key("steps").raw_value(list);
  w.end_object();
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

/// One JSONL line for a finished step: {"run":..., "rank":... (when distributed), "step":..., ...}.
inline std::string step_jsonl_line(const std::string& run_name, const step_result& st, rank_identity rank = {}) {
  std::string out;
  detail::json_writer w(out);
  detail::write_step(w, st, std::nullopt, &run_name, rank);
  out += '\n';
  return out;
}

TRACEML_END_NAMESPACE
