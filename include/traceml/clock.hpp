// traceml: the one clock every CPU-side record uses.
#pragma once
#include <chrono>
#include <cstdint>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// Monotonic time in nanoseconds (std::chrono::steady_clock, CLOCK_MONOTONIC on Linux).
/// GPU time sources map their own timestamps onto this clock so that kernels and phases share one
/// axis. Cost: one vDSO clock read, about 15-25 ns.
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TRACEML_END_NAMESPACE
