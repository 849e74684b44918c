// traceml: what the GPU did inside a step and its phases -- the values attribution produces and the
// statistics read. Plain data, no CUDA.
//
// Two kinds of step meet here. On every step a GPU source can time each phase on its stream (CUDA
// events or boundary markers): `span_ns`. On *recorded* steps (CUPTI kernel records, a few steps
// chosen by the recording budget or schedule) attribution also knows every kernel, copy and memset
// and fills the kernel, busy and idle fields; `step_gpu_report::kernels_measured` says which kind a
// step is, and zeros of an unrecorded step mean "not measured", never "nothing ran".
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/gpu/pm_samples.hpp"
#include "traceml/gpu/recording_schedule.hpp"
#include "traceml/phase_kind.hpp"

TRACEML_BEGIN_NAMESPACE

class kernel_name_table;  // gpu/kernel_name.hpp: where a source's kernel names live

/// GPU activity inside one window (a phase of one micro-batch, or a whole step). Times in ns.
struct gpu_facts {
  std::int64_t kernel_ns = 0;  ///< sum of kernel durations (overlapping kernels count twice)
  std::uint64_t kernel_count = 0;
  std::int64_t memcpy_ns = 0;
  std::uint64_t memcpy_bytes = 0;
  std::int64_t memset_ns = 0;
  std::uint64_t memset_bytes = 0;
  /// The GPU window busy and idle time were measured in: from when the window's stream passed its
  /// begin marker to when it reached its end marker; the CPU window where it has no markers. -1:
  /// kernels were not measured (unrecorded step). busy_ns + idle_ns == window_ns, always.
  std::int64_t window_ns = -1;
  std::int64_t busy_ns = 0;  ///< union of this window's own kernels, copies and memsets, inside the window
  std::int64_t idle_ns = 0;  ///< window_ns - busy_ns: the window ran nothing of its own
  /// idle_ns by kind (gpu/idle_split.hpp): host wait, kernel-to-kernel wait, other wait; they sum to
  /// idle_ns. All 0 on an unrecorded step.
  std::int64_t idle_host_ns = 0;
  std::int64_t idle_kernel_gap_ns = 0;
  std::int64_t idle_other_ns = 0;
  /// The union of the window's own copies (memcpy records, its nested phases' included), inside the
  /// window: at most busy_ns.
  std::int64_t copy_busy_ns = 0;
  std::uint64_t short_kernel_count = 0;  ///< kernels shorter than short_kernel_ns (innermost phase only)
  /// The records as hardware counters would count them inside this window
  /// (attribution_options::counted): every record of the step and of the steps attributed with it
  /// (the counters see the whole GPU) and their boundary markers, each
  /// begun the engine's set-up time earlier (back-to-back operations hide it behind the previous
  /// one), averaged over samples of the counters' interval weighed by their overlap with the window
  /// (busy next to the window leaks in at its edges, as it does for the counters). Set beside the
  /// counters' busy share, it says whether the two sources agree. -1: not modelled.
  std::int64_t counted_busy_ns = -1;
  /// GPU time between the window's boundaries as its stream saw them (CUDA events on every step,
  /// or the boundary markers of a recorded step); -1 when not measured.
  std::int64_t span_ns = -1;
  /// The union of the window's own records (its innermost ones, not clipped to the window), and of
  /// that the part during which other work of the step ran on the GPU beside it (another phase's or
  /// an unattributed record, on another stream): communication hidden under backward, a copy under
  /// compute. Both 0 on an unrecorded step; hidden_ns is 0 on a step whose records all ran on one
  /// stream.
  std::int64_t own_ns = 0;
  std::int64_t hidden_ns = 0;
  /// Hardware-counter samples over the window between the boundaries (any step where a PM-sampling
  /// source ran, recorded or not): engine busy, SM, tensor and DRAM activity. Not measured when
  /// counters.covered_ns == 0.
  counter_facts counters;

  gpu_facts& operator+=(const gpu_facts& o) noexcept {
    kernel_ns += o.kernel_ns;
    kernel_count += o.kernel_count;
    memcpy_ns += o.memcpy_ns;
    memcpy_bytes += o.memcpy_bytes;
    memset_ns += o.memset_ns;
    memset_bytes += o.memset_bytes;
    busy_ns += o.busy_ns;
    idle_ns += o.idle_ns;
    idle_host_ns += o.idle_host_ns;
    idle_kernel_gap_ns += o.idle_kernel_gap_ns;
    idle_other_ns += o.idle_other_ns;
    copy_busy_ns += o.copy_busy_ns;
    short_kernel_count += o.short_kernel_count;
    own_ns += o.own_ns;
    hidden_ns += o.hidden_ns;
    if (o.counted_busy_ns >= 0) counted_busy_ns = (counted_busy_ns < 0 ? 0 : counted_busy_ns) + o.counted_busy_ns;
    if (o.window_ns >= 0) window_ns = (window_ns < 0 ? 0 : window_ns) + o.window_ns;
    if (o.span_ns >= 0) span_ns = (span_ns < 0 ? 0 : span_ns) + o.span_ns;
    counters += o.counters;
    return *this;
  }
};

