// traceml tools: reads a saved JSON summary (schema "traceml.summary/3", docs/json-schema.md) back
// into run_results, the exact inverse of sinks/json_summary.hpp: writing what was read gives the
// same text. A "traceml.summary/2" document (written before hardware counters) reads too, without
// counter figures. The `traceml` command uses it to show, compare and report saved runs with the same
// sinks the profiler uses. Needs nlohmann-json, so it stays outside the core.
//
//   auto saved = traceml::tools::read_summary_file("mlp_summary.json");   // throws summary_error
//   for (const auto& run : saved.runs) std::fputs(traceml::format_table(run).c_str(), stdout);
//
// Every failure is one summary_error whose message names the problem and where it is
// ("runs[0].summary.step_ms: missing \"median\"", "parse error at line 3, column 5: ..."), the
// refusals of input_file.hpp included: not a regular file, over max_summary_bytes, nested deeper than
// max_json_depth.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>
#include <traceml/analysis/summary.hpp>
#include <traceml/sinks/json_summary.hpp>

#include "input_file.hpp"

namespace traceml {
namespace tools {

/// A summary that cannot be read: the message says what and where, in one line.
class summary_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a summary file holds.
struct saved_summary {
  std::string traceml_version;
  std::vector<run_result> runs;
};

namespace detail {
// Ordered, so that `config` keeps the order it was written in.
using json = nlohmann::ordered_json;

/// The schema before hardware counters: the same layout less every counter field, so it reads as a
/// run without counters (counter objects absent, baseline counter_busy_ms -1).
inline constexpr const char* schema_without_counters = "traceml.summary/2";

/// Phase names of GPU facts are `const char*` (the profiler's interned names): read names get
/// storage that lives as long as the program, like the profiler's.
inline const char* intern_name(const std::string& name) {
  static std::mutex mu;
  static std::unordered_set<std::string> names;  // node-based: the strings never move
  std::lock_guard<std::mutex> lock(mu);
  return names.insert(name).first->c_str();
}

inline const char* type_name(const json& j) {
  return j.is_null()      ? "null"
         : j.is_boolean() ? "a boolean"
         : j.is_number()  ? "a number"
         : j.is_string()  ? "a string"
         : j.is_array()   ? "an array"
                          : "an object";
}

/// One JSON object being read, with the path that error messages name.
class object_reader {
 public:
  object_reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) throw summary_error(where() + "expected an object, found " + type_name(j_));
  }

  const std::string& path() const noexcept { return path_; }
  bool has(const char* key) const { return j_.contains(key); }
  std::string at(const char* key) const { return path_.empty() ? std::string(key) : path_ + "." + key; }

