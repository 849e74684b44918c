// The TRACEML_OUT session: a program that includes only <traceml/phase.hpp> (phase_only_trainer.cpp)
// writes the full report with TRACEML_OUT=<dir>, says once how to turn it on without, and says why
// when the folder cannot be made. Plus, in this process, the notice of a build without the session.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

struct run_output {
  int status = -1;
  std::string text;  // stdout and stderr together
};

/// Runs the phase-only trainer with `env` (VAR=value words, or "-u VAR" to unset) in front.
run_output run_trainer(const std::string& env) {
  const std::string cmd = "env -u TRACEML_OUT -u TRACEML_RUN_NAME " + env + " '" TRACEML_TEST_TRAINER "' 2>&1";
  run_output out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.text.append(buf.data(), n);
  const int rc = pclose(p);
  out.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = traceml_test::temp_path(name);
  fs::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("TRACEML_OUT makes a phase.hpp-only program write every output") {
  const fs::path dir = fresh_dir("session_out") / "nested" / "out";  // created, parents included
  const run_output r = run_trainer("TRACEML_OUT='" + dir.string() + "'");
  INFO(r.text);
  REQUIRE(r.status == 0);
  CHECK(count_of(r.text, "collecting into") == 1);
  CHECK(count_of(r.text, "nothing is collected") == 0);

  const std::string run = fs::path(TRACEML_TEST_TRAINER).filename().string();  // the program's name
  const nlohmann::json summary = nlohmann::json::parse(read_file(dir / (run + "_summary.json")));
  REQUIRE(summary["runs"].size() == 1);
  const auto& r0 = summary["runs"][0];
  CHECK(r0["name"] == run);
  CHECK(r0["config"]["started_by"] == "TRACEML_OUT");
  CHECK(r0["summary"]["steps"] == 12);
  CHECK(r0["summary"]["warmup_steps"] == 5);
  CHECK(r0["summary"]["step_ms"]["count"] == 7);
  std::set<std::string> phases;
  for (const auto& p : r0["summary"]["phases"]) phases.insert(p["name"].get<std::string>());
  CHECK(phases.count("forward") == 1);
  CHECK(phases.count("backward") == 1);
  CHECK(phases.count("optimizer") == 1);
  for (const auto& p : r0["summary"]["phases"]) {
    if (p["name"] != "forward") continue;
    // Two micro-batches of a 200 us spin each: at least 0.4 ms of forward per step.
    CHECK(p["wall_ms"]["mean"].get<double>() >= 0.4);
  }
  CHECK(count_of(r.text, "forward") >= 1);  // the table, printed at exit

  const std::string jsonl = read_file(dir / (run + "_steps.jsonl"));
  CHECK(count_of(jsonl, "\n") == 12);
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir / (run + "_trace.json")));
  CHECK(trace["traceEvents"].size() > 12 * 6);  // a step, two micro-batches, five phases each
  CHECK(read_file(dir / (run + "_report.html")).find("<html") != std::string::npos);
}

TEST_CASE("TRACEML_RUN_NAME names the session's files") {
  const fs::path dir = fresh_dir("session_named");
  const run_output r = run_trainer("TRACEML_OUT='" + dir.string() + "' TRACEML_RUN_NAME=mytrainer");
  INFO(r.text);
  REQUIRE(r.status == 0);
  CHECK(fs::exists(dir / "mytrainer_summary.json"));
  CHECK(fs::exists(dir / "mytrainer_report.html"));
}

TEST_CASE("Without TRACEML_OUT the program says once how to turn collection on, and writes nothing") {
  const run_output r = run_trainer("");
  INFO(r.text);
  REQUIRE(r.status == 0);
  CHECK(count_of(r.text, "nothing is collected") == 1);  // 12 steps, one notice
  CHECK(count_of(r.text, "TRACEML_OUT=<dir>") == 1);
  CHECK(count_of(r.text, "collecting into") == 0);
}

TEST_CASE("A TRACEML_OUT folder that cannot be made is said, and the program runs on") {
  const fs::path dir = fresh_dir("session_blocked");
  fs::create_directories(dir);
  std::ofstream(dir / "a_file") << "not a folder";
  const run_output r = run_trainer("TRACEML_OUT='" + (dir / "a_file" / "out").string() + "'");
  INFO(r.text);
  REQUIRE(r.status == 0);
  CHECK(count_of(r.text, "cannot create the folder") == 1);
  CHECK(count_of(r.text, "nothing is collected") == 1);
}

TEST_CASE("A build without the session says how to get it, once") {
  traceml_test::reset_recorder();
  unsetenv("TRACEML_OUT");
  auto& a = traceml::detail::activation();
  const auto starter = a.starter.exchange(nullptr);  // as if session.hpp were not compiled in
  a.decided.store(false);
  a.notice.store(nullptr);
  for (int i = 0; i < 3; ++i) {
    TRACEML_STEP();
  }
  a.starter.store(starter);
  // Compared as text: a string literal named in two translation units may have two addresses (it
  // does under AddressSanitizer, which keeps equal literals apart).
  REQUIRE(a.notice.load() != nullptr);
  REQUIRE(std::string(a.notice.load()) == traceml::detail::notice_no_session);  // TRACEML_OUT is unset in tests
  CHECK(std::string(a.notice.load()).find("traceml::traceml") != std::string::npos);
  CHECK(traceml::diagnostic_messages().empty());  // said by the recorder, not the session
  traceml_test::drain();
}

TEST_CASE("With the session and without TRACEML_OUT, the notice is printed, not a diagnostic") {
  traceml_test::reset_recorder();
  unsetenv("TRACEML_OUT");
  auto& a = traceml::detail::activation();
  REQUIRE(a.starter.load() != nullptr);  // this test program links traceml::traceml
  a.decided.store(false);
  a.notice.store(nullptr);
  { TRACEML_STEP(); }
  REQUIRE(a.notice.load() != nullptr);
  CHECK(std::string(a.notice.load()) == traceml::detail::notice_session_idle);  // as text: see above
  CHECK(traceml::diagnostic_messages().empty());  // tests that count diagnostics see only their own
  traceml_test::drain();
}
