// traceml: what happens when a step begins and no profiler is attached.
//
// A trainer that only includes <traceml/phase.hpp> records into per-thread rings that nothing drains.
// At the first such step, once per process, one of two things happens:
//   - the traceml session (session.hpp, compiled into every CMake target that links traceml) is in
//     the program: it starts a profiler writing every output to $TRACEML_OUT, or, without that
//     variable, says once how to turn it on;
//   - it is not (a build without CMake that did not compile session.hpp): the notice below says so.
//
// Every environment variable traceml reads is read here (the environment_* functions below), so that
// what a variable does is found in one place and the code that acts on it gets a plain value:
//   TRACEML_OUT             the session's output folder (session.hpp)
//   TRACEML_RUN_NAME        the session's run name
//   TRACEML_LIVE=1          the live view, for a program that never set profiler_options::live
//   TRACEML_HW_COUNTERS=0   no hardware counters: they are left to another tool (gpu/source_factory.hpp)
//   RANK, WORLD_SIZE, LOCAL_RANK   the rank of a data-parallel run, as torchrun sets them
//                           (rank_identity.hpp, session.hpp)
// Light on purpose: phase.hpp includes it, so it must not pull in the profiler or the sinks.
#pragma once
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

// ---- the environment ------------------------------------------------------------------------
// Read when asked, not cached: a test (or a launcher) may set a variable before the run it concerns.

/// A variable's text; nullptr when it is unset or empty (empty counts as unset everywhere).
inline const char* environment_text(const char* name) noexcept {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

/// TRACEML_OUT: the folder the session writes every output to; nullptr when not set.
inline const char* environment_out_dir() noexcept { return environment_text("TRACEML_OUT"); }

/// TRACEML_RUN_NAME: the session's run name; nullptr when not set.
inline const char* environment_run_name() noexcept { return environment_text("TRACEML_RUN_NAME"); }

/// TRACEML_LIVE=1: the live view on, whatever profiler_options::live says.
inline bool environment_wants_live_view() noexcept {
  const char* v = environment_text("TRACEML_LIVE");
  return v && std::strcmp(v, "1") == 0;
}

/// TRACEML_HW_COUNTERS=0: no hardware counters, leaving them to another tool (Nsight Compute or
/// Systems, DCGM).
inline bool environment_refuses_hardware_counters() noexcept {
  const char* v = environment_text("TRACEML_HW_COUNTERS");
  return v && std::strcmp(v, "0") == 0;
}

/// RANK, WORLD_SIZE and LOCAL_RANK as a launcher set them (the raw text, checked by the caller,
/// which quotes it when it is not a rank); nullptr when unset.
inline const char* environment_rank() noexcept { return std::getenv("RANK"); }
inline const char* environment_world_size() noexcept { return std::getenv("WORLD_SIZE"); }
inline const char* environment_local_rank() noexcept { return std::getenv("LOCAL_RANK"); }

/// Starts a run for a program without a profiler of its own. Called on the thread that begins the
/// first unobserved step, before that step is numbered, so a profiler it attaches sees step 0.
using session_starter = void (*)() noexcept;

struct activation_state {
  std::atomic<bool> decided{false};               // the first unobserved step was handled
  std::atomic<session_starter> starter{nullptr};  // set by session.hpp's static initializer
  std::atomic<const char*> notice{nullptr};       // what this header printed, if anything (tests)
};

inline activation_state& activation() noexcept {
  static activation_state state;
  return state;
}

// Plain strings, printed with fprintf: phase.hpp includes this header, and <string> or the
// diagnostics' <set> would cost every translation unit that includes it.
inline constexpr const char* notice_no_session =
    "steps are being recorded but no profiler is attached, so nothing is collected: create a "
    "traceml::profiler, or build with the traceml session (CMake target traceml::traceml, or "
    "<traceml/session.hpp> in one source file) and run with TRACEML_OUT=<dir>";
inline constexpr const char* notice_out_without_session =
    "TRACEML_OUT is set but this program was built without the traceml session, so nothing is "
    "collected: link it with the CMake target traceml::traceml, or include <traceml/session.hpp> in "
    "one source file";
/// Said by the session (session.hpp) when TRACEML_OUT is not set.
inline constexpr const char* notice_session_idle =
    "steps are being recorded but no profiler is attached, so nothing is collected: run with "
    "TRACEML_OUT=<dir> to write the full report there (table, JSON, JSONL, Chrome trace, HTML), or "
    "create a traceml::profiler";

/// Slow path, taken at most once per process (and only by a step that begins with no observer).
#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
inline void
first_unobserved_step() noexcept {
  auto& a = activation();
  if (a.decided.exchange(true, std::memory_order_acq_rel)) return;
  if (session_starter start = a.starter.load(std::memory_order_acquire)) {
    start();
    return;
  }
  const char* notice = environment_out_dir() ? notice_out_without_session : notice_no_session;
  a.notice.store(notice, std::memory_order_release);
  std::fprintf(stderr, "traceml: %s\n", notice);
}

/// On every step's begin while no profiler is attached: a relaxed load, and the slow path once.
inline void on_step_begin_unobserved() noexcept {
  if (!activation().decided.load(std::memory_order_relaxed)) first_unobserved_step();
}

}  // namespace detail
TRACEML_END_NAMESPACE
