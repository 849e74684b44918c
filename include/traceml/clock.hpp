// traceml: the one clock every record uses (CPU scopes, and GPU activity mapped onto it).
//
// now_ns() is CLOCK_MONOTONIC time (std::chrono::steady_clock) in nanoseconds. On x86-64 Linux,
// where the kernel itself keeps time with the TSC, it reads the TSC instead and converts: two clock
// reads are most of a scope's cost, and rdtsc is about half the price of a vDSO clock_gettime on the
// machines we measured (benchmarks/scope_cost.cpp). The conversion is calibrated once against
// steady_clock at first use (about 5 ms); everything traceml records goes through now_ns(), so CPU
// and GPU records stay on one axis whichever way it is read.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "traceml/config.hpp"

#if defined(__x86_64__) && defined(__linux__) && !defined(TRACEML_NO_TSC)
#include <x86intrin.h>
#define TRACEML_HAS_TSC 1
#else
#define TRACEML_HAS_TSC 0
#endif

TRACEML_BEGIN_NAMESPACE
namespace detail {

inline std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// TSC -> steady_clock nanoseconds: ns = base_ns + (tsc - base_tsc) * ns_per_tick.
struct tsc_calibration {
  bool usable = false;
  std::uint64_t base_tsc = 0;
  std::int64_t base_ns = 0;
  double ns_per_tick = 0;
};

#if TRACEML_HAS_TSC
/// The kernel only keeps time with the TSC when it found it invariant and synchronized across CPUs
/// (virtual machines included): the best test there is that the TSC is safe to use.
inline bool kernel_clocksource_is_tsc() noexcept {
  std::FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (!f) return false;
  char buf[32] = {};
  const bool ok = std::fgets(buf, sizeof buf, f) != nullptr && std::strncmp(buf, "tsc", 3) == 0;
  std::fclose(f);
  return ok;
}

/// One (tsc, ns) pair, taken as the tightest of a few brackets of steady_clock reads.
inline void paired_sample(std::uint64_t& tsc, std::int64_t& ns) noexcept {
  std::int64_t best = INT64_MAX;
  for (int i = 0; i < 8; ++i) {
    const std::int64_t t0 = steady_ns();
    const std::uint64_t x = __rdtsc();
    const std::int64_t t1 = steady_ns();
    if (t1 - t0 < best) {
      best = t1 - t0;
      tsc = x;
      ns = t0 + (t1 - t0) / 2;
    }
  }
}

// Out of line: inlined, its body made now_ns() too big to inline into scopes (a call and six
// register saves around every clock read).
__attribute__((noinline)) inline tsc_calibration calibrate_tsc() noexcept {
  tsc_calibration c;
  if (!kernel_clocksource_is_tsc()) return c;
  // Only worth it where reading the TSC is cheaper than the vDSO clock (a trapping hypervisor
  // makes rdtsc far slower).
  constexpr int reads = 256;
  std::uint64_t sink = 0;
  const std::int64_t a = steady_ns();
  for (int i = 0; i < reads; ++i) sink += __rdtsc();
  const std::int64_t b = steady_ns();
  for (int i = 0; i < reads; ++i) sink += static_cast<std::uint64_t>(steady_ns());
  const std::int64_t d = steady_ns();
  if (sink == 42 || (b - a) >= (d - b)) return c;

  std::uint64_t tsc0 = 0, tsc1 = 0;
  std::int64_t ns0 = 0, ns1 = 0;
  paired_sample(tsc0, ns0);
  while (steady_ns() < ns0 + 5'000'000) {
  }
  paired_sample(tsc1, ns1);
  if (tsc1 <= tsc0) return c;
  c.ns_per_tick = static_cast<double>(ns1 - ns0) / static_cast<double>(tsc1 - tsc0);
  if (!(c.ns_per_tick > 0.02 && c.ns_per_tick < 20)) return c;  // 50 MHz .. 50 GHz, else distrust it
  c.base_tsc = tsc1;
  c.base_ns = ns1;
  c.usable = true;
  return c;
}

inline const tsc_calibration& tsc() noexcept {
  static const tsc_calibration calibration = calibrate_tsc();
  return calibration;
}
#endif

}  // namespace detail

/// Monotonic time in nanoseconds on the steady_clock axis. GPU time sources map their own
/// timestamps onto this clock so kernels and phases share one axis. Cost: one rdtsc and a multiply
/// where the TSC is usable (about 10 ns), else one vDSO clock read (about 20-25 ns).
#if defined(__GNUC__)
__attribute__((always_inline))  // in a large translation unit GCC otherwise calls it: a call per read
#endif
inline std::int64_t
now_ns() noexcept {
#if TRACEML_HAS_TSC
  const auto& c = detail::tsc();
  if (c.usable)
    return c.base_ns + static_cast<std::int64_t>(
                           static_cast<double>(static_cast<std::int64_t>(__rdtsc() - c.base_tsc)) * c.ns_per_tick);
#endif
  return detail::steady_ns();
}

/// The calling thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID; 0 where there is none):
/// what a background thread's work costs a core, not the wall time it waited to run. A system call:
/// for the profiler's own threads, never the training thread's path.
inline std::int64_t thread_cpu_ns() noexcept {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec t{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
#else
  return 0;
#endif
}

/// Whether now_ns() reads the TSC (true) or steady_clock (false).
inline bool clock_uses_tsc() noexcept {
#if TRACEML_HAS_TSC
  return detail::tsc().usable;
#else
  return false;
#endif
}

TRACEML_END_NAMESPACE
