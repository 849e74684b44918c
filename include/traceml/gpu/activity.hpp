// traceml: raw GPU activity as a source delivers it -- activity records, the GPU times of boundary
// markers, the CPU spans they stand for and the CUDA-event time of each span. The attribution
// stage (attribution_stage.hpp) turns a delivery into step_gpu_report values (gpu_facts.hpp).
// Plain data, no CUDA.
#pragma once
#include <cstdint>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/gpu/gpu_memory.hpp"
#include "traceml/gpu/pm_samples.hpp"
#include "traceml/gpu/recording_schedule.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE

/// One GPU activity record on the now_ns() clock (a plain copy of what CUPTI reported).
struct gpu_record {
  gpu_activity::type what = gpu_activity::type::kernel;
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;  ///< CUPTI stream id (unique per context)
  std::uint32_t correlation = 0;
  std::uint32_t graph = 0;  ///< CUDA graph id for graph-replayed work, 0 otherwise
  std::uint64_t bytes = 0;  ///< memcpy/memset only
  const char* name = "";    ///< display name (already shortened), stable storage
};

/// The GPU interval of one boundary marker (identified by its sequence number).
struct marker_time {
  std::uint64_t seq = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
};

/// A step or phase span and the markers enqueued at its boundaries (0: none).
struct marked_span {
  span_record span;
  std::uint64_t begin_marker = 0;
  std::uint64_t end_marker = 0;
};

/// A marked span and its GPU time as the CUDA events at its boundaries measured it.
struct timed_span {
  marked_span marked;
  std::int64_t event_ns = -1;  ///< GPU time between the span's two events; -1: not timed
  /// GPU time from the step's begin event to this span's begin event; -1: not timed. With the
  /// step's GPU clock (step_activity::gpu_clock_ns) it places the span on the GPU's clock.
  std::int64_t event_offset_ns = -1;
  /// What hardware-counter samples say about the span's GPU window (pm_sampling_source.hpp).
  counter_facts counters;
};

/// One finished step as a source saw it: nothing attributed yet. The one thing a source computes is
/// timed_span::counters, which only a hardware-counter source fills: it places its samples on the
/// spans' GPU windows (pm_sampling_source.hpp), since the samples are its own and reach no further.
struct step_activity {
  std::int32_t step = -1;
  /// Kernel records were on during this step: attribution may compute kernels, busy and idle.
  bool recorded = false;
  /// Kernel records were on but its kernels are not reported (a schedule's warm-up step: CUPTI's
  /// first recorded step carries one-time costs). Attribution still claims its records, so that
  /// they land in no other step; its report says kernels_measured = false.
  bool discard_records = false;
  schedule_slot schedule;         ///< its place in cupti_options::schedule, if any
  std::vector<timed_span> spans;  ///< the step's own span and its phase spans (no micro-batches)
  memory_sample memory;           ///< peaks sampled at its end
  /// The GPU's clock (%globaltimer, ns) when the step's stream reached its begin event; -1: unknown.
  std::int64_t gpu_clock_ns = -1;
  std::uint64_t dropped_records = 0;  ///< activity records lost since the previous delivered step
};

/// What a source hands over at one collect(): the steps that are complete, in step order, each once,
/// and every activity record and marker time that arrived since the previous collect (of any step,
/// complete or not: the attribution stage keeps what it cannot place yet).
struct gpu_delivery {
  std::vector<step_activity> steps;
  std::vector<gpu_record> records;
  std::vector<marker_time> markers;
  bool final = false;  ///< the end of the run: nothing more will come
};

TRACEML_END_NAMESPACE