  const json& get(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end()) throw summary_error(where() + "missing \"" + key + "\"");
    return *it;
  }
  object_reader object(const char* key) const { return object_reader(get(key), at(key)); }
  const json& array(const char* key) const {
    const json& v = get(key);
    if (!v.is_array()) throw summary_error(at(key) + ": expected an array, found " + type_name(v));
    return v;
  }
  /// A number; null reads as NaN (the writer writes non-finite numbers as null).
  double number(const char* key) const {
    const json& v = get(key);
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!v.is_number()) throw summary_error(at(key) + ": expected a number, found " + type_name(v));
    return v.get<double>();
  }
  std::int64_t integer(const char* key) const {
    const json& v = get(key);
    if (!v.is_number_integer()) throw summary_error(at(key) + ": expected an integer, found " + type_name(v));
    if (v.is_number_unsigned() &&
        v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      throw summary_error(at(key) + ": integer out of range");
    return v.get<std::int64_t>();
  }
  std::uint64_t count(const char* key) const {
    const json& v = get(key);
    if (!v.is_number_unsigned())
      throw summary_error(at(key) + ": expected a count (an integer >= 0), found " + type_name(v));
    return v.get<std::uint64_t>();
  }
  std::size_t size(const char* key) const { return static_cast<std::size_t>(count(key)); }
  bool flag(const char* key) const {
    const json& v = get(key);
    if (!v.is_boolean()) throw summary_error(at(key) + ": expected true or false, found " + type_name(v));
    return v.get<bool>();
  }
  std::string text(const char* key) const {
    const json& v = get(key);
    if (!v.is_string()) throw summary_error(at(key) + ": expected a string, found " + type_name(v));
    return v.get<std::string>();
  }
  phase_kind kind(const char* key) const {
    const std::string name = text(key);
    const phase_kind k = phase_kind_from_name(name.c_str());
    if (name != to_string(k)) throw summary_error(at(key) + ": unknown phase kind \"" + name + "\"");
    return k;
  }
  /// A time in milliseconds, which cannot be negative (a file edited or written by something else:
  /// "runs[0].summary.step_ms.median: -5 is impossible for a time"); null reads as NaN.
  double time_ms(const char* key) const {
    const double v = number(key);
    if (v < 0)
      throw summary_error(at(key) + ": " + get(key).dump() + " is impossible for a time (milliseconds, at least 0)");
    return v;
  }
  /// A share of a whole, in [0, 1] (the tables show it as 0..100%); null reads as NaN.
  double share(const char* key) const {
    const double v = number(key);
    if (v < 0 || v > 1 + 1e-9)
      throw summary_error(at(key) + ": " + get(key).dump() + " is impossible for a share (0 to 1, shown as 0..100%)");
    return v;
  }
  /// A share that may not have been measured: null reads back as -1.
  double measured_share(const char* key) const { return get(key).is_null() ? -1 : share(key); }
  /// Milliseconds back to the nanoseconds they were written from (exact: the writer's text
  /// round-trips the double, and ns / 1e6 * 1e6 rounds back to ns); a negative time is refused.
  std::int64_t ns(const char* key) const { return std::llround(time_ms(key) * 1e6); }
  /// A figure that may not have been measured: the writer's null reads back as -1.
  double measured(const char* key) const { return get(key).is_null() ? -1 : number(key); }

  /// Calls f(object_reader) for each element of the array `key`.
  template <class F>
  void each(const char* key, F&& f) const {
    const json& a = array(key);
    for (std::size_t i = 0; i < a.size(); ++i) f(object_reader(a[i], at(key) + "[" + std::to_string(i) + "]"));
  }

 private:
  std::string where() const { return path_.empty() ? std::string() : path_ + ": "; }
  const json& j_;
  std::string path_;
};

/// Statistics of a time (milliseconds): none of them can be negative (`times` false: a difference
/// of times, the residual, which rounding may take below 0).
inline summary_stats read_stats(const object_reader& r, bool times = true) {
  const auto value = [&](const char* key) { return times ? r.time_ms(key) : r.number(key); };
  summary_stats s;
  s.count = r.size("count");
  s.median = value("median");
  s.mean = value("mean");
  s.min = value("min");
  s.max = value("max");
  s.p10 = value("p10");
  s.p90 = value("p90");
  s.stddev = r.time_ms("stddev");
  s.quantile_error = r.number("quantile_error");
  return s;
}

inline std::optional<summary_stats> read_optional_stats(const object_reader& r, const char* key) {
  if (!r.has(key)) return std::nullopt;
  return read_stats(r.object(key));
}

/// The share-weighted sum a written share came from: share x time, which divides back to the same
/// share (checked, and nudged by the last bit where the product's rounding would not), so that the
/// share written again is the share read.
inline double sum_for_share(double share, std::int64_t over_ns) {
  double sum = share * static_cast<double>(over_ns);
  for (int nudges = 0; nudges < 4 && share_of(sum, over_ns) != share; ++nudges)
    sum = std::nextafter(sum, share_of(sum, over_ns) < share ? std::numeric_limits<double>::infinity()
                                                             : -std::numeric_limits<double>::infinity());
  return sum;
}

/// Inverse of write_counter_facts. Only shares were written, so a tensor or DRAM share is taken over
/// the whole covered time (the GPU either has that counter on every sample or on none).
inline counter_facts read_counter_facts(const object_reader& r) {
  counter_facts c;
  c.covered_ns = r.ns("covered_ms");
  if (c.covered_ns <= 0) throw summary_error(r.at("covered_ms") + ": counters written, but no time covered");
  c.samples = static_cast<std::uint32_t>(r.count("samples"));
  c.busy_ns = sum_for_share(r.share("busy_share"), c.covered_ns);
  c.sm_active_ns = sum_for_share(r.share("sm_active_share"), c.covered_ns);
  if (r.has("tensor_share")) {
    c.tensor_covered_ns = c.covered_ns;
    c.tensor_ns = sum_for_share(r.share("tensor_share"), c.covered_ns);
  }
  if (r.has("dram_share")) {
    c.dram_covered_ns = c.covered_ns;
    c.dram_ns = sum_for_share(r.share("dram_share"), c.covered_ns);
  }
  return c;
}

