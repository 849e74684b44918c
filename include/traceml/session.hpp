// traceml: the session. A trainer that only includes <traceml/phase.hpp> and marks its steps and
// phases gets the full report when started with TRACEML_OUT=<dir>, with no other code change:
//
//   TRACEML_OUT=out ./my_trainer      # out/<program>_summary.json, _steps.jsonl, _trace.json,
//                                     # _report.html, and the table on stderr at exit
//
// How: this header registers a starter with the recorder (detail/activation.hpp). The first step
// that begins with no profiler attached calls it; with TRACEML_OUT set it creates the folder, starts
// a profiler writing every output there (with a GPU source where the program links the GPU part,
// session_gpu.hpp, and LibTorch's streams and allocator where it links the LibTorch part,
// session_torch.hpp), and finishes it when the program exits. Without TRACEML_OUT it says once how
// to turn it on.
//
// Where it is compiled: once per build tree. CMake compiles src/session.cpp (this header),
// src/session_gpu.cpp and src/session_torch.cpp once each, as object libraries, and links each into
// every target that links traceml::traceml, traceml::cupti and a CUDA traceml::torch respectively
// (cmake/traceml_components.cmake), so no trainer source includes the profiler and the sinks for it
// and no target compiles them again. The parts find each other at static initialisation
// (session_registry()). Without CMake, include this header in one source file, and
// session_gpu.hpp / session_torch.hpp in one each where the program links CUPTI / LibTorch with CUDA.
// TRACEML_RUN_NAME overrides the run's name (default: the program's file name).
#pragma once
#include "traceml/config.hpp"
#if TRACEML_ENABLED
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include "traceml/detail/activation.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/gpu/gpu_memory.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/profiler.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// What the session attaches beyond the CPU profiler, filled at static initialisation by the parts
/// the program links (session_gpu.hpp, session_torch.hpp), read when the session starts (at the
/// first step, after every static initialiser). One for the program, whatever the modes of its parts.
struct session_parts {
  /// The GPU source (session_gpu.hpp), given the stream and memory sampler below where present.
  std::unique_ptr<gpu_source> (*make_gpu_source)(std::function<void*()> current_stream,
                                                 memory_sampler memory) = nullptr;
  std::function<void*()> (*current_stream)() = nullptr;  ///< LibTorch's current stream (session_torch.hpp)
  memory_sampler (*memory)() = nullptr;                  ///< LibTorch's caching allocator (session_torch.hpp)
};
inline session_parts& session_registry() noexcept {
  static session_parts parts;
  return parts;
}

TRACEML_BEGIN_MODE_NAMESPACE

/// The run's name: TRACEML_RUN_NAME, else the program's file name, else "run".
inline std::string session_run_name() {
  if (const char* name = environment_run_name()) return name;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && !exe.filename().empty()) return exe.filename().string();
  return "run";
}

/// The run's name as a file name inside TRACEML_OUT: characters other than letters, digits, '.',
/// '-' and '_' become '_', and so does a leading '.', so that no name ('a/b', '../x', '.hidden')
/// writes into another folder or hides its files. The run keeps its name in the outputs.
inline std::string session_file_name(const std::string& run_name) {
  std::string file = run_name;
  for (char& c : file) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (!plain) c = '_';
  }
  if (!file.empty() && file.front() == '.') file.front() = '_';
  return file.empty() ? "run" : file;
}

/// "_rank3" for rank 3 of a data-parallel run (RANK and WORLD_SIZE as torchrun sets them, or
/// LOCAL_RANK alone), so that ranks started on one TRACEML_OUT write files of their own; "" alone.
inline std::string session_rank_part() {
  if (const rank_identity r = rank_from_environment(); r.distributed()) return "_rank" + std::to_string(r.rank);
  if (const long local = parse_rank_number(environment_local_rank()); local >= 0)
    return "_rank" + std::to_string(local);
  return "";
}

