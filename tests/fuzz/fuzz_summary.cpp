// Fuzz target: the JSON summary reader of the `traceml` command (tools/summary_reader.hpp), and what
// `traceml show` and `traceml compare` then do with the runs it accepts (the table of each run; two or
// more runs compared, with their table and JSON). Input: the file's text.
#include <cstdint>
#include <string>
#include <vector>

#include <traceml/analysis/compare.hpp>
#include <traceml/sinks/comparison_json.hpp>
#include <traceml/sinks/comparison_table.hpp>
#include <traceml/sinks/report_table.hpp>

#include "fuzz_check.hpp"
#include "summary_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  traceml::tools::saved_summary saved;
  try {
    saved = traceml::tools::parse_summary(text);
  } catch (const traceml::tools::summary_error& e) {
    fuzz::expect_names(e, "");  // the command prefixes the file's name; the message must say something
    return 0;
  }
  std::vector<traceml::compared_run> columns;
  for (const auto& run : saved.runs) {
    (void)traceml::format_table(run);
    columns.push_back(traceml::make_compared_run(run.name + "#" + std::to_string(columns.size()), {run}));
  }
  if (columns.size() >= 2) {
    const auto c = traceml::compare_runs(std::move(columns));
    (void)traceml::format_comparison_table(c.runs);
    (void)traceml::comparison_json(c);
  }
  return 0;
}