/// Inverse of write_gpu_facts: fields absent from an unrecorded step keep their "not measured" values.
inline gpu_facts read_gpu_facts(const object_reader& r, bool kernels_measured) {
  gpu_facts f;
  if (r.has("gpu_span_ms")) f.span_ns = r.ns("gpu_span_ms");
  if (r.has("counters")) f.counters = read_counter_facts(r.object("counters"));
  if (!kernels_measured) return f;
  if (r.has("window_ms")) {
    f.window_ns = r.ns("window_ms");
    f.busy_ns = r.ns("busy_ms");
    f.idle_ns = r.ns("idle_ms");
  }
  f.kernel_ns = r.ns("kernel_ms");
  f.kernel_count = r.count("kernel_count");
  f.memcpy_ns = r.ns("memcpy_ms");
  f.memcpy_bytes = r.count("memcpy_bytes");
  f.memset_ns = r.ns("memset_ms");
  f.memset_bytes = r.count("memset_bytes");
  return f;
}

inline kernel_summary read_kernel_summary(const object_reader& r) {
  kernel_summary k;
  k.steps = r.size("steps");
  k.wall_ms = read_stats(r.object("wall_ms"));
  k.window_ms = read_stats(r.object("window_ms"));
  k.kernel_ms = read_stats(r.object("kernel_ms"));
  k.busy_ms = read_stats(r.object("busy_ms"));
  k.idle_ms = read_stats(r.object("idle_ms"));
  k.busy_share = r.share("busy_share");
  k.idle_share = r.share("idle_share");
  k.kernels_per_step = r.number("kernels_per_step");
  k.kernels_per_microbatch = r.number("kernels_per_microbatch");
  k.mean_kernel_us = r.number("mean_kernel_us");
  if (r.has("hidden_share")) k.hidden_share = r.share("hidden_share");  // written since schema 3 gained it
  if (r.has("idle_split")) {  // written since schema 3 gained it, with "launches" and the copies
    const object_reader i = r.object("idle_split");
    k.idle_host_ms = i.time_ms("host_ms");
    k.idle_kernel_gap_ms = i.time_ms("kernel_gap_ms");
    k.idle_other_ms = i.time_ms("other_ms");
    const object_reader l = r.object("launches");
    k.median_kernel_us = l.number("median_kernel_us");
    if (!(k.median_kernel_us >= 0))
      throw summary_error(l.at("median_kernel_us") + ": " + l.get("median_kernel_us").dump() +
                          " is impossible for a time (microseconds, at least 0)");
    k.short_kernel_share = l.share("short_share");
    k.copy_ms = r.time_ms("copy_ms");
    k.copy_share = r.share("copy_share");
  }
  r.each("top_kernels", [&](const object_reader& t) {
    k.top_kernels.push_back(kernel_figure{t.text("name"), t.count("launches"), t.number("launches_per_step"),
                                          t.number("ms_per_step"), t.number("mean_us")});
  });
  return k;
}

inline counter_summary read_counter_summary(const object_reader& r) {
  counter_summary c;
  c.steps = r.size("steps");
  c.window_ms = read_stats(r.object("window_ms"));
  c.busy_ms = read_stats(r.object("busy_ms"));
  c.idle_ms = read_stats(r.object("idle_ms"));
  c.busy_share = r.share("busy_share");
  c.sm_active_share = r.share("sm_active_share");
  c.tensor_share = r.measured_share("tensor_share");
  c.dram_share = r.measured_share("dram_share");
  c.coverage = r.share("coverage");
  c.samples_per_step = r.number("samples_per_step");
  const auto a = r.object("agreement_on_recorded");
  c.recorded_steps = a.size("steps");
  c.recorded_counter_busy_share = a.measured_share("counters_busy_share");
  c.recorded_kernel_busy_share = a.measured_share("kernel_records_busy_share");
  // Absent from summaries written before the records were modelled as counted: not modelled.
  if (a.has("kernel_records_as_counted_share"))
    c.recorded_counted_share = a.measured_share("kernel_records_as_counted_share");
  return c;
}

