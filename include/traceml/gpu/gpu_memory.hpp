// traceml: GPU memory per step, as a small hook. A GPU source (or the profiler, when it has no GPU
// source) calls the sampler once per step end, on the training thread; the sampler returns the
// step's peaks and starts the next step's peak from "now".
//
//   traceml::gpu_source_options o;
//   o.memory = traceml::libtorch::caching_allocator_sampler();   // torch_adapter.hpp
//   // or traceml::cuda_device_memory_sampler(0)                  // cuda_events_source.hpp
#pragma once
#include <cstdint>
#include <functional>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// Peak GPU memory of one step, in bytes; -1 where the sampler cannot know.
struct memory_sample {
  std::int64_t peak_allocated_bytes = -1;  ///< tensors (LibTorch's caching allocator) or -1
  std::int64_t peak_reserved_bytes = -1;   ///< held from the driver (cached + in use)
};

/// One step's peaks placed on the run's timeline: the Chrome trace draws them as a counter track
/// from the step's beginning (step_gpu_report carries the peaks, step_result the beginning).
struct step_memory_sample {
  std::int32_t step = -1;
  std::int64_t begin_ns = 0;  ///< the step's beginning, on the now_ns() clock
  memory_sample peaks;
  bool known() const noexcept { return peaks.peak_allocated_bytes >= 0 || peaks.peak_reserved_bytes >= 0; }
};

/// Called once per step end on the training thread; must also reset its peaks. Empty: no sampling.
using memory_sampler = std::function<memory_sample()>;

TRACEML_END_NAMESPACE
