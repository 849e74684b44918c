// Outputs parsed back: JSON summary, step JSONL, Chrome trace; failures reported once.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "test_helpers.hpp"

using namespace traceml;
using nlohmann::json;

namespace {
run_result sample_run() {
  std::vector<step_result> steps;
  for (int i = 0; i < 4; ++i) {
    step_result st;
    st.step = i;
    st.wall_ms = 10 + i;
    st.residual_ms = 0.5;
    st.microbatches = 2;
    st.phases.push_back({phase_kind::forward, "forward", 4 + i * 0.5, 2, true});
    st.phases.push_back({phase_kind::user, "say \"hi\"\n", 1, 1, false});
    steps.push_back(st);
  }
  run_result r;
  r.name = "1x4";
  r.config = {{"schedule", "1x4"}, {"dtype", "bf16"}};
  r.steps = steps;
  r.summary = summarize_run(steps, 1);
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("the JSON summary parses back and carries the summary's numbers", "[sinks][json]") {
  const auto run = sample_run();
  const json doc = json::parse(json_summary({run, run}));
  CHECK(doc["schema"] == "traceml.summary/1");
  REQUIRE(doc["runs"].size() == 2);
  const auto& r = doc["runs"][0];
  CHECK(r["name"] == "1x4");
  CHECK(r["config"]["dtype"] == "bf16");
  CHECK(r["summary"]["steps"] == 4);
  CHECK(r["summary"]["warmup_steps"] == 1);
  CHECK(r["summary"]["step_ms"]["mean"].get<double>() == Approx(run.summary.step_ms.mean));
  CHECK(r["summary"]["step_ms"]["p90"].get<double>() == Approx(run.summary.step_ms.p90));
  CHECK(r["summary"]["phases"][0]["name"] == "forward");
  CHECK(r["summary"]["phases"][0]["wall_ms"]["median"].get<double>() == Approx(run.summary.phases[0].wall_ms.median));
  CHECK(r["summary"]["phases"][1]["name"] == "say \"hi\"\n");  // escaping survives the round trip
  CHECK(r["summary"]["phases"][1]["top_level"] == false);
  REQUIRE(r["steps"].size() == 4);
  CHECK(r["steps"][0]["warmup"] == true);
  CHECK(r["steps"][1]["warmup"] == false);
  CHECK(r["steps"][3]["wall_ms"].get<double>() == Approx(13));
  CHECK(r["steps"][3]["phases"][0]["count"] == 2);
  CHECK_FALSE(r["steps"][0].contains("gpu"));
}

TEST_CASE("a step JSONL line is one self-contained JSON object", "[sinks][jsonl]") {
  const auto run = sample_run();
  const auto line = step_jsonl_line("2x2", run.steps[2]);
  CHECK(line.back() == '\n');
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  const json j = json::parse(line);
  CHECK(j["run"] == "2x2");
  CHECK(j["step"] == 2);
  CHECK(j["wall_ms"].get<double>() == Approx(12));
  CHECK(j["phases"].size() == 2);
}

TEST_CASE("the Chrome trace parses and has CPU spans, GPU tracks and launch flows", "[sinks][trace]") {
  std::vector<span_record> spans(2);
  spans[0] = {1'000'000, 9'000'000, "step", 0, -1, 0, phase_kind::step, 0};
  spans[1] = {2'000'000, 5'000'000, "forward", 0, 0, 0, phase_kind::forward, 0};
  std::vector<gpu_activity> gpu(3);
  gpu[0] = {gpu_activity::type::kernel, "gemm", 3'000'000, 4'000'000, 0, 7, 0, 0, 0, phase_kind::forward, "forward"};
  gpu[1] = {gpu_activity::type::kernel, "relu", 4'000'000, 4'500'000, 0, 7, 0, 0, 0, phase_kind::forward, "forward"};
  gpu[2] = {gpu_activity::type::memcpy, "memcpy HtoD", 1'500'000, 1'600'000, 0, 8, 4096, -1, -1, phase_kind::user, ""};
  const json doc = json::parse(chrome_trace("run", spans, gpu));
  int cpu_x = 0, gpu_x = 0, flows_s = 0, flows_f = 0;
  bool gpu_process_named = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == 1) ++cpu_x;
    if (e["ph"] == "X" && e["pid"] == 100) ++gpu_x;
    if (e["ph"] == "s") ++flows_s;
    if (e["ph"] == "f") ++flows_f;
    if (e["ph"] == "M" && e["pid"] == 100 && e["name"] == "process_name") gpu_process_named = true;
    if (e["ph"] == "X" && e["name"] == "forward") {
      CHECK(e["ts"].get<double>() == Approx(1000));  // µs after the first record (the step at 1 ms)
      CHECK(e["dur"].get<double>() == Approx(3000));
      CHECK(e["args"]["microbatch"] == 0);
    }
    if (e["ph"] == "X" && e["name"] == "memcpy HtoD") CHECK(e["args"]["bytes"] == 4096);
  }
  CHECK(cpu_x == 2);
  CHECK(gpu_x == 3);
  CHECK(flows_s == 1);  // one arrow per (step, micro-batch, phase), to its first kernel
  CHECK(flows_f == 1);
  CHECK(gpu_process_named);
}

TEST_CASE("an output that cannot be written says so once and returns false", "[sinks][errors]") {
  reset_diagnostics(true);
  const auto run = sample_run();
  SECTION("missing directory") {
    CHECK_FALSE(write_json_summary("/nonexistent-traceml-dir/summary.json", {run}));
    CHECK_FALSE(write_json_summary("/nonexistent-traceml-dir/summary.json", {run}));
    const auto msgs = diagnostic_messages();
    REQUIRE(msgs.size() == 1);
    CHECK(msgs[0].find("/nonexistent-traceml-dir/summary.json") != std::string::npos);
    CHECK(msgs[0].find("No such file or directory") != std::string::npos);
  }
  SECTION("a full disk") {
    CHECK_FALSE(write_chrome_trace("/dev/full", "run", {}, {}));
    const auto msgs = diagnostic_messages();
    REQUIRE(msgs.size() == 1);
    CHECK(msgs[0].find("No space left on device") != std::string::npos);
  }
}

TEST_CASE("write_json_summary writes the file it was asked to", "[sinks][json]") {
  const auto path = traceml_test::temp_path("summary.json");
  REQUIRE(write_json_summary(path, {sample_run()}));
  CHECK(json::parse(slurp(path))["runs"][0]["name"] == "1x4");
  std::remove(path.c_str());
}