inline step_gpu_report read_step_gpu(const object_reader& r, std::int32_t step) {
  step_gpu_report g;
  g.step = step;
  g.kernels_measured = r.flag("kernels_measured");
  g.total = read_gpu_facts(r, g.kernels_measured);
  g.peak_allocated_bytes = r.integer("peak_allocated_bytes");
  g.peak_reserved_bytes = r.integer("peak_reserved_bytes");
  g.unattributed_kernels = r.count("unattributed_kernels");
  g.dropped_records = r.count("dropped_records");
  r.each("phases", [&](const object_reader& p) {
    phase_gpu_facts f;
    f.kind = p.kind("kind");
    f.name = intern_name(p.text("name"));
    f.microbatch = static_cast<std::int32_t>(p.integer("microbatch"));
    f.facts = read_gpu_facts(p, g.kernels_measured);
    if (g.kernels_measured)
      p.each("kernels", [&](const object_reader& k) {
        // mean_us is derived (total / count): not read, recomputed when written.
        f.kernels.push_back(kernel_stat{k.text("name"), k.count("count"), k.ns("total_ms")});
      });
    g.phases.push_back(std::move(f));
  });
  return g;
}

inline step_result read_step(const object_reader& r) {
  step_result st;
  st.step = static_cast<std::int32_t>(r.integer("step"));
  st.wall_ms = r.time_ms("wall_ms");
  st.residual_ms = r.number("residual_ms");
  st.microbatches = static_cast<int>(r.integer("microbatches"));
  r.each("phases", [&](const object_reader& p) {
    st.phases.push_back(phase_time{p.kind("kind"), p.text("name"), p.time_ms("wall_ms"),
                                   static_cast<int>(p.integer("count")), p.flag("top_level")});
  });
  if (r.has("gpu")) st.gpu = read_step_gpu(r.object("gpu"), st.step);
  return st;
}

/// `counter_fields`: whether the document's schema has counter fields (not a "traceml.summary/2" one).
inline phase_summary read_phase_summary(const object_reader& r, bool counter_fields) {
  phase_summary p;
  p.kind = r.kind("kind");
  p.name = r.text("name");
  p.top_level = r.flag("top_level");
  p.share = r.number("share");  // of the step's mean: over 1 for a phase of several threads at once
  if (p.share < 0)
    throw summary_error(r.at("share") + ": " + r.get("share").dump() + " is impossible for a share (at least 0)");
  p.wall_ms = read_stats(r.object("wall_ms"));
  p.gpu_ms = read_optional_stats(r, "gpu_ms");
  if (r.has("kernels")) p.kernels = read_kernel_summary(r.object("kernels"));
  if (r.has("counters")) p.counters = read_counter_summary(r.object("counters"));
  const auto b = r.object("baseline");
  p.baseline.wall_ms = b.number("wall_ms");
  p.baseline.gpu_ms = b.measured("gpu_ms");
  if (counter_fields) {
    p.baseline.counter_busy_ms = b.measured("counter_busy_ms");
    p.baseline.counter_steps = b.size("counter_steps");
  }
  return p;
}

inline step_gap_figures read_gap_figures(const object_reader& g) {
  step_gap_figures f;
  f.count = g.count("count");
  f.total_ms = g.time_ms("total_ms");
  f.largest_ms = g.time_ms("largest_ms");
  f.largest_after_step = static_cast<std::int32_t>(g.integer("largest_after_step"));
  if (f.largest_ms > f.total_ms * (1 + 1e-9))
    throw summary_error(g.at("largest_ms") + ": the largest gap is longer than all the gaps together");
  return f;
}

/// The summary's outside_steps (written since traceml.summary/3's later versions: absent, none).
inline outside_steps_summary read_outside_steps(const object_reader& o) {
  outside_steps_summary s;
  o.each("phases", [&](const object_reader& p) {
    outside_phase ph;
    ph.kind = p.kind("kind");
    ph.name = p.text("name");
    ph.top_level = p.flag("top_level");
    ph.count = p.count("count");
    ph.total_ms = p.time_ms("total_ms");
    ph.mean_ms = p.time_ms("mean_ms");
    ph.max_ms = p.time_ms("max_ms");
    s.phases.push_back(std::move(ph));
  });
  s.phases_ms = o.time_ms("phases_ms");
  s.names_left_out = o.count("names_left_out");
  s.gaps = read_gap_figures(o.object("gaps"));
  s.epoch_gaps = read_gap_figures(o.object("epoch_gaps"));
  if (s.epoch_gaps.count > s.gaps.count) throw summary_error(o.at("epoch_gaps") + ": more epoch gaps than gaps");
  s.epoch_marks = o.count("epoch_marks");
  s.steps_span_ms = o.time_ms("steps_span_ms");
  s.gap_share = o.share("gap_share");
  return s;
}

