// traceml: the seam where GPU time sources (CUPTI kernel attribution, CUDA events) plug into the
// profiler. The profiler owns at most one source; callers never talk to it directly, so switching
// from CPU timing to CUDA events to CUPTI changes no user code.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE

/// GPU activity inside one window (a phase of one micro-batch, or a whole step). Times in ns.
struct gpu_facts {
  std::int64_t kernel_ns = 0;      ///< sum of kernel durations (overlapping kernels count twice)
  std::int64_t busy_ns = 0;        ///< union of kernel, memcpy and memset intervals
  std::uint64_t kernel_count = 0;
  std::int64_t memcpy_ns = 0;
  std::uint64_t memcpy_bytes = 0;
  std::int64_t memset_ns = 0;
  std::uint64_t memset_bytes = 0;
  std::int64_t idle_ns = 0;        ///< window wall time in which the GPU ran nothing of ours
  /// GPU time between the window's boundaries as its stream saw them (from when the stream reached
  /// the window's begin to when it finished the window's work); -1 when not measured. The one
  /// number CUDA-event timing gives; CUPTI gives it too when boundary markers are on.
  std::int64_t span_ns = -1;

  gpu_facts& operator+=(const gpu_facts& o) noexcept {
    kernel_ns += o.kernel_ns; busy_ns += o.busy_ns; kernel_count += o.kernel_count;
    memcpy_ns += o.memcpy_ns; memcpy_bytes += o.memcpy_bytes;
    memset_ns += o.memset_ns; memset_bytes += o.memset_bytes; idle_ns += o.idle_ns;
    if (o.span_ns >= 0) span_ns = (span_ns < 0 ? 0 : span_ns) + o.span_ns;
    return *this;
  }
};

/// One kernel name's share of a phase.
struct kernel_stat {
  std::string name;  ///< demangled and shortened
  std::uint64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t mean_ns() const noexcept { return count ? total_ns / static_cast<std::int64_t>(count) : 0; }
};

/// GPU facts of one phase in one micro-batch (microbatch = -1 for phases outside micro-batches).
struct phase_gpu_facts {
  phase_kind kind = phase_kind::user;
  const char* name = "";
  std::int32_t microbatch = -1;
  gpu_facts facts;
  std::vector<kernel_stat> top_kernels;  ///< by total time, longest first
};

/// One GPU activity record, placed on the now_ns() clock and attributed to the phase that launched it
/// (step = -1 when it fell inside no step). Kept only when the trace needs them (keep_activities).
struct gpu_activity {
  enum class type : std::uint8_t { kernel, memcpy, memset };
  type what = type::kernel;
  const char* name = "";        ///< owned by the source; valid until the source is destroyed
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::uint64_t bytes = 0;      ///< memcpy/memset only
  std::int32_t step = -1;
  std::int32_t microbatch = -1;
  phase_kind phase = phase_kind::user;
  const char* phase_name = "";  ///< "" when unattributed
};

/// Everything a GPU source learnt about one step.
struct step_gpu_report {
  std::int32_t step = -1;
  /// Kernel, memcpy, memset, busy and idle fields were measured (CUPTI). False for CUDA-event
  /// timing, whose reports carry only gpu_facts::span_ns: their zeros mean "not measured".
  bool kernels_measured = false;
  gpu_facts total;                        ///< the whole step window
  std::vector<phase_gpu_facts> phases;    ///< one entry per (phase, micro-batch)
  std::int64_t peak_allocated_bytes = -1; ///< -1: unknown
  std::int64_t peak_reserved_bytes = -1;
  std::uint64_t unattributed_kernels = 0; ///< kernels inside no phase window of this step
  std::uint64_t dropped_records = 0;      ///< activity records lost (buffers full)
  std::vector<gpu_activity> activities;   ///< filled only while keep_activities(true)
};

/// A GPU time source. Hooks marked hot run inside scopes; the rest run once per step.
class gpu_source {
 public:
  virtual ~gpu_source() = default;
  /// Short identifier: "cupti", "cuda-events".
  virtual const char* name() const noexcept = 0;
  /// Whether on_scope_begin/on_scope_end must be called (they cost a virtual call per scope).
  virtual bool wants_scope_hooks() const noexcept { return false; }
  /// Hot: a scope opened on the calling thread.
  virtual void on_scope_begin(phase_kind, const char* /*name*/, std::int32_t /*step*/,
                              std::int32_t /*microbatch*/) noexcept {}
  /// Hot: a scope closed.
  virtual void on_scope_end(const span_record&) noexcept {}
  /// Keep per-activity records in the reports (for the Chrome trace); off by default.
  virtual void keep_activities(bool /*on*/) {}
  /// A step ended; `spans` holds all its CPU records (the step, its micro-batches and phases).
  virtual void step_ended(std::int32_t step, const std::vector<span_record>& spans) = 0;
  /// Reports of steps whose GPU records are complete, in step order, each step once. With
  /// `final` (end of run) everything outstanding is resolved, synchronizing if it must.
  virtual std::vector<step_gpu_report> collect(bool final) = 0;
  /// One line for humans: what is measured, or why it is not (e.g. "kernel attribution off:
  /// CUPTI already in use by another tool (Nsight Systems?); using CUDA events").
  virtual std::string status() const = 0;
};

TRACEML_END_NAMESPACE