/// One kernel name's share of a phase: launches and summed duration over some steps.
struct kernel_stat {
  std::string name;  ///< demangled and shortened
  std::uint64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t mean_ns() const noexcept { return count ? total_ns / static_cast<std::int64_t>(count) : 0; }
};

/// The one kernel-list merge: adds `from` into `into` by name (launches and time summed), keeping
/// `into`'s order for names it already has.
inline void merge_kernels(std::vector<kernel_stat>& into, const std::vector<kernel_stat>& from) {
  std::unordered_map<std::string, std::size_t> index;
  index.reserve(into.size() + from.size());
  for (std::size_t i = 0; i < into.size(); ++i) index.emplace(into[i].name, i);
  for (const auto& k : from) {
    auto it = index.find(k.name);
    if (it == index.end()) {
      index.emplace(k.name, into.size());
      into.push_back(k);
    } else {
      into[it->second].count += k.count;
      into[it->second].total_ns += k.total_ns;
    }
  }
}

/// Longest total first; equal totals by name, so that outputs do not depend on arrival order.
inline void sort_kernels(std::vector<kernel_stat>& ks) {
  std::sort(ks.begin(), ks.end(), [](const kernel_stat& a, const kernel_stat& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
}

/// GPU facts of one phase in one micro-batch (microbatch = -1 for phases outside micro-batches).
struct phase_gpu_facts {
  phase_kind kind = phase_kind::user;
  const char* name = "";
  std::int32_t microbatch = -1;
  gpu_facts facts;
  /// Every kernel name of this phase in this step, longest total first (not truncated: the run-level
  /// merge must see a kernel that is 11th everywhere).
  std::vector<kernel_stat> kernels;
  /// Every kernel's duration in this entry (ns, record order), for the median kernel over a run.
  std::vector<std::int64_t> kernel_durations_ns{};
};

/// One GPU activity record, placed on the now_ns() clock and attributed to the phase that launched it
/// (step = -1 when it fell inside no step). Kept only when the trace needs them (keep_activities).
struct gpu_activity {
  enum class type : std::uint8_t { kernel, memcpy, memset };
  type what = type::kernel;
  /// Static, or in the source's kernel_name_table (gpu_source::kernel_names()): valid while that
  /// table lives, which the trace and recording windows that hold activities keep alive.
  const char* name = "";
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::uint64_t bytes = 0;  ///< memcpy/memset only
  std::int32_t step = -1;
  std::int32_t microbatch = -1;
  phase_kind phase = phase_kind::user;
  const char* phase_name = "";  ///< "" when unattributed
};

/// Everything the GPU sources learnt about one step.
struct step_gpu_report {
  std::int32_t step = -1;
  /// Kernel records were taken on this step: the kernel, copy, busy, idle and window fields were
  /// measured. False on unrecorded steps and with CUDA-event timing alone, whose reports carry only
  /// span_ns.
  bool kernels_measured = false;
  /// Its place in a recording schedule (cupti_options::schedule): an active step belongs to the
  /// window of `schedule.cycle`; a warm-up step ran with kernel records on (CUPTI's cost) but
  /// reports none, so it is neither a recorded nor a baseline step. Unscheduled without a schedule.
  schedule_slot schedule;
  gpu_facts total;                         ///< the whole step window
  std::vector<phase_gpu_facts> phases;     ///< one entry per (phase, micro-batch)
  std::int64_t peak_allocated_bytes = -1;  ///< -1: unknown
  std::int64_t peak_reserved_bytes = -1;
  std::uint64_t unattributed_kernels = 0;  ///< kernels inside no phase window of this step
  /// Their durations (ns): with each phase's kernel_durations_ns, every kernel of the step once.
  std::vector<std::int64_t> unattributed_kernel_durations_ns{};
  std::uint64_t dropped_records = 0;     ///< activity records lost (buffers full)
  std::vector<gpu_activity> activities;  ///< filled only while keep_activities(true)
};

TRACEML_END_NAMESPACE
