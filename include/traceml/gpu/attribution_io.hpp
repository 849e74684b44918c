// traceml: what the attribution engine (attribution.hpp) takes and gives. Plain data, no CUDA.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/gpu/activity.hpp"
#include "traceml/gpu/gpu_facts.hpp"

TRACEML_BEGIN_NAMESPACE

/// How a record was attributed (for tests and diagnostics).
enum class attribution_method : std::uint8_t { none, stream_order, gpu_time, cpu_time };

/// Inputs of one attribution round: the spans of a run of consecutive steps (step spans and their
/// phase spans; micro-batch spans may be included and are ignored), marker times and records.
struct attribution_input {
  std::vector<marked_span> spans;
  std::vector<marker_time> markers;
  std::vector<gpu_record> records;
  /// Per step (by step index): records lost before they reached us, reported as dropped_records.
  std::unordered_map<std::int32_t, std::uint64_t> dropped;
  /// Per step: peak memory sampled at its end (-1: unknown).
  std::unordered_map<std::int32_t, std::pair<std::int64_t, std::int64_t>> memory;
  /// The last round of the run: nothing is left over for later steps.
  bool final_round = false;
};

/// Per-phase kernel lists are never truncated here: the run-level merge (summary.hpp) truncates.
struct attribution_options {
  bool keep_activities = false;  ///< fill step_gpu_report::activities
  /// The graphics engine's own time per kernel launch outside the kernel's record (set-up before it
  /// starts), for gpu_facts::engine_busy_ns: the records' busy time as hardware counters see it.
  /// 0: not modelled (engine_busy_ns = busy_ns).
  std::int64_t launch_engine_ns = 0;
};

struct attribution_output {
  std::vector<step_gpu_report> reports;  ///< one per step span of the input, in step order
  std::vector<gpu_record> leftover;      ///< records that may belong to a later step (not final)
  std::vector<attribution_method> method;  ///< per input record (leftovers, orphans: none)
  std::uint64_t orphans = 0;  ///< records inside no step window (counted as unattributed)
  std::uint64_t invalid = 0;  ///< records without timestamps (counted as dropped)
};

TRACEML_END_NAMESPACE
