// traceml: placing hardware-counter samples on a step's phases -- each span's window on the GPU's
// clock is the step's clock stamp plus the span's event offset, for the span's event length. Pure
// (no CUDA): tested on the CPU with synthetic steps and samples (tests/gpu/test_pm_samples.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/gpu/activity.hpp"
#include "traceml/gpu/pm_samples.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// Fills each span's counter facts from `samples` (sorted), the step's GPU clock at its begin event
/// and the spans' event offsets and lengths (pure: tested on the CPU). Spans without a GPU window
/// keep empty facts.
inline void apply_samples(step_activity& s, const std::vector<pm_sample>& samples) {
  if (s.gpu_clock_ns < 0) return;
  for (auto& ts : s.spans) {
    if (ts.event_offset_ns < 0 || ts.event_ns <= 0) continue;
    const std::int64_t begin = s.gpu_clock_ns + ts.event_offset_ns;
    ts.counters = measure_window(samples, begin, begin + ts.event_ns);
  }
}

/// The GPU-clock end of a step (its begin plus its own span), or -1 when unknown.
inline std::int64_t step_gpu_end(const step_activity& s) {
  if (s.gpu_clock_ns < 0) return -1;
  for (const auto& ts : s.spans)
    if (ts.marked.span.kind == phase_kind::step && ts.event_ns >= 0) return s.gpu_clock_ns + ts.event_ns;
  return -1;
}

}  // namespace detail

TRACEML_END_NAMESPACE
