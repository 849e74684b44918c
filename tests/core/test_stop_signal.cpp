// SIGINT and SIGTERM with traceml: the guard in this process (noted, nested, given back, never
// swallowed, an ignored signal left ignored), and profiler_options::finish_on_signal in a child
// process (signal_trainer.cpp): the outputs of the finished steps written, then the end by the same
// signal, status 128 + signo to a shell.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

volatile std::sig_atomic_t own_handler_calls = 0;
void own_handler(int) { own_handler_calls = own_handler_calls + 1; }

/// Installs `handler` for `sig` for the scope's life, then puts back what was there.
class scoped_disposition {
 public:
  scoped_disposition(int sig, void (*handler)(int)) : sig_(sig) {
    struct sigaction sa = {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(sig, &sa, &previous_) == 0);
  }
  ~scoped_disposition() { sigaction(sig_, &previous_, nullptr); }

 private:
  int sig_;
  struct sigaction previous_ = {};
};

void (*current_handler(int sig))(int) {
  struct sigaction sa = {};
  sigaction(sig, nullptr, &sa);
  return sa.sa_handler;
}

struct child_result {
  int wait_status = 0;
  std::string output;  // stdout and stderr
};

/// Runs signal_trainer OUT_DIR MODE and waits for it.
child_result run_trainer(const fs::path& dir, const std::string& mode) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string log = (dir / "log.txt").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // The child starts with SIGINT and SIGTERM at their defaults, whatever this process has.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  std::string exe = TRACEML_TEST_SIGNAL_TRAINER, out = dir.string();
  char* argv[] = {exe.data(), out.data(), const_cast<char*>(mode.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  REQUIRE(rc == 0);
  child_result r;
  REQUIRE(waitpid(pid, &r.wait_status, 0) == pid);
  std::ifstream in(log);
  std::stringstream s;
  s << in.rdbuf();
  r.output = s.str();
  // Under a sanitizer a child that ends by a signal keeps its status: its report is looked for here.
  CHECK(r.output.find("Sanitizer") == std::string::npos);
  CHECK(r.output.find("runtime error") == std::string::npos);
  return r;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t line_count(const fs::path& p) {
  std::ifstream in(p);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

}  // namespace

TEST_CASE("a stop-signal guard notes the signal instead of ending the process, and gives it back", "[signals]") {
  const int sig = GENERATE(SIGINT, SIGTERM);
  own_handler_calls = 0;
  scoped_disposition own(sig, own_handler);
  {
    traceml::stop_signal_guard guard;
    CHECK(traceml::pending_stop_signal() == 0);
    std::raise(sig);
    CHECK(traceml::pending_stop_signal() == sig);
    CHECK(own_handler_calls == 0);  // caught by the guard's handler
    SECTION("nested guards: the inner one going changes nothing") {
      { traceml::stop_signal_guard inner; }
      CHECK(traceml::pending_stop_signal() == sig);
      CHECK(own_handler_calls == 0);
      CHECK(current_handler(sig) != own_handler);
    }
  }
  // The last guard restored the program's handler and delivered the signal nobody acted on.
  CHECK(current_handler(sig) == own_handler);
  CHECK(own_handler_calls == 1);
  CHECK(traceml::pending_stop_signal() == 0);
}

TEST_CASE("a signal the program ignores stays ignored under a guard", "[signals]") {
  scoped_disposition ignored(SIGINT, SIG_IGN);
  const auto term_before = current_handler(SIGTERM);  // Catch2's own, during a test
  {
    traceml::stop_signal_guard guard;
    CHECK(current_handler(SIGINT) == SIG_IGN);
    std::raise(SIGINT);
    CHECK(traceml::pending_stop_signal() == 0);
    CHECK(current_handler(SIGTERM) != term_before);  // SIGTERM was not ignored: the guard has it
  }
  CHECK(current_handler(SIGINT) == SIG_IGN);
  CHECK(current_handler(SIGTERM) == term_before);
}

TEST_CASE("finish_on_signal: the finished steps' outputs are written, then the process ends by the signal",
          "[signals][profiler]") {
  const auto [mode, sig] =
      GENERATE(std::make_pair(std::string("int"), SIGINT), std::make_pair(std::string("term"), SIGTERM));
  const fs::path dir = traceml_test::temp_path("signal_" + mode);
  const auto r = run_trainer(dir, mode);
  INFO(r.output);
  REQUIRE(WIFSIGNALED(r.wait_status));
  CHECK(WTERMSIG(r.wait_status) == sig);  // a shell reports 128 + signo: 130, 143

  // The signal came in step 3 (the fourth step): that step ended, then the run finished.
  const json summary = json::parse(slurp(dir / "signal_trainer_summary.json"));
  REQUIRE(summary["runs"].size() == 1);
  const auto& run = summary["runs"][0];
  CHECK(run["summary"]["steps"] == 4);
  CHECK(run["summary"]["warmup_steps"] == 1);
  CHECK(run["summary"]["step_ms"]["count"] == 3);
  CHECK(run["config"]["stopped_by"] == (sig == SIGINT ? "SIGINT" : "SIGTERM"));
  CHECK(run["steps"].size() == 4);
  CHECK(line_count(dir / "signal_trainer_steps.jsonl") == 4);
  const json trace = json::parse(slurp(dir / "signal_trainer_trace.json"));
  int steps_in_trace = 0;
  for (const auto& e : trace["traceEvents"]) steps_in_trace += e["ph"] == "X" && e["name"] == "step";
  CHECK(steps_in_trace == 4);
  const std::string html = slurp(dir / "signal_trainer_report.html");
  CHECK(html.find("Phases of signal_trainer") != std::string::npos);
  CHECK(html.rfind("</html>") != std::string::npos);
  CHECK(slurp(dir / "hook.txt") == "steps=4 signal=" + std::to_string(sig) + "\n");
  CHECK(r.output.find(std::string("traceml: ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                      ": run 'signal_trainer' stopped after 4 steps; the outputs of those steps are written\n") !=
        std::string::npos);
}

TEST_CASE("finish_on_signal: a signal after the last step is acted on at the end of finish()", "[signals][profiler]") {
  const fs::path dir = traceml_test::temp_path("signal_after");
  const auto r = run_trainer(dir, "after");
  INFO(r.output);
  REQUIRE(WIFSIGNALED(r.wait_status));
  CHECK(WTERMSIG(r.wait_status) == SIGINT);
  const json summary = json::parse(slurp(dir / "signal_trainer_summary.json"));
  CHECK(summary["runs"][0]["summary"]["steps"] == 12);
  CHECK(summary["runs"][0]["config"]["stopped_by"] == "SIGINT");
  CHECK(slurp(dir / "hook.txt") == "steps=12 signal=2\n");
}

TEST_CASE("finish_on_signal: a second signal ends the process at once, the JSONL keeps the finished steps",
          "[signals][profiler]") {
  const auto mode = GENERATE(std::string("twice"), std::string("off"));  // off: the option's default
  const fs::path dir = traceml_test::temp_path("signal_" + mode);
  const auto r = run_trainer(dir, mode);
  INFO(r.output);
  REQUIRE(WIFSIGNALED(r.wait_status));
  CHECK(WTERMSIG(r.wait_status) == SIGINT);
  CHECK(line_count(dir / "signal_trainer_steps.jsonl") == 3);  // steps 0, 1, 2; killed inside step 3
  CHECK_FALSE(fs::exists(dir / "signal_trainer_summary.json"));
  CHECK_FALSE(fs::exists(dir / "hook.txt"));
}

TEST_CASE("finish_on_signal: a signal the program ignores changes nothing", "[signals][profiler]") {
  const fs::path dir = traceml_test::temp_path("signal_ignored");
  const auto r = run_trainer(dir, "ignored");
  INFO(r.output);
  REQUIRE(WIFEXITED(r.wait_status));
  CHECK(WEXITSTATUS(r.wait_status) == 0);
  const json summary = json::parse(slurp(dir / "signal_trainer_summary.json"));
  CHECK(summary["runs"][0]["summary"]["steps"] == 12);
  CHECK(summary["runs"][0]["config"].count("stopped_by") == 0);
}
