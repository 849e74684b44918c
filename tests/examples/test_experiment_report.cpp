// How the accumulation experiment ends (examples/qwen3/experiment_report.hpp): the names of its
// files, the output folder, the summary and report written (or each failure named), and what
// decides the exit status. The experiment itself is run by qwen3_accumulation_cli.sh.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "experiment_report.hpp"
#include "mixed_run.hpp"

namespace fs = std::filesystem;

namespace {
qwen3::schedule_result ran(const std::string& name) {
  traceml_test::mixed_run_shape shape;
  shape.name = name;
  return {name, {traceml_test::mixed_run(shape)}, ""};
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("traceml_test_" + name);
  fs::remove_all(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("what decides the experiment's exit status", "[experiment]") {
  const qwen3::schedule_result oom{"1x4", {}, "OOM: CUDA out of memory"};
  const qwen3::schedule_result broken{
      "2x2", {}, "weights/model.safetensors: header length 7021991845529153390 is implausible"};
  SECTION("a schedule out of memory is a result: nothing to report") {
    CHECK(qwen3::experiment_problems({oom, ran("2x2"), ran("4x1")}, {}).empty());
  }
  SECTION("a schedule that failed for another reason is named") {
    CHECK(qwen3::experiment_problems({oom, broken, ran("4x1")}, {}) ==
          std::vector<std::string>{"1 of 3 schedules failed for a reason other than running out of memory: 2x2"});
  }
  SECTION("every output not written is named") {
    CHECK(qwen3::experiment_problems({ran("1x4")}, {"out/a.json", "out/b.html"}) ==
          std::vector<std::string>{"2 outputs could not be written (the reasons are above): out/a.json, out/b.html"});
  }
}

TEST_CASE("each run keeps its own per-step file, each repeat too", "[experiment]") {
  CHECK(qwen3::files::steps("1x4", 0, 1) == "accumulation_steps_1x4.jsonl");
  CHECK(qwen3::files::steps("1x4", 0, 3) == "accumulation_steps_1x4_repeat1.jsonl");
  CHECK(qwen3::files::steps("1x4", 2, 3) == "accumulation_steps_1x4_repeat3.jsonl");
  CHECK(qwen3::files::trace("2x2") == "trace_2x2.json");
}

TEST_CASE("the output folder is created with its parents, or the reason is given", "[experiment]") {
  const fs::path root = fresh_dir("experiment_out");
  qwen3::create_output_folder((root / "a" / "b").string());
  CHECK(fs::is_directory(root / "a" / "b"));
  qwen3::create_output_folder((root / "a" / "b").string());  // already there: fine
  std::ofstream((root / "file").string()) << "x";
  CHECK_THROWS_WITH(qwen3::create_output_folder((root / "file" / "out").string()),
                    "cannot create the output folder '" + (root / "file" / "out").string() + "': Not a directory");
  CHECK_THROWS_WITH(qwen3::create_output_folder((root / "file").string()),
                    Catch::StartsWith("cannot create the output folder '" + (root / "file").string() + "': "));
  fs::remove_all(root);
}

TEST_CASE("the experiment's summary and report are written, or each failure is named", "[experiment]") {
  traceml::reset_diagnostics(/*quiet=*/true);
  const std::vector<qwen3::schedule_result> results{ran("1x4"), {"2x2", {}, "OOM: CUDA out of memory"}, ran("4x1")};
  const std::vector<traceml::run_result> runs{results[0].runs[0], results[2].runs[0]};
  const fs::path dir = fresh_dir("experiment_report");
  fs::create_directories(dir);
  const qwen3::experiment_report report{dir.string(), "traceml: test", 14.6e12, 790e12};
  SECTION("written") {
    CHECK(qwen3::write_experiment_report(report, results, runs).empty());
    const auto doc = nlohmann::json::parse(slurp(dir / "accumulation_summary.json"));
    CHECK(doc["runs"].size() == 2);
    REQUIRE(doc["comparison"]["runs"].size() == 3);
    CHECK(doc["comparison"]["runs"][2]["failed"] == true);
    CHECK(slurp(dir / "accumulation_report.html").find("<title>traceml: test</title>") != std::string::npos);
  }
  SECTION("a full disk: both named, each with its reason") {
    fs::create_symlink("/dev/full", dir / "accumulation_summary.json");
    fs::create_symlink("/dev/full", dir / "accumulation_report.html");
    CHECK(qwen3::write_experiment_report(report, results, runs) ==
          std::vector<std::string>{(dir / "accumulation_report.html").string(),
                                   (dir / "accumulation_summary.json").string()});
    CHECK(traceml::diagnostic_messages() ==
          std::vector<std::string>{"cannot write HTML report to '" + (dir / "accumulation_report.html").string() +
                                       "': No space left on device",
                                   "cannot write JSON summary to '" + (dir / "accumulation_summary.json").string() +
                                       "': No space left on device"});
  }
  fs::remove_all(dir);
}
