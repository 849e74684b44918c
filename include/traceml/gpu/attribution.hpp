// traceml: kernel attribution, a pure function of GPU activity records and phase intervals.
//
// Question answered: which step, micro-batch and phase *launched* each kernel, memcpy and memset,
// and how busy was the GPU inside each of them? No CUDA here: GPU sources deliver raw activity
// (activity.hpp) with the step's spans; tests feed synthetic records (tests/gpu/test_attribution.cpp).
//
// Rules (docs/attribution.md has the long form):
//   * Exact, by stream order. At each phase (and step) boundary the GPU source enqueues a tiny
//     marker operation on the boundary thread's current stream. A stream runs its work in launch
//     order, so every operation on that stream that starts after the begin marker finished and before
//     the end marker started was launched inside the phase -- from whichever thread launched it
//     (autograd workers included) and whether it came from a CUDA-graph replay or not.
//   * By GPU time, for streams without markers (side streams the phase did not run on): the
//     innermost phase whose marker window, on any stream of the same device, contains the start.
//   * By CPU time, when a span has no markers (markers off, dropped, or the stream was being
//     captured): the innermost phase whose CPU window contains the start, else the phase of the
//     same step that ended last before it (the GPU starts work after its launch, never before).
//   * A kernel belongs to exactly one phase, the innermost; kernels inside a step but outside its
//     phases count as `unattributed_kernels` of that step.
//
// Stages, one function each, in the order attribute() runs them:
//   1. build_windows     spans + markers -> windows (CPU window; GPU window where both markers ran)
//                        -- attribution_windows.hpp
//   2. index_windows     GPU windows per (device, stream) and per device, sorted by GPU begin and
//                        searched by binary search; steps by number; phases by step
//                        -- attribution_windows.hpp
//   3. assign_records    each record: by_stream_order, else by_gpu_time, else by_cpu_time; a record
//                        is assigned, left over for a later round, an orphan, or invalid
//                        -- attribution_assign.hpp
//   4. open_steps, open_phase_entries, reserve_records, add_record
//                        step reports and (kind, name, micro-batch) entries; sums to the innermost
//                        phase, busy intervals to it and every phase enclosing it
//                        -- attribution_facts.hpp
//   5. finish_reports    busy = union clipped to each window, idle = window - busy; every kernel
//                        name merged (merge_kernels) and sorted, never truncated
//                        -- attribution_facts.hpp
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/gpu/attribution_assign.hpp"
#include "traceml/gpu/attribution_facts.hpp"
#include "traceml/gpu/attribution_io.hpp"
#include "traceml/gpu/attribution_windows.hpp"

TRACEML_BEGIN_NAMESPACE

/// Attribute every record to a step, micro-batch and phase and compute per-phase GPU facts.
/// Pure: same input, same output. Cost: O((records + spans) log spans) per round, plus the CPU-time
/// rule's scan of one step's phases for records of spans without markers; off the training thread.
inline attribution_output attribute(const attribution_input& in, const attribution_options& opt = {}) {
  using detail::record_fate;
  attribution_output out;
  out.method.assign(in.records.size(), attribution_method::none);
  const std::vector<detail::window> windows = detail::build_windows(in.spans, in.markers);
  const detail::window_index index = detail::index_windows(windows);
  if (index.steps.empty()) {
    // Nothing to attribute against: everything waits for a later round (or is orphaned).
    if (!in.final_round)
      out.leftover = in.records;
    else
      out.orphans = in.records.size();
    if (opt.counted.on()) out.counted_tail = in.counted_context;
    return out;
  }
  const auto assigned = detail::assign_records(in.records, windows, index, in.final_round);

  detail::round_acc acc = detail::open_steps(in, windows, index);
  acc.counted = opt.counted;
  detail::open_phase_entries(in, windows, acc);
  detail::reserve_records(acc, assigned, windows, opt.keep_activities);
  if (acc.counted.on()) {
    acc.counted_busy = in.counted_context;
    for (const marker_time& m : in.markers) acc.count(m);
  }
  std::uint64_t orphan_kernels = 0;
  for (std::size_t r = 0; r < in.records.size(); ++r) {
    const gpu_record& rec = in.records[r];
    if (assigned[r].fate != record_fate::invalid) acc.count(rec);  // the counters see every timed record
    switch (assigned[r].fate) {
      case record_fate::leftover: out.leftover.push_back(rec); break;
      case record_fate::invalid: ++out.invalid; break;
      case record_fate::orphan:
        ++out.orphans;
        if (rec.what == gpu_activity::type::kernel) ++orphan_kernels;
        break;
      case record_fate::assigned:
        out.method[r] = assigned[r].method;
        detail::add_record(acc, rec, assigned[r], windows, in.spans, opt.keep_activities);
        break;
    }
  }
  // Untimed records and orphans (inside no step of this round) are reported with the first step,
  // so that they are visible as dropped or unattributed rather than silently lost.
  acc.steps.front().report.dropped_records += out.invalid;
  acc.steps.front().report.unattributed_kernels += orphan_kernels;
  out.reports = detail::finish_reports(acc, windows);
  if (acc.counted.on())
    out.counted_tail = detail::counted_tail(acc.counted_busy, windows, acc.counted.sample_interval_ns);
  return out;
}

TRACEML_END_NAMESPACE
