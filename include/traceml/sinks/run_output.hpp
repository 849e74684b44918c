// traceml: a run's outputs as a list. finish() hands the finished run to each output in turn: the
// built-in files that profiler_options names (JSON summary, Chrome trace, HTML report), then the
// program's own (profiler_options::outputs). A new sink is a function of a finished_run; nothing in
// the profiler changes for it (docs/architecture.md: "A new sink").
//
//   opts.outputs.push_back({"steps.csv", [](const traceml::finished_run& run) {
//     return write_my_csv("steps.csv", run.result);  // false: not written (say why)
//   }});
//
// The JSONL is not here: it is written line by line as steps end, not at finish().
#pragma once
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/sinks/html_report.hpp"
#include "traceml/sinks/json_summary.hpp"
#include "traceml/sinks/run_trace.hpp"
#include "traceml/thread_identity.hpp"

TRACEML_BEGIN_NAMESPACE

/// What an output is handed at finish(): the run's result (summary, steps, config) and what only
/// the profiler holds. Valid during the write only.
struct finished_run {
  const run_result& result;
  /// The kept steps, spans and activities of the Chrome trace; null when the run kept none (no
  /// trace_path).
  const detail::run_trace* trace = nullptr;
  /// The recording threads' names, for the trace's thread rows.
  std::vector<thread_identity> threads;
};

/// One output: where it goes (a path, or any name the messages can use) and how it is written.
/// `write` returns false when the output was not written, having said why; a throw is said for it.
struct run_output {
  std::string target;
  std::function<bool(const finished_run&)> write;
};

/// The JSON summary at `path` (sinks/json_summary.hpp).
inline run_output json_summary_output(std::string path) {
  std::string target = path;
  return {std::move(target),
          [path = std::move(path)](const finished_run& run) { return write_json_summary(path, {run.result}); }};
}

/// The self-contained HTML report at `path` (sinks/html_report.hpp).
inline run_output html_report_output(std::string path) {
  std::string target = path;
  return {std::move(target), [path = std::move(path)](const finished_run& run) {
            return write_html_report(path, {run.result}, "traceml: " + run.result.name);
          }};
}

/// The Chrome/Perfetto trace at `path`, of what the run kept for it (sinks/run_trace.hpp).
inline run_output chrome_trace_output(std::string path) {
  std::string target = path;
  return {std::move(target), [path = std::move(path)](const finished_run& run) {
            if (!run.trace) {
              report_once("trace-not-kept", "the Chrome trace '" + path +
                                                "' was not written: the run kept no trace data "
                                                "(profiler_options::trace_path was empty)");
              return false;
            }
            return run.trace->write(path, run.result.name, run.result.rank, run.threads);
          }};
}

namespace detail {

/// The outputs finish() writes, in order: the built-in files named by paths (empty: off), then the
/// program's own.
inline std::vector<run_output> outputs_to_write(const std::string& trace_path, const std::string& json_path,
                                                const std::string& html_path, const std::vector<run_output>& own) {
  std::vector<run_output> all;
  if (!trace_path.empty()) all.push_back(chrome_trace_output(trace_path));
  if (!json_path.empty()) all.push_back(json_summary_output(json_path));
  if (!html_path.empty()) all.push_back(html_report_output(html_path));
  all.insert(all.end(), own.begin(), own.end());
  return all;
}

/// Writes each output; the targets of those not written go to `failed`. A writer that throws or is
/// missing is said once, by target; the others go on.
inline void write_outputs(const std::vector<run_output>& outputs, const finished_run& run,
                          std::vector<std::string>& failed) {
  for (const run_output& out : outputs) {
    bool written = false;
    if (!out.write) {
      report_once("output-no-writer:" + out.target,
                  "the output '" + out.target + "' was not written: it has no writer");
    } else {
      try {
        written = out.write(run);
      } catch (const std::exception& e) {
        report_once("output-threw:" + out.target,
                    "the output '" + out.target + "' was not written: its writer threw: " + e.what());
      } catch (...) {
        report_once("output-threw:" + out.target,
                    "the output '" + out.target + "' was not written: its writer threw (unknown exception)");
      }
    }
    if (!written) failed.push_back(out.target);
  }
}

}  // namespace detail
TRACEML_END_NAMESPACE
