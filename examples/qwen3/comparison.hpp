// qwen3/comparison.hpp: what the accumulation experiment adds to traceml's comparison of runs
// (traceml/analysis/compare.hpp): one column per schedule, the model FLOPs utilisation of each, and the
// schedules that failed (out of GPU memory), which have no run to compare but are a result. No
// LibTorch here, so it is unit-tested with hand-made runs.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <traceml/analysis/compare.hpp>
#include <traceml/sinks/comparison_json.hpp>
#include <traceml/sinks/comparison_table.hpp>

namespace qwen3 {

/// One schedule of the experiment: its runs (one per repeat), or why it has none.
struct schedule_result {
  std::string name;  ///< "1x4"
  std::vector<traceml::run_result> runs;
  std::string error;  ///< empty when it ran; "OOM: ..." when it ran out of memory
  bool failed() const { return !error.empty(); }
  bool out_of_memory() const { return error.rfind("OOM", 0) == 0; }  ///< a result, not a failure of the run
};

/// The experiment's comparison: traceml's over the schedules that ran, plus MFU and the failures.
struct schedule_comparison {
  traceml::comparison compared;            ///< one column per schedule that ran, in schedule order
  std::vector<std::optional<double>> mfu;  ///< per column: model FLOPs / (median step x peak)
  std::vector<schedule_result> failed;     ///< name and error only
};

/// Model FLOPs utilisation of a median step; nullopt when the peak is unknown (0).
inline std::optional<double> model_flops_utilisation(double median_ms, double flops_per_step, double peak_flops) {
  if (peak_flops <= 0 || median_ms <= 0) return std::nullopt;
  return flops_per_step / (median_ms / 1e3) / peak_flops;
}

/// Compares the schedules that ran; flops_per_step and peak_flops give the MFU (peak 0 = unknown).
inline schedule_comparison compare_schedules(const std::vector<schedule_result>& schedules, double flops_per_step,
                                             double peak_flops) {
  schedule_comparison out;
  std::vector<traceml::compared_run> columns;
  for (const auto& s : schedules) {
    if (s.failed()) {
      out.failed.push_back({s.name, {}, s.error});
      continue;
    }
    columns.push_back(traceml::make_compared_run(s.name, s.runs));
  }
  out.compared = traceml::compare_runs(std::move(columns));
  for (const auto& c : out.compared.runs)
    out.mfu.push_back(model_flops_utilisation(c.median_ms, flops_per_step, peak_flops));
  return out;
}

/// The result table (traceml's, with an MFU line) and one line per failed schedule.
inline std::string format_schedules(const schedule_comparison& c) {
  traceml::comparison_line mfu{"MFU % (median step)", {}};
  for (const auto& m : c.mfu) mfu.cells.push_back(m ? traceml::detail::fixed_text(*m * 100, 1) : "-");
  std::string out = traceml::format_comparison_table(c.compared.runs, {mfu});
  for (const auto& f : c.failed)
    out += "schedule " + f.name + ": " + (f.out_of_memory() ? "out of GPU memory (OOM)" : "failed") + ": " + f.error +
           "\n";
  return out;
}

/// traceml's comparison object, each run with its `mfu`, and each failed schedule as a run
/// {name, failed: true, error} (the "comparison" member of the experiment's JSON summary).
inline nlohmann::json comparison_json(const schedule_comparison& c) {
  auto j = nlohmann::json::parse(traceml::comparison_json(c.compared));
  for (std::size_t i = 0; i < c.mfu.size(); ++i)
    if (c.mfu[i]) j["runs"][i]["mfu"] = *c.mfu[i];
  for (const auto& f : c.failed) j["runs"].push_back({{"name", f.name}, {"failed", true}, {"error", f.error}});
  return j;
}

}  // namespace qwen3