/// The files of a session whose names begin with `base` (profiler_options::write_all_as's).
inline const char* const session_file_suffixes[] = {"_steps.jsonl", "_summary.json", "_trace.json", "_report.html"};

/// The first of <dir>/<base>_*, <dir>/<base>-2_*, <dir>/<base>-3_*, ... of which no file exists,
/// claimed by creating its JSONL exclusively (O_EXCL: of two processes started on one folder at
/// once, one gets it and the other moves on). An earlier run's files are kept, never overwritten.
/// Empty when the folder takes no file (the profiler then says why when it opens the JSONL).
inline std::string claim_session_base(const std::string& dir, const std::string& base) {
  for (int n = 1; n <= 1000; ++n) {
    const std::string candidate = dir + "/" + (n == 1 ? base : base + "-" + std::to_string(n));
    std::error_code ec;
    bool taken = false;
    for (const char* suffix : session_file_suffixes)
      taken = taken ||
              std::filesystem::symlink_status(candidate + suffix, ec).type() != std::filesystem::file_type::not_found;
    if (taken) continue;
    const int fd =
        ::open((candidate + session_file_suffixes[0]).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      return candidate;
    }
    if (errno != EEXIST) return dir + "/" + base;  // the profiler's own open says why
  }
  return "";
}

/// The GPU status of a TRACEML_OUT run built without traceml::cupti: what is missing and the fix.
inline constexpr const char* no_gpu_source_unlinked_status =
    "no GPU time source attached: this program was built without traceml::cupti, so TRACEML_OUT timed "
    "phases on the CPU only (link the CMake target traceml::cupti, and traceml::torch for LibTorch's "
    "streams and memory, to get GPU figures)";

/// The exit status of a TRACEML_OUT program that would have exited 0 but an output could not be
/// written (each said with its reason): EX_IOERR of <sysexits.h>. A non-zero status is left alone.
inline constexpr int session_outputs_failed_status = 74;

/// Never destroyed: the profiler inside is finished and released by an exit handler, before the
/// static objects it may still use (the recorder, CUDA's runtime) are torn down.
inline std::unique_ptr<profiler>& session_profiler() {
  static auto* p = new std::unique_ptr<profiler>();
  return *p;
}

/// Finishes the session's profiler (writes every output), once. True when an output failed.
inline bool finish_session() noexcept {
  try {
    if (auto& p = session_profiler()) {
      p->finish();
      const bool failed = !p->failed_outputs().empty();
      p.reset();
      return failed;
    }
  } catch (const std::exception& e) {
    report_once("session-finish", std::string("TRACEML_OUT: writing the report at exit failed: ") + e.what());
    return true;
  } catch (...) {
    report_once("session-finish", "TRACEML_OUT: writing the report at exit failed");
    return true;
  }
  return false;
}

/// The exit handler. Where the C library passes the exit status (glibc's on_exit), a program that
/// exits 0 while an output failed exits session_outputs_failed_status instead: stdio is flushed and
/// the process ends there (_Exit), since exit() cannot be called again from an exit handler; the
/// handlers registered before this one (and static destructors) are skipped on that path only.
inline void finish_session_at_exit(int status, void*) noexcept {
  if (finish_session() && status == 0) {
    report_once("session-failed-status", "TRACEML_OUT: an output could not be written (said above); exit status " +
                                             std::to_string(session_outputs_failed_status));
    std::fflush(nullptr);
    std::_Exit(session_outputs_failed_status);
  }
}
inline void finish_session_at_exit_plain() noexcept { (void)finish_session(); }

/// True when the program handles SIGINT or SIGTERM itself (a handler of its own is installed).
inline bool program_handles_stop_signals() noexcept {
  for (const int sig : stop_signals) {
    struct sigaction current = {};
    if (sigaction(sig, nullptr, &current) != 0) continue;
    const bool siginfo = (current.sa_flags & SA_SIGINFO) != 0;
    if (siginfo || (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN)) return true;
  }
  return false;
}

