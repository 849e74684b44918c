// traceml: the session. A trainer that only includes <traceml/phase.hpp> and marks its steps and
// phases gets the full report when started with TRACEML_OUT=<dir>, with no other code change:
//
//   TRACEML_OUT=out ./my_trainer      # out/<program>_summary.json, _steps.jsonl, _trace.json,
//                                     # _report.html, and the table on stderr at exit
//
// How: this header registers a starter with the recorder (detail/activation.hpp). The first step
// that begins with no profiler attached calls it; with TRACEML_OUT set it creates the folder, starts
// a profiler writing every output there (with a GPU source where this translation unit was built
// with traceml::cupti, and LibTorch's streams and allocator where with traceml::torch), and finishes
// it when the program exits. Without TRACEML_OUT it says once how to turn it on.
//
// Where it is compiled: once per CMake target that links traceml::traceml (an interface source,
// src/session.cpp), so no trainer source includes the profiler and the sinks for it. Without CMake,
// include this header in one source file. TRACEML_RUN_NAME overrides the run's name (default: the
// program's file name).
#pragma once
#include "traceml/config.hpp"
#if TRACEML_ENABLED
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "traceml/detail/activation.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/profiler.hpp"
#if defined(TRACEML_CUPTI_LIBRARY)  // set by the traceml::cupti target
#include "traceml/gpu/cupti_source.hpp"
#if defined(TRACEML_TORCH_CUDA) && TRACEML_TORCH_CUDA  // set by the traceml::torch target
#include "traceml/torch_adapter.hpp"
#endif
#endif

TRACEML_BEGIN_NAMESPACE
namespace detail {
TRACEML_BEGIN_MODE_NAMESPACE

/// The run's name: TRACEML_RUN_NAME, else the program's file name, else "run".
inline std::string session_run_name() {
  if (const char* name = std::getenv("TRACEML_RUN_NAME"); name && *name) return name;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && !exe.filename().empty()) return exe.filename().string();
  return "run";
}

/// Never destroyed: the profiler inside is finished and released by an exit handler, before the
/// static objects it may still use (the recorder, CUDA's runtime) are torn down.
inline std::unique_ptr<profiler>& session_profiler() {
  static auto* p = new std::unique_ptr<profiler>();
  return *p;
}

inline void finish_session() noexcept {
  try {
    if (auto& p = session_profiler()) {
      p->finish();
      p.reset();
    }
  } catch (const std::exception& e) {
    report_once("session-finish", std::string("TRACEML_OUT: writing the report at exit failed: ") + e.what());
  } catch (...) {
    report_once("session-finish", "TRACEML_OUT: writing the report at exit failed");
  }
}

inline void start_session() noexcept {
  try {
    const char* out = std::getenv("TRACEML_OUT");
    if (!out || !*out) {
      // Printed, not a diagnostic: a program (or a test) that never attaches a profiler must not
      // find a message it did not cause among its diagnostics, nor an allocation on its first step.
      activation().notice.store(notice_session_idle, std::memory_order_release);
      std::fprintf(stderr, "traceml: %s\n", notice_session_idle);
      return;
    }
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec) {
      report_once("session-out", std::string("TRACEML_OUT=") + out + ": cannot create the folder (" + ec.message() +
                                     "); nothing is collected");
      return;
    }
    auto options = profiler_options::named(session_run_name()).write_all_to(out);
    options.config.emplace_back("started_by", "TRACEML_OUT");
    auto prof = std::make_unique<profiler>(options);
#if defined(TRACEML_CUPTI_LIBRARY)
    gpu_source_options gpu;
#if defined(TRACEML_TORCH_CUDA) && TRACEML_TORCH_CUDA
    gpu.current_stream = libtorch::current_stream_provider();
    gpu.memory = libtorch::caching_allocator_sampler();
#endif
    // Made before the exit handler is registered: the CUDA runtime, initialised here at the latest,
    // registers its own teardown first, so it runs after ours.
    prof->set_gpu_source(make_best_gpu_source(gpu));
#endif
    session_profiler() = std::move(prof);
    if (std::atexit(finish_session) != 0) {
      report_once("session-atexit", "TRACEML_OUT: cannot register the exit handler; call exit() normally "
                                    "or create a traceml::profiler to get the report");
    }
    report_once("session-started", std::string("collecting into ") + out +
                                       " (TRACEML_OUT); the report is written when the program exits");
  } catch (const std::exception& e) {
    report_once("session-start", std::string("TRACEML_OUT: cannot start the session: ") + e.what());
  } catch (...) {
    report_once("session-start", "TRACEML_OUT: cannot start the session");
  }
}

/// Registers the starter at static initialisation (once per program: an inline variable).
inline const bool session_registered = [] {
  activation().starter.store(&start_session, std::memory_order_release);
  return true;
}();

TRACEML_END_MODE_NAMESPACE
}  // namespace detail
TRACEML_END_NAMESPACE
#endif  // TRACEML_ENABLED
