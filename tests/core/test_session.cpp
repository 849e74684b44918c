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

/// Runs a command line through the shell, stdout and stderr together.
run_output run_command(const std::string& cmd) {
  run_output out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.text.append(buf.data(), n);
  const int rc = pclose(p);
  out.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

/// Runs the phase-only trainer with `env` (VAR=value words, or "-u VAR" to unset) in front.
run_output run_trainer(const std::string& env) {
  return run_command("env -u TRACEML_OUT -u TRACEML_RUN_NAME " + env + " '" TRACEML_TEST_TRAINER "' 2>&1");
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

/// The base name of the trainers' console logs, in a folder of their own (removed with the test's
/// other temporary paths); the tests add a suffix per process.
std::string log_file_in(const fs::path& logs, const std::string& stem) {
  fs::create_directories(logs);
  return (logs / stem).string();
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

// ---- Safe to leave on: what the session survives (docs/reliability.md, "The TRACEML_OUT session") ----

namespace {

const std::string trainer_name = fs::path(TRACEML_TEST_TRAINER).filename().string();

std::size_t lines_of(const fs::path& p) { return count_of(read_file(p), "\n"); }

nlohmann::json summary_run(const fs::path& p) { return nlohmann::json::parse(read_file(p))["runs"][0]; }

/// Runs a bash command line (the trainer is $T in it; bash counts ulimit -f in KiB); its status.
run_output run_shell(const std::string& script) {
  return run_command(
      "env -u TRACEML_OUT -u TRACEML_RUN_NAME -u RANK -u WORLD_SIZE -u LOCAL_RANK T='" TRACEML_TEST_TRAINER
      "' bash -c '" +
      script + "' 2>&1");
}

}  // namespace

TEST_CASE("A full disk at exit: each failed output said once, the others written, exit status 74") {
  const fs::path dir = fresh_dir("session_full");
  // RLIMIT_FSIZE of 10 KiB with SIGXFSZ ignored: a write beyond it fails with EFBIG, as on a full
  // disk. Run "t"'s JSONL (~4 KB) and summary (~7.5 KB) fit; the trace and the HTML (~13 KB) do not.
  const run_output r =
      run_shell("ulimit -f 10; trap \"\" XFSZ; TRACEML_RUN_NAME=t TRACEML_OUT=" + dir.string() + " exec \"$T\"");
  INFO(r.text);
  CHECK(r.status == 74);  // the documented value (docs/reliability.md)
  CHECK(count_of(r.text, "cannot write Chrome trace") == 1);
  CHECK(count_of(r.text, "cannot write HTML report") == 1);
  CHECK(count_of(r.text, "exit status 74") == 1);
  CHECK(count_of(r.text, "forward") >= 1);  // the table is still printed
  // What could not be written whole is not left behind as if it were an output.
  CHECK_FALSE(fs::exists(dir / "t_trace.json"));
  CHECK_FALSE(fs::exists(dir / "t_report.html"));
  CHECK(lines_of(dir / "t_steps.jsonl") == 12);
  CHECK(summary_run(dir / "t_summary.json")["summary"]["steps"] == 12);
}

TEST_CASE("The output folder removed mid-run: no crash, the failures said, exit status 74") {
  const fs::path dir = fresh_dir("session_removed");
  const run_output r = run_trainer("TRACEML_OUT='" + dir.string() + "' TRAINER_REMOVE_OUT_AT=4");
  INFO(r.text);
  CHECK(r.status == 74);
  CHECK(count_of(r.text, "cannot write JSON summary") == 1);
  CHECK(count_of(r.text, "cannot write Chrome trace") == 1);
  CHECK(count_of(r.text, "cannot write HTML report") == 1);
  CHECK(count_of(r.text, "No such file or directory") == 3);
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("A program that exits non-zero keeps its own status when an output fails") {
  const fs::path dir = fresh_dir("session_own_status");
  const run_output r =
      run_shell("ulimit -f 10; trap \"\" XFSZ; TRACEML_RUN_NAME=t TRAINER_EXIT_STATUS=5 TRACEML_OUT=" + dir.string() +
                " exec \"$T\"");
  INFO(r.text);
  CHECK(r.status == 5);
  CHECK(count_of(r.text, "cannot write Chrome trace") == 1);
  CHECK(count_of(r.text, "exit status 74") == 0);
}

TEST_CASE("TRACEML_RUN_NAME never writes outside TRACEML_OUT, its files take a plain name") {
  const fs::path dir = fresh_dir("session_hostile_name");
  for (const char* name : {"a/b", "../x"}) {
    const run_output r = run_trainer("TRACEML_OUT='" + dir.string() + "' TRACEML_RUN_NAME='" + std::string(name) + "'");
    INFO(r.text);
    CHECK(r.status == 0);
    CHECK(count_of(r.text, "cannot write") == 0);
    CHECK(count_of(r.text, "names its files") == 1);
  }
  CHECK(fs::exists(dir / "a_b_summary.json"));
  CHECK(fs::exists(dir / "_._x_summary.json"));
  CHECK_FALSE(fs::exists(dir.parent_path() / "x_summary.json"));
  CHECK(summary_run(dir / "a_b_summary.json")["name"] == "a/b");  // the run keeps its name
}

TEST_CASE("Ranks started on one TRACEML_OUT write their own files, and rank 0 says how to merge them") {
  const fs::path dir = fresh_dir("session_ranks");
  const std::string out = "TRACEML_OUT=" + dir.string();
  const std::string log = log_file_in(fresh_dir("session_ranks_logs"), "rank");
  const run_output r =
      run_shell("RANK=0 WORLD_SIZE=2 " + out + " \"$T\" >" + log + "0 2>&1 & RANK=1 WORLD_SIZE=2 " + out + " \"$T\" >" +
                log + "1 2>&1; s1=$?; wait $!; s0=$?; cat " + log + "0 " + log + "1; exit $((s0 + s1))");
  INFO(r.text);
  REQUIRE(r.status == 0);
  CHECK(count_of(r.text, "traceml ranks " + dir.string() + "/" + trainer_name + "_rank*_steps.jsonl") == 1);
  for (int rank : {0, 1}) {
    const std::string base = trainer_name + "_rank" + std::to_string(rank);
    const std::string jsonl = read_file(dir / (base + "_steps.jsonl"));
    CHECK(count_of(jsonl, "\n") == 12);
    std::istringstream lines(jsonl);
    for (std::string line; std::getline(lines, line);) {
      const auto j = nlohmann::json::parse(line);  // never torn
      CHECK(j["rank"] == rank);
    }
    const auto run = summary_run(dir / (base + "_summary.json"));
    CHECK(run["rank"] == rank);
    CHECK(run["summary"]["steps"] == 12);
  }
  CHECK_FALSE(fs::exists(dir / (trainer_name + "_steps.jsonl")));
}

TEST_CASE("Two runs on one folder never share a file: the second takes a suffix and says so") {
  const fs::path dir = fresh_dir("session_two_runs");
  const std::string out = "TRACEML_OUT=" + dir.string();
  const std::string log = log_file_in(fresh_dir("session_two_runs_logs"), "run");
  const run_output r = run_shell(out + " \"$T\" >" + log + "a 2>&1 & " + out + " \"$T\" >" + log +
                                 "b 2>&1; s1=$?; wait $!; s0=$?; cat " + log + "a " + log + "b; exit $((s0 + s1))");
  INFO(r.text);
  REQUIRE(r.status == 0);
  CHECK(count_of(r.text, "belongs to another run") == 1);
  for (const std::string& base : {trainer_name, trainer_name + "-2"}) {
    const std::string jsonl = read_file(dir / (base + "_steps.jsonl"));
    CHECK(count_of(jsonl, "\n") == 12);
    std::istringstream lines(jsonl);
    for (std::string line; std::getline(lines, line);) CHECK_NOTHROW(nlohmann::json::parse(line));
    CHECK(summary_run(dir / (base + "_summary.json"))["summary"]["steps"] == 12);
  }
  // A third run keeps both earlier ones.
  const auto first = read_file(dir / (trainer_name + "_summary.json"));
  const run_output third = run_trainer(out);
  CHECK(count_of(third.text, trainer_name + "-3_*") >= 1);
  CHECK(read_file(dir / (trainer_name + "_summary.json")) == first);
}

TEST_CASE("SIGINT or SIGTERM mid-step: the session writes every output of the finished steps") {
  const auto [sig, status] =
      GENERATE(std::make_pair(std::string("SIGINT"), 130), std::make_pair(std::string("SIGTERM"), 143));
  const fs::path dir = fresh_dir("session_signal_" + sig);
  const run_output r =
      run_shell("TRAINER_SIGNAL_AT=5:" + sig + " TRACEML_OUT=" + dir.string() + " \"$T\"; echo status=$?");
  INFO(r.text);
  CHECK(count_of(r.text, "status=" + std::to_string(status)) == 1);
  CHECK(count_of(r.text, sig + ": run '" + trainer_name + "' stopped after 6 steps") == 1);
  CHECK(lines_of(dir / (trainer_name + "_steps.jsonl")) == 6);  // step 5 goes on to its end
  const auto run = summary_run(dir / (trainer_name + "_summary.json"));
  CHECK(run["config"]["stopped_by"] == sig);
  CHECK(run["summary"]["steps"] == 6);
  CHECK(nlohmann::json::parse(read_file(dir / (trainer_name + "_trace.json")))["traceEvents"].size() > 6 * 6);
  CHECK(read_file(dir / (trainer_name + "_report.html")).find("</html>") != std::string::npos);
}

TEST_CASE("SIGTERM from another process ends a long session with its outputs written") {
  const fs::path dir = fresh_dir("session_kill");
  const std::string log = log_file_in(fresh_dir("session_kill_logs"), "trainer");
  const run_output r = run_shell("TRAINER_STEPS=100000000 TRACEML_OUT=" + dir.string() + " \"$T\" >" + log +
                                 " 2>&1 & pid=$!; "
                                 "while [ ! -s " +
                                 dir.string() + "/" + trainer_name +
                                 "_steps.jsonl ]; do sleep 0.05; done; "
                                 "sleep 0.3; kill -TERM $pid; wait $pid; echo status=$?; cat " +
                                 log);
  INFO(r.text);
  CHECK(count_of(r.text, "status=143") == 1);
  const std::size_t steps = lines_of(dir / (trainer_name + "_steps.jsonl"));
  CHECK(steps >= 1);
  const auto run = summary_run(dir / (trainer_name + "_summary.json"));
  CHECK(run["config"]["stopped_by"] == "SIGTERM");
  CHECK(run["summary"]["steps"] == steps);  // the summary holds exactly the steps the JSONL has
}

TEST_CASE("A program with its own SIGINT/SIGTERM handler keeps it, and the session says how the report is kept") {
  const fs::path dir = fresh_dir("session_own_handler");
  const run_output r =
      run_trainer("TRACEML_OUT='" + dir.string() + "' TRAINER_OWN_HANDLER=1 TRAINER_SIGNAL_AT=5:SIGTERM");
  INFO(r.text);
  CHECK(r.status == 0);  // the program's handler decided: it stopped after the step and returned
  CHECK(count_of(r.text, "handles SIGINT/SIGTERM itself") == 1);
  const auto run = summary_run(dir / (trainer_name + "_summary.json"));
  CHECK(run["summary"]["steps"] == 6);
  CHECK(run["config"].count("stopped_by") == 0);
}
