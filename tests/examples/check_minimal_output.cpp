// Checks what examples/minimal printed and wrote: the top-level phases and the residual add up to
// the step time in every step, and the JSON summary parses and carries the numbers the table shows.
//   check_minimal_output <dir>    (dir holds table.txt, mlp_summary.json, mlp_steps.jsonl, mlp_trace.json)
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {
int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}
std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
/// As the table prints a time: three decimals in ms, or below 1 ms one decimal in us ("40.0us").
std::string ms3(double v) {
  char b[32];
  if (v != 0 && std::fabs(v) < 1)
    std::snprintf(b, sizeof b, "%.1fus", v * 1000);
  else
    std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_minimal_output <dir>\n");
    return 2;
  }
  const std::string dir = argv[1];
  const auto table = slurp(dir + "/table.txt");
  const auto doc = nlohmann::json::parse(slurp(dir + "/mlp_summary.json"));
  const auto& run = doc.at("runs").at(0);
  const auto& s = run.at("summary");

  // Every step: top-level phases + residual = step wall time (exactly, up to float rounding).
  for (const auto& st : run.at("steps")) {
    double sum = st.at("residual_ms").get<double>();
    for (const auto& p : st.at("phases"))
      if (p.at("top_level").get<bool>()) sum += p.at("wall_ms").get<double>();
    check(std::fabs(sum - st.at("wall_ms").get<double>()) < 1e-6,
          "phases + residual = step in step " + st.at("step").dump());
  }
  // The summary's means add up too, and the table shows them (rounded as it prints them).
  double means = s.at("residual_ms").at("mean").get<double>();
  for (const auto& p : s.at("phases")) {
    means += p.at("wall_ms").at("mean").get<double>();
    check(table.find(ms3(p.at("wall_ms").at("mean").get<double>())) != std::string::npos,
          "table shows the mean of " + p.at("name").get<std::string>());
    check(table.find(p.at("name").get<std::string>()) != std::string::npos,
          "table lists " + p.at("name").get<std::string>());
  }
  const double step_mean = s.at("step_ms").at("mean").get<double>();
  check(std::fabs(means - step_mean) < 1e-6 * step_mean, "phase means + residual mean = step mean");
  check(table.find(ms3(step_mean)) != std::string::npos, "table shows the step mean");
  check(table.find(ms3(s.at("step_ms").at("median").get<double>())) != std::string::npos,
        "table shows the step median");
  for (const char* phase : {"dataloader", "forward", "backward", "optimizer"}) {
    bool found = false;
    for (const auto& p : s.at("phases")) found |= p.at("name") == phase;
    check(found, std::string("summary has phase ") + phase);
  }
  // One JSONL line per step, each a JSON object; the trace parses.
  std::ifstream jsonl(dir + "/mlp_steps.jsonl");
  std::size_t lines = 0;
  for (std::string line; std::getline(jsonl, line); ++lines)
    check(nlohmann::json::parse(line).at("run") == "mlp", "JSONL line");
  check(lines == run.at("steps").size(), "one JSONL line per step");
  check(nlohmann::json::parse(slurp(dir + "/mlp_trace.json")).at("traceEvents").size() > lines, "trace has events");
  if (failures == 0) std::printf("minimal example output: consistent (%zu steps)\n", lines);
  return failures == 0 ? 0 : 1;
}
