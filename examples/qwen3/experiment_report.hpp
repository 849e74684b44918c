// qwen3/experiment_report.hpp: how the accumulation experiment ends. Its output files and their
// names, the comparison printed and written (accumulation_summary.json, accumulation_report.html),
// and what the run could not do, which decides the exit status. Called at the normal end and when
// a signal stops the experiment (then with the runs finished so far). No LibTorch here: unit-tested
// in tests/examples/test_comparison.cpp.
//
//   qwen3::create_output_folder(out);                          // parents too; throws with the reason
//   auto failed = qwen3::write_experiment_report(report, results, runs);
//   auto problems = qwen3::experiment_problems(results, failed);  // empty: exit status 0
#pragma once
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>
#include <traceml/analysis/sweep_result.hpp>
#include <traceml/detail/output_file.hpp>
#include <traceml/sinks/html_report.hpp>
#include <traceml/sinks/json_summary.hpp>
#include <traceml/sinks/sweep_report.hpp>

#include "comparison.hpp"

namespace qwen3 {

/// The experiment's files inside its output folder.
namespace files {
inline constexpr const char* summary = "accumulation_summary.json";
inline constexpr const char* report = "accumulation_report.html";
/// One JSONL per run: accumulation_steps_<schedule>.jsonl, and with --repeats above 1 one file per
/// repeat, accumulation_steps_<schedule>_repeat<k>.jsonl (k from 1; the lines' "run" is <schedule>#k).
inline std::string steps(const std::string& schedule, int repeat, int repeats) {
  return "accumulation_steps_" + schedule + (repeats > 1 ? "_repeat" + std::to_string(repeat + 1) : "") + ".jsonl";
}
/// The Chrome trace of a schedule's first repeat.
inline std::string trace(const std::string& schedule) { return "trace_" + schedule + ".json"; }
}  // namespace files

/// Creates `dir` and its parents where missing; throws std::runtime_error naming the folder and the
/// reason when it cannot, or when `dir` is something other than a folder.
inline void create_output_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec && !std::filesystem::is_directory(dir, ec) && !ec) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) throw std::runtime_error("cannot create the output folder '" + dir + "': " + ec.message());
}

/// What the report needs besides the runs.
struct experiment_report {
  std::string out_dir;    ///< the output folder (exists)
  std::string title;      ///< the HTML report's title
  double step_flops = 0;  ///< model FLOPs of one optimizer step, for MFU
  double peak_flops = 0;  ///< the device's peak; 0 = unknown, MFU not shown
};

/// Prints the comparison of `results` (stdout) and writes the summary JSON (the runs, schema in
/// docs/json-schema.md, plus the "comparison") and the HTML report of `runs` into out_dir. Returns
/// the paths that could not be written; each was said once on stderr with its reason.
/// `training`: the trainer's per-run facts (losses, fp16's skipped steps), the summary's "training";
/// `swept`: a sweep's result (--sweep), printed after the comparison, its JSON "sweep" and an HTML section.
inline std::vector<std::string> write_experiment_report(const experiment_report& r,
                                                        const std::vector<schedule_result>& results,
                                                        const std::vector<traceml::run_result>& runs,
                                                        const nlohmann::json& training = nlohmann::json::object(),
                                                        const traceml::sweep_result* swept = nullptr) {
  const auto compared = compare_schedules(results, r.step_flops, r.peak_flops);
  std::printf("\n%s", format_schedules(compared).c_str());
  // With two candidates the sweep's recommendation explains the same pair: said once, below.
  if (!swept || swept->recommendation.explanation != compared.compared.explanation)
    std::printf("\n%s", compared.compared.explanation.c_str());
  if (r.peak_flops > 0)
    std::printf("MFU: %.1f TFLOP per step at a %.0f TFLOP/s peak\n", r.step_flops / 1e12, r.peak_flops / 1e12);
  if (swept) std::printf("\n%s", traceml::format_sweep(*swept).c_str());

  std::vector<std::string> failed;
  const std::string html = r.out_dir + "/" + files::report;
  if (traceml::write_html_report(html, runs, r.title, compared.compared.explanation,
                                 swept ? traceml::html_sweep_section(*swept) : ""))
    std::printf("wrote %s\n", html.c_str());
  else
    failed.push_back(html);
  auto doc = nlohmann::json::parse(traceml::json_summary(runs));
  doc["comparison"] = comparison_json(compared);
  doc["training"] = training;
  if (swept) doc["sweep"] = nlohmann::json::parse(traceml::sweep_json(*swept));
  const std::string summary = r.out_dir + "/" + files::summary;
  if (traceml::detail::write_whole_file(summary, "JSON summary", doc.dump(1) + "\n"))
    std::printf("wrote %s\n", summary.c_str());
  else
    failed.push_back(summary);
  std::fflush(stdout);
  return failed;
}

/// What the experiment could not do, one line each; empty when it did what was asked (exit status
/// 0). A schedule that ran out of memory is a result, not a problem; a schedule that failed for any
/// other reason (weights that do not load, ...) is one, and so is every output not written.
inline std::vector<std::string> experiment_problems(const std::vector<schedule_result>& results,
                                                    const std::vector<std::string>& failed_outputs) {
  std::vector<std::string> out;
  std::string names;
  std::size_t failed = 0;
  for (const auto& s : results) {
    if (!s.failed() || s.out_of_memory()) continue;
    names += (failed++ ? ", " : "") + s.name;
  }
  if (failed)
    out.push_back(std::to_string(failed) + " of " + std::to_string(results.size()) + " schedule" +
                  (results.size() == 1 ? "" : "s") + " failed for a reason other than running out of memory: " + names);
  if (!failed_outputs.empty()) {
    std::string paths;
    for (const auto& p : failed_outputs) paths += (paths.empty() ? "" : ", ") + p;
    out.push_back(std::to_string(failed_outputs.size()) + " output" + (failed_outputs.size() == 1 ? "" : "s") +
                  " could not be written (the reasons are above): " + paths);
  }
  return out;
}

}  // namespace qwen3