inline run_summary read_run_summary(const object_reader& r, bool counter_fields) {
  run_summary s;
  s.steps = r.size("steps");
  s.warmup_steps = r.size("warmup_steps");
  if (s.warmup_steps > s.steps) throw summary_error(r.at("warmup_steps") + ": more warm-up steps than steps");
  s.step_ms = read_stats(r.object("step_ms"));
  s.residual_ms = read_stats(r.object("residual_ms"), false);
  s.tokens_per_s = r.number("tokens_per_s");
  s.samples_per_s = r.number("samples_per_s");
  r.each("phases", [&](const object_reader& p) { s.phases.push_back(read_phase_summary(p, counter_fields)); });
  const auto g = r.object("gpu");
  s.gpu_status = g.text("status");
  if (g.has("records_as_counted")) {
    const auto m = g.object("records_as_counted");
    s.counted_interval_us = m.number("sample_interval_us");
    s.launch_engine_us = m.number("launch_engine_us");
  }
  s.step_gpu_ms = read_optional_stats(g, "step_gpu_ms");
  if (g.has("step_kernels")) s.step_kernels = read_kernel_summary(g.object("step_kernels"));
  if (g.has("step_counters")) s.step_counters = read_counter_summary(g.object("step_counters"));
  s.peak_allocated_bytes = g.integer("peak_allocated_bytes");
  s.peak_reserved_bytes = g.integer("peak_reserved_bytes");
  s.unattributed_kernels = g.count("unattributed_kernels");
  s.dropped_gpu_records = g.count("dropped_records");
  const auto rec = r.object("recording");
  s.recording.recorded_steps = rec.size("recorded_steps");
  s.recording.recorded_step_ms = rec.number("recorded_step_ms");
  s.recording.untraced_step_ms = rec.number("untraced_step_ms");
  if (!rec.get("cost").is_null()) s.recording.cost = rec.number("cost");
  s.recording.paired_steps = rec.size("paired_steps");
  const auto b = r.object("baseline");
  s.baseline.steps = b.size("steps");
  s.baseline.untraced = b.flag("untraced");
  s.baseline.step_ms = b.number("step_ms");
  s.baseline.residual_ms = b.number("residual_ms");
  if (b.has("median_ms")) {  // the baseline's quantiles, added within /3
    s.baseline.p10_ms = b.time_ms("p10_ms");
    s.baseline.median_ms = b.time_ms("median_ms");
    s.baseline.p90_ms = b.time_ms("p90_ms");
  }
  s.dropped_records = r.count("dropped_records");
  // Added within /3: a document written before them had none of either.
  if (r.has("capped_records")) s.capped_records = r.count("capped_records");
  if (r.has("overlapping_steps")) s.overlapping_steps = r.count("overlapping_steps");
  if (r.has("startup_ms")) s.startup_ms = r.number("startup_ms");
  if (r.has("outside_steps")) s.outside_steps = read_outside_steps(r.object("outside_steps"));
  return s;
}

