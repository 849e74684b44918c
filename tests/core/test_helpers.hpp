// Shared helpers for the core tests.
#pragma once
#include <traceml/traceml.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <unistd.h>

namespace traceml_test {

/// Busy-wait (not sleep) so that durations are close to what was asked even on a loaded machine's
/// scheduler; used where a test needs a phase to take measurable time.
inline void spin_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

/// The names of this process's threads, as top -H and perf read them (/proc/self/task/*/comm; Linux).
inline std::vector<std::string> thread_names() {
  std::vector<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) names.push_back(name);
  }
  return names;
}

/// Everything recorded since the last drain (tests run without a profiler attached).
inline std::vector<traceml::span_record> drain() {
  std::vector<traceml::span_record> out;
  traceml::detail::drain_all([&](const traceml::span_record& r) { out.push_back(r); });
  return out;
}

/// Start a test from a clean recorder: steps numbered from 0, no stale records, enabled.
inline void reset_recorder() {
  auto& R = traceml::detail::recorder();
  traceml::set_enabled(true);
  R.next_step.store(0);
  R.step.store(-1);
  R.microbatch.store(-1);
  drain();
  traceml::reset_diagnostics(/*quiet=*/true);
}

/// Whether `part` occurs in `text` (the message and table checks).
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// The paths temp_path() handed out in this process, removed when it exits (remove_temp_paths).
inline std::vector<std::string>& temp_paths() {
  static std::vector<std::string> paths;
  return paths;
}

/// At exit, by the process that made them only (a forked child that exits must not remove what its
/// parent still checks); TRACEML_KEEP_TEST_FILES=1 keeps them to look at.
inline void remove_temp_paths() {
  static const ::pid_t owner = ::getpid();
  if (::getpid() != owner || std::getenv("TRACEML_KEEP_TEST_FILES")) return;
  for (const auto& p : temp_paths()) {
    std::error_code ec;
    std::filesystem::remove_all(p, ec);
  }
}

/// A path of this test process's own: the process id keeps two suites run at once on one machine
/// (the tests and the sanitizers' builds) from writing and counting each other's files.
inline std::string temp_path(const std::string& name) {
  // The list is made before the handler is registered, so that it is destroyed after the handler ran.
  static const bool cleaned_at_exit = (temp_paths(), remove_temp_paths(), std::atexit(remove_temp_paths) == 0);
  (void)cleaned_at_exit;
  std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/traceml_test_" +
                     std::to_string(::getpid()) + "_" + name;
  temp_paths().push_back(path);
  return path;
}

}  // namespace traceml_test
