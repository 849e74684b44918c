// traceml: when is a step's GPU data complete? The CUPTI source's rule, pure (no CUDA, no clock), so
// that it is unit-tested on the CPU (tests/gpu/test_step_readiness.cpp).
//
// CUPTI hands records over in per-thread buffers, late and out of order: a step's last kernels may
// arrive after the next step's markers, from the autograd thread's buffer. A step is complete when
//   * the run is over (everything was synchronized and force-flushed), or else, once its CUDA events
//     completed (or it has none):
//   * it was not recorded: there are no records to wait for;
//   * sampling (records switched on only for recorded steps): records were switched off behind its
//     end marker, or behind a later step's, and force-flushed (record_switch.hpp);
//   * every step recorded, or sampling with the next step recorded too (a schedule's window: records
//     stay on between them, as with every step recorded): its end marker and the next step's end
//     marker have arrived (one step of slack for records of other streams) and a whole flush ran
//     after that moment;
//   * or it lags: at least `max_lag_steps` later steps ended and two flushes ran since it ended
//     (fast steps must not outrun the flush period; markers may be off).
// Steps complete in order: the first incomplete step holds back every later one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_set>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// One step waiting for its GPU data.
struct readiness_step {
  bool recorded = true;              ///< kernel records were on during the step
  std::uint64_t end_marker = 0;      ///< sequence number of its end marker; 0: none was enqueued
  std::uint64_t flushes_at_end = 0;  ///< flushes completed when the step ended
  bool events_done = true;           ///< its CUDA events completed (true when it has none)
  /// Kept by the rule between calls: the flush count after which the step is complete, set when its
  /// and its successor's end markers were first seen; 0 until then.
  std::uint64_t ready_after_flush = 0;
};

/// What the source knows now.
struct readiness_facts {
  bool final = false;                    ///< end of run: every step is complete
  bool sampling = false;                 ///< records are on only for recorded steps
  std::uint64_t flushes_done = 0;        ///< CUPTI flushes completed so far
  std::uint64_t off_flushed_marker = 0;  ///< sampling: records up to this end marker were force-flushed
  int max_lag_steps = 8;
};

/// Whether step `s` is complete; `next` is the step after it (nullptr: none yet), `later` the
/// number of steps that ended after it, `seen` the marker sequence numbers whose times arrived.
inline bool step_ready(readiness_step& s, const readiness_step* next, std::size_t later, const readiness_facts& f,
                       const std::unordered_set<std::uint64_t>& seen) {
  if (f.final) return true;
  if (!s.events_done) return false;
  if (!s.recorded) return true;
  if (f.sampling && s.end_marker && f.off_flushed_marker >= s.end_marker) return true;
  // Under sampling a successor without records means records went off behind this step: only the
  // forced flush above can tell that they all arrived.
  if (next && s.end_marker && (!f.sampling || next->recorded)) {
    const bool next_seen = !next->recorded || (next->end_marker && seen.count(next->end_marker));
    if (!s.ready_after_flush && seen.count(s.end_marker) && next_seen)
      s.ready_after_flush = f.flushes_done + 2;  // a whole flush begun after this moment
    if (s.ready_after_flush && f.flushes_done >= s.ready_after_flush) return true;
  }
  return later >= static_cast<std::size_t>(f.max_lag_steps > 0 ? f.max_lag_steps : 0) &&
         f.flushes_done >= s.flushes_at_end + 2;
}

/// How many leading steps of `steps` are complete. `Steps`: a random-access sequence of
/// readiness_step or of types derived from it.
template <class Steps>
std::size_t ready_prefix(Steps& steps, const readiness_facts& f, const std::unordered_set<std::uint64_t>& seen) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    readiness_step& s = steps[i];
    const readiness_step* next = i + 1 < steps.size() ? &static_cast<const readiness_step&>(steps[i + 1]) : nullptr;
    if (!step_ready(s, next, steps.size() - 1 - i, f, seen)) break;
    n = i + 1;
  }
  return n;
}

TRACEML_END_NAMESPACE