inline run_result read_run(const object_reader& r, bool counter_fields) {
  run_result run;
  run.name = r.text("name");
  if (r.has("rank") || r.has("world_size")) {  // a rank of a data-parallel run
    const std::uint64_t rank = r.count("rank"), world = r.count("world_size");
    if (rank >= world || world > 1000000)
      throw summary_error(r.at("rank") + ": rank " + std::to_string(rank) + " of a world of " + std::to_string(world) +
                          " (need rank < world_size <= 1000000)");
    run.rank = rank_identity{static_cast<int>(rank), static_cast<int>(world)};
  }
  const json& config = r.get("config");
  if (!config.is_object()) throw summary_error(r.at("config") + ": expected an object, found " + type_name(config));
  for (const auto& [key, value] : config.items()) {
    if (!value.is_string())
      throw summary_error(r.at("config") + "." + key + ": expected a string, found " + type_name(value));
    run.config.emplace_back(key, value.get<std::string>());
  }
  run.summary = read_run_summary(r.object("summary"), counter_fields);
  r.each("timeline", [&](const object_reader& b) {
    run.summary.timeline.push_back(step_bucket{static_cast<std::int32_t>(b.integer("first_step")),
                                               static_cast<std::uint32_t>(b.count("steps")), b.time_ms("mean_ms"),
                                               b.time_ms("min_ms"), b.time_ms("max_ms")});
    if (b.has("memory_steps")) {  // steps with a memory sample, and their mean peak allocated bytes
      run.summary.timeline.back().memory_steps = static_cast<std::uint32_t>(b.count("memory_steps"));
      const double bytes = b.number("allocated_bytes");
      if (!(bytes >= 0))
        throw summary_error(b.at("allocated_bytes") + ": " + b.get("allocated_bytes").dump() +
                            " is impossible for a memory size (bytes, at least 0)");
      run.summary.timeline.back().allocated_bytes = bytes;
    }
    if (b.has("untraced_steps")) {  // added within /3; without it, the verdicts read mean_ms
      auto& bucket = run.summary.timeline.back();
      bucket.untraced_steps = static_cast<std::uint32_t>(b.count("untraced_steps"));
      bucket.untraced_mean_ms = b.time_ms("untraced_mean_ms");
      if (bucket.untraced_steps > bucket.steps)
        throw summary_error(b.at("untraced_steps") + ": " + std::to_string(bucket.untraced_steps) +
                            " untraced steps in a bucket of " + std::to_string(bucket.steps));
    }
    // Not written: the run's total wall time, which the timeline holds bucket by bucket.
    run.summary.total_wall_ms += run.summary.timeline.back().mean_ms * run.summary.timeline.back().steps;
  });
  const bool included = r.flag("steps_included");
  r.each("steps", [&](const object_reader& st) { run.steps.push_back(read_step(st)); });
  if (included && run.steps.size() != run.summary.steps)
    throw summary_error(r.at("steps") + ": " + std::to_string(run.steps.size()) + " steps, but steps_included and " +
                        std::to_string(run.summary.steps) + " in the summary");
  if (!included && !run.steps.empty())
    throw summary_error(r.at("steps") + ": steps listed, but steps_included is false");
  return run;
}
}  // namespace detail

/// Reads a summary document (the text of a file json_summary() wrote). Members the schema does not
/// name (the accumulation experiment's `comparison`) are ignored.
inline saved_summary parse_summary(const std::string& text) {
  if (const std::size_t at = too_deep_at(text); at != std::string::npos) {
    const std::size_t line_start = text.rfind('\n', at);  // npos + 1 == 0: the first line
    throw summary_error(too_deep_text() + " (line " +
                        std::to_string(1 + std::count(text.begin(), text.begin() + at, '\n')) + ", column " +
                        std::to_string(at - (line_start + 1) + 1) + ")");
  }
  detail::json doc;
  try {
    doc = detail::json::parse(text);
  } catch (const detail::json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." without the tag; also
    // out_of_range ("number overflow parsing '2e808'"), which a number beyond a double throws.
    std::string what = e.what();
    const auto tag_end = what.find("] ");
    throw summary_error(tag_end == std::string::npos ? what : what.substr(tag_end + 2));
  }
  if (!doc.is_object() || !doc.contains("schema"))
    throw summary_error(
        std::string("not a traceml summary (") +
        (doc.is_object() ? "no \"schema\" member" : std::string(detail::type_name(doc)) + ", not an object") +
        ", expected \"" + json_schema + "\")");
  const auto& schema = doc["schema"];
  const std::string schema_name = schema.is_string() ? schema.get<std::string>() : std::string();
  if (schema_name != json_schema && schema_name != detail::schema_without_counters)
    throw summary_error(std::string("not a traceml summary (schema ") + schema.dump() + ", expected \"" + json_schema +
                        "\")");
  // Paths name a run by its index: "runs[1].summary.step_ms: missing \"median\"".
  const detail::object_reader top(doc, "");
  saved_summary out;
  out.traceml_version = top.text("traceml_version");
  const bool counter_fields = schema_name == json_schema;
  top.each("runs", [&](const detail::object_reader& r) { out.runs.push_back(detail::read_run(r, counter_fields)); });
  return out;
}

/// Reads a summary file; a file that cannot be opened or read says why (the system's reason, or
/// input_file.hpp's: not a regular file, over max_summary_bytes).
inline saved_summary read_summary_file(const std::string& path) {
  std::string text;
  try {
    text = input_file(path, max_summary_bytes, "a JSON summary").read_all();
  } catch (const file_error& e) {
    throw summary_error(e.what());
  }
  return parse_summary(text);
}

}  // namespace tools
}  // namespace traceml