/// The session profiler's options: its files at `base`, finish on SIGINT/SIGTERM unless the program
/// handles them; says once what a rank's files are and how to merge them (`files`: the folder and the
/// run's file name, without the rank part).
inline profiler_options session_options(const std::string& name, const std::string& base, const std::string& files,
                                        const std::string& rank_part) {
  auto options = profiler_options::named(name);
  options.write_all_as(base);
  options.config.emplace_back("started_by", "TRACEML_OUT");
  // Ctrl-C and SIGTERM write the finished steps' report, as they do in a program that sets
  // finish_on_signal itself; a handler of the program's own stays in charge.
  options.finish_on_signal = !program_handles_stop_signals();
  if (!options.finish_on_signal)
    report_once("session-own-handler",
                "the program handles SIGINT/SIGTERM itself, so traceml leaves them to it: "
                "end the program with exit() or a return from main after the signal, and "
                "the report is written then");
  if (rank_part == "_rank0")  // only rank 0 says it
    report_once("session-ranks", "each rank writes its own files (" + files +
                                     "_rank<r>_*); once all have finished, merge them with: traceml ranks " + files +
                                     "_rank*_steps.jsonl");
  return options;
}

/// Finishes the session when the program exits; says once when the handler cannot be registered.
inline void register_session_exit() {
  // Everything the exit path reports through (diagnostics, the recorder) is never destroyed, so
  // the order of static destructors cannot reach it (detail/diagnostics.hpp, recorder.hpp).
#if defined(__GLIBC__)
  const bool registered = on_exit(finish_session_at_exit, nullptr) == 0;
#else
  const bool registered = std::atexit(finish_session_at_exit_plain) == 0;
#endif
  if (!registered) {
    report_once("session-atexit",
                "TRACEML_OUT: cannot register the exit handler; call exit() normally "
                "or create a traceml::profiler to get the report");
  }
}

/// Starts the TRACEML_OUT session's profiler (its files in the folder, its GPU source where the
/// program links one, its exit handler); when anything is missing it says why once and collects nothing.
inline void start_session() noexcept {
  try {
    const char* out = environment_out_dir();
    if (!out) {
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
    const std::string name = session_run_name();
    const std::string file_name = session_file_name(name);
    if (file_name != name)
      report_once("session-file-name",
                  "the run '" + name + "' names its files '" + file_name +
                      "' (a file name inside TRACEML_OUT holds letters, digits, '.', '-' and '_')");
    const std::string rank_part = session_rank_part();
    const std::string wanted = std::string(out) + "/" + file_name + rank_part;
    const std::string base = claim_session_base(out, file_name + rank_part);
    if (base.empty()) {
      report_once("session-claim", std::string("TRACEML_OUT=") + out + " holds 1000 runs named '" + file_name +
                                       rank_part + "'; nothing is collected");
      return;
    }
    if (base != wanted)
      report_once("session-suffix", wanted +
                                        "_* belongs to another run (an earlier one, or a process writing "
                                        "there now), kept as it is; this run writes " +
                                        base + "_*");
    const profiler_options options = session_options(name, base, std::string(out) + "/" + file_name, rank_part);
    auto prof = std::make_unique<profiler>(options);
    if (const session_parts& parts = session_registry(); parts.make_gpu_source) {
      // Made before the exit handler is registered: the CUDA runtime, initialised here at the latest,
      // registers its own teardown first, so it runs after ours. None: the factory noted why.
      prof->set_gpu_source(parts.make_gpu_source(parts.current_stream ? parts.current_stream() : nullptr,
                                                 parts.memory ? parts.memory() : nullptr));
    } else {
      note_no_gpu_source(no_gpu_source_unlinked_status);
    }
    session_profiler() = std::move(prof);
    register_session_exit();
    report_once("session-started", std::string("collecting into ") + base +
                                       "_* (TRACEML_OUT); the report is written when the program exits");
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
