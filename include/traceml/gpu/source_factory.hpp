// traceml: the one place GPU sources are chosen and stacked. From one options struct it builds the
// chain a run gets: CUPTI kernel attribution (cupti_source.hpp), else CUDA-event phase timing
// (cuda_events_source.hpp), else nothing when there is no GPU; with hardware counters on every step
// (pm_sampling_source.hpp) on top where the GPU allows them. Each step down is said once, with why.
// The environment's say (TRACEML_HW_COUNTERS=0) is read in detail/activation.hpp and applied here.
//
//   traceml::gpu_source_options o;
//   o.current_stream = traceml::libtorch::current_stream_provider();   // LibTorch users
//   o.memory = traceml::libtorch::caching_allocator_sampler();
//   profiler.set_gpu_source(traceml::make_best_gpu_source(o));        // may be nullptr: no GPU
//
// A new GPU source is made here, from a field of gpu_source_options (docs/architecture.md).
#pragma once
#include <cstdint>
#include <memory>
#include <utility>

#include "traceml/config.hpp"
#include "traceml/detail/activation.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/gpu/cuda_events_source.hpp"
#include "traceml/gpu/cuda_stream.hpp"
#include "traceml/gpu/cupti_source.hpp"
#include "traceml/gpu/device_check.hpp"
#include "traceml/gpu/gpu_memory.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/gpu/pm_sampler.hpp"
#include "traceml/gpu/pm_sampling_source.hpp"

TRACEML_BEGIN_NAMESPACE

/// What make_best_gpu_source tries, and the hooks both sources share.
struct gpu_source_options {
  bool cupti = true;         ///< try kernel attribution first
  cupti_options cupti_opts;  ///< its stream provider and memory sampler are overwritten below
  cuda_events_options events_opts;
  stream_provider current_stream;  ///< given to whichever source is made
  memory_sampler memory;           ///< given to whichever source is made
  /// Add GPU busy and SM activity on every step from hardware counters (CUPTI PM sampling,
  /// pm_sampling_source.hpp) on top of the source made. Where the counters cannot be had (privileges,
  /// an unsupported GPU, another tool holds them) the source runs without them and says why once.
  bool hardware_counters = true;
  pm_sampler_options counters;
  std::int64_t launch_engine_ns = 0;  ///< pm_sampling_options::launch_engine_ns
};

/// The best GPU source this process can have: CUPTI kernel attribution, else CUDA-event phase
/// timing (saying once why attribution is off), else nullptr when there is no GPU (saying so
/// once); with hardware counters on every step on top where the GPU allows them. Never throws,
/// never hangs.
inline std::unique_ptr<gpu_source> make_best_gpu_source(gpu_source_options o = {}) {
  const cuda_device_check device = check_cuda_device();
  if (!device.ok()) {
    report_once("gpu-none", "GPU timing off: " + device.why + "; phases are timed on the CPU");
    detail::note_no_gpu_source("GPU timing off: " + device.why + "; phases are timed on the CPU");
    return nullptr;
  }
  std::unique_ptr<gpu_source> made;
  if (o.cupti) {
    o.cupti_opts.current_stream = o.current_stream;
    o.cupti_opts.memory = o.memory;
    auto c = std::make_unique<cupti_source>(o.cupti_opts);
    if (c->ok()) {
      made = std::move(c);
    } else {
      report_once("gpu-cupti-off", "kernel attribution off: " + c->why() + "; using CUDA-event phase timing");
      o.events_opts.attribution_off = c->why();  // the events source's status says it on every output
    }
  }
  if (!made) {
    o.events_opts.current_stream = o.current_stream;
    o.events_opts.memory = o.memory;
    auto ev = std::make_unique<cuda_events_source>(o.events_opts);
    if (!ev->ok()) {
      report_once("gpu-events-off",
                  ev->status() + "; phases are timed on the CPU");  // status() says "GPU timing off: why"
      detail::note_no_gpu_source(ev->status() + "; phases are timed on the CPU");
      return nullptr;
    }
    made = std::move(ev);
  }
  // TRACEML_HW_COUNTERS=0 leaves the counters to another tool (Nsight Compute or Systems, DCGM).
  if (detail::environment_refuses_hardware_counters()) o.hardware_counters = false;
  if (!o.hardware_counters) return made;
  pm_sampling_options pm;
  pm.sampler = o.counters;
  pm.current_stream = o.current_stream;
  pm.launch_engine_ns = o.launch_engine_ns;
  // Kept even when the counters are unavailable: its status() then says why on every output.
  return std::make_unique<pm_sampling_source>(std::move(made), std::move(pm));
}

TRACEML_END_NAMESPACE
