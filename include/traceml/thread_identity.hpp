// traceml: who a recording thread is to the operating system. Records name threads by traceml's
// own index (span_record::thread, in order of first record); the Chrome trace shows the OS thread
// id (what top, perf, gdb and Nsight Systems show) and the thread's name instead, so that a trace
// lines up with the other tools. The recorder asks once per thread, when the thread's ring is
// acquired (detail/recorder.hpp, slow path); no scope ever calls these. traceml's own background
// threads name themselves here (name_this_thread).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#if defined(__linux__)
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// A recording thread: traceml's index, the OS thread id and the thread's name.
struct thread_identity {
  std::uint32_t index = 0;  ///< span_record::thread
  std::uint64_t os_id = 0;  ///< Linux: gettid(); other platforms: the index
  std::string name;         ///< the pthread name when it had one (at most 15 bytes on Linux), else ""
};

namespace detail {

/// The calling thread's OS id: gettid() on Linux (through syscall: glibc before 2.30 has no
/// wrapper); elsewhere `fallback`, traceml's index, so that the trace still tells threads apart.
inline std::uint64_t current_os_thread_id(std::uint32_t fallback) noexcept {
#if defined(__linux__)
  (void)fallback;
  return static_cast<std::uint64_t>(::syscall(SYS_gettid));
#else
  return fallback;
#endif
}

/// The calling thread's name (pthread_getname_np; the main thread's is the program's name), or ""
/// where the platform has no such call or the call fails.
inline std::string current_thread_name() {
#if defined(__linux__)
  char buf[32] = {};  // Linux names are at most 16 bytes with the terminator
  if (pthread_getname_np(pthread_self(), buf, sizeof buf) == 0) return buf;
#endif
  return "";
}

/// Names the calling thread (pthread_setname_np; Linux keeps at most 15 bytes), so that traceml's
/// background threads read as themselves in top -H, perf, gdb and Nsight Systems, and their CPU
/// time can be told from the training's (benchmarks/qwen3_overhead reads it per thread). Every
/// thread traceml starts calls this first with a name beginning "traceml". No-op elsewhere.
inline void name_this_thread(const char* name) noexcept {
#if defined(__linux__)
  char buf[16] = {};
  for (std::size_t i = 0; i + 1 < sizeof buf && name[i] != '\0'; ++i) buf[i] = name[i];
  (void)pthread_setname_np(pthread_self(), buf);
#else
  (void)name;
#endif
}

}  // namespace detail
TRACEML_END_NAMESPACE
