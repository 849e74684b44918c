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
  /// Busy time the counters also see but this round's records do not hold: the previous round's
  /// last records as counted (attribution_output::counted_tail). Read only when records are modelled
  /// as counted: a step's first window samples the previous step's last kernels through its edge.
  std::vector<std::pair<std::int64_t, std::int64_t>> counted_context;
};

/// What it takes to see kernel records as hardware counters (pm_sampling_source.hpp) see the GPU: the
/// counters average the whole GPU's engine activity over samples of `sample_interval_ns`, and count
/// the engine's set-up of each operation (kernel, memset or copy), which its record does not span.
struct records_as_counted {
  std::int64_t sample_interval_ns = 0;  ///< 0: not modelled
  std::int64_t launch_engine_ns = 0;    ///< per operation; measured by benchmarks/pm_sampling_probe (part 5)
  bool on() const noexcept { return sample_interval_ns > 0; }
  /// Where an operation that began at `begin_ns` begins for the counters: its set-up before it (a
  /// negative set-up time counts as none).
  std::int64_t begin_of(std::int64_t begin_ns) const noexcept {
    return begin_ns - (launch_engine_ns > 0 ? launch_engine_ns : 0);
  }
};

/// Per-phase kernel lists are never truncated here: the run-level merge (summary.hpp) truncates.
struct attribution_options {
  bool keep_activities = false;  ///< fill step_gpu_report::activities
  /// How hardware counters would count the records (gpu_facts::counted_busy_ns): with their sample
  /// interval (0: not modelled) and the graphics engine's own time per kernel launch outside the
  /// kernel's record (its set-up before the kernel starts).
  records_as_counted counted;
};

struct attribution_output {
  std::vector<step_gpu_report> reports;    ///< one per step span of the input, in step order
  std::vector<gpu_record> leftover;        ///< records that may belong to a later step (not final)
  std::vector<attribution_method> method;  ///< per input record (leftovers, orphans: none)
  std::uint64_t orphans = 0;               ///< records inside no step window (counted as unattributed)
  std::uint64_t invalid = 0;               ///< records without timestamps (counted as dropped)
  /// The round's records as counted (and its leftovers) from one sample interval before its last
  /// window's end on: the next round's attribution_input::counted_context. Empty when not modelled.
  std::vector<std::pair<std::int64_t, std::int64_t>> counted_tail;
};

TRACEML_END_NAMESPACE
