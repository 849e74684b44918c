// traceml: raw GPU activity as a source delivers it -- activity records, the GPU times of boundary
// markers and the CPU spans they stand for. Attribution (attribution.hpp) turns these into
// gpu_facts (gpu_facts.hpp). Plain data, no CUDA.
#pragma once
#include <cstdint>

#include "traceml/config.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE

/// One GPU activity record on the now_ns() clock (a plain copy of what CUPTI reported).
struct gpu_record {
  gpu_activity::type what = gpu_activity::type::kernel;
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;        ///< CUPTI stream id (unique per context)
  std::uint32_t correlation = 0;
  std::uint32_t graph = 0;         ///< CUDA graph id for graph-replayed work, 0 otherwise
  std::uint64_t bytes = 0;         ///< memcpy/memset only
  const char* name = "";           ///< display name (already shortened), stable storage
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

TRACEML_END_NAMESPACE
