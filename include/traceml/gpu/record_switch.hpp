// traceml: the record switch -- which steps CUPTI records, and switching its records on and off.
//
// CUPTI's per-launch cost is paid only on recorded steps: between them every activity kind is off
// and no marker is enqueued, so the other steps run as if untraced. Which steps, decided in one
// place (decide()): by a schedule's windows (recording_schedule.hpp), else within an overhead budget
// (recording_budget.hpp), else one in `sample_every`, else all of them (no switching at all).
// On: at a recorded step's begin, on the training thread. Off: once the GPU ran the last step of a
// run of recorded steps, by the CUPTI source's worker, followed by a forced flush
// (switch_off_after_step says why). The budget and one in N never record two steps in a row; a
// schedule does (its warm-up and active steps), and records then stay on from the window's first
// warm-up step to its last active step: switching off and on between them would cost a flush and an
// enable per step and could cut a step's first records.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/cuda_runtime.hpp"
#include "traceml/gpu/cuda_stream.hpp"
#include "traceml/gpu/cupti_reader.hpp"
#include "traceml/gpu/recording_budget.hpp"
#include "traceml/gpu/recording_schedule.hpp"

TRACEML_BEGIN_NAMESPACE

class record_switch {
 public:
  /// A `schedule` decides when given; else `overhead_budget` > 0: the budget; else one step in
  /// `sample_every` (1: every step).
  record_switch(double overhead_budget, int sample_every, std::optional<recording_schedule> schedule,
                cupti_reader& reader)
      : schedule_(std::move(schedule)),
        budget_share_(schedule_ ? 0.0 : overhead_budget),
        sample_every_(sample_every),
        budget_(budget_share_),
        reader_(reader) {}
  ~record_switch() {
    if (off_event_) detail::rt::cudaEventDestroy(off_event_);
    detail::rt::cudaGetLastError();
  }
  record_switch(const record_switch&) = delete;
  record_switch& operator=(const record_switch&) = delete;

  /// Records switched per step (schedule, budget or 1 in N), not on for the whole run.
  bool sampling() const noexcept { return schedule_ || budget_share_ > 0 || sample_every_ > 1; }

  /// After the reader started (every kind enabled once): with sampling, records go off until the
  /// first recorded step, and the event that times switch-offs is created.
  void start() noexcept {
    if (!sampling()) return;
    reader_.disable_all();
    detail::lock_guard lock(mu_);  // taken after the reader call: mu_ is a leaf but for those
    if (detail::rt::cudaEventCreateWithFlags(&off_event_, cudaEventDisableTiming) != cudaSuccess) {
      detail::rt::cudaGetLastError();
      off_event_ = nullptr;  // records then go off at each recorded step's end (some may be lost)
    }
  }

  /// Training thread, at a step's begin: records on during this step (a recorded step, or a
  /// schedule's warm-up step)? If so, records are on from here.
  bool begin_step(std::int32_t step) noexcept {
    schedule_slot slot;
    bool on = true;
    {
      detail::lock_guard lock(mu_);
      on = decide(step, slot);
      slot_ = slot;
      step_ = step;
    }
    if (on) set_records_on();
    current_.store(on, std::memory_order_relaxed);
    return on;
  }
  /// Whether records are on in the current (or just ended) step: it gets boundary markers. Hot
  /// (every scope boundary): one relaxed load.
  bool current() const noexcept { return current_.load(std::memory_order_relaxed); }
  /// The current (or just ended) step's place in the schedule (phase unscheduled without one).
  schedule_slot current_slot() const {
    detail::lock_guard lock(mu_);
    return slot_;
  }

  /// Training thread, at a step's end: `end_marker` is the step's end marker, enqueued on `stream`.
  void end_step(cudaStream_t stream, std::uint64_t end_marker, std::int64_t duration_ns) noexcept {
    const bool traced = current();
    if (traced && !next_records_on()) switch_off_after_step(stream, end_marker);
    if (budget_share_ <= 0) return;
    detail::lock_guard lock(mu_);
    budget_.step_done(duration_ns, traced);
  }

  /// The profiler's step worker: the attribution worker's CPU since the last call, charged to the
  /// budget with the recordings whose records it processed (recording_budget::charge_processing).
  void charge_processing(std::int64_t cpu_ns) noexcept {
    if (budget_share_ <= 0 || cpu_ns <= 0) return;
    detail::lock_guard lock(mu_);
    budget_.charge_processing(cpu_ns);
  }

  /// Worker: a switch-off waits for the GPU to pass the recorded step.
  bool off_pending() const {
    detail::lock_guard lock(mu_);
    return off_pending_;
  }

  /// Worker: performs a pending switch-off whose event completed, then force-flushes. True when it
  /// did; `flushed_marker` is then the recorded step's end marker.
  bool switch_off_if_due(std::uint64_t& flushed_marker) {
    {
      detail::lock_guard lock(mu_);
      if (!off_pending_) return false;
      const cudaError_t q = detail::rt::cudaEventQuery(off_event_);
      if (q == cudaErrorNotReady) return false;
      detail::rt::cudaGetLastError();
      reader_.disable_all();
      records_on_ = false;
      off_pending_ = false;
      flushed_marker = off_marker_;
    }
    reader_.flush(/*forced=*/true);
    return true;
  }

  /// "kernel records on 3 step(s) chosen to keep their cost under 0.25% ...", for status().
  std::string describe() const {
    if (schedule_) {
      detail::lock_guard lock(mu_);
      return "kernel records on " + std::to_string(scheduled_) + " step(s) by " + schedule_->describe() +
             ", warm-up steps' records discarded";
    }
    if (budget_share_ > 0) {
      detail::lock_guard lock(mu_);
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    "kernel records on %llu step(s) chosen to keep their cost under %.3g%% of run time: one cost "
                    "%+.0f%% of a step and %.1f ms of CPU to attribute its records, %.2f%% spent",
                    static_cast<unsigned long long>(budget_.recordings()), 100.0 * budget_.budget(),
                    100.0 * budget_.cost_per_recording(), budget_.processing_per_recording_ns() / 1e6,
                    100.0 * budget_.spent_share());
      return buf;
    }
    if (sample_every_ > 1) return "kernel records on 1 step in " + std::to_string(sample_every_);
    return "kernel records on every step";
  }

  /// The share of the run's time the recordings cost so far, as the budget measured it (0 without
  /// a budget).
  double spent_share() const {
    if (budget_share_ <= 0) return 0;
    detail::lock_guard lock(mu_);
    return budget_.spent_share();
  }
  /// Of spent_share(), what the recorded steps themselves took (0 without a budget).
  double step_share() const {
    if (budget_share_ <= 0) return 0;
    detail::lock_guard lock(mu_);
    return budget_.step_share();
  }

  /// How often records were switched on, and the training thread's time spent doing it.
  std::uint64_t switches() const noexcept { return switches_.load(); }
  std::int64_t switch_ns() const noexcept { return switch_ns_.load(); }

 private:
  /// The one decision point: records on for `step`? `slot` says where it sits in the schedule.
  /// mu_ held (the budget's state).
  bool decide(std::int32_t step, schedule_slot& slot) noexcept TRACEML_REQUIRES(mu_) {
    if (schedule_) {
      slot = schedule_->at(step);
      scheduled_ += slot.phase == schedule_phase::active;
      return slot.records_on();
    }
    slot = schedule_slot{};
    if (budget_share_ > 0) return budget_.should_record();
    return sample_every_ <= 1 || (step >= 0 && step % sample_every_ == 0);
  }

  /// Training thread, at a step's end: will the next step record too? Only a schedule knows ahead
  /// (the budget decides at each begin, and never records two steps in a row); then records stay
  /// on and the switch-off waits for the end of the run of recorded steps.
  bool next_records_on() const noexcept {
    if (!schedule_) return false;  // no lock taken at the step ends of a budget or 1-in-N run
    detail::lock_guard lock(mu_);
    return schedule_->at(static_cast<std::int64_t>(step_) + 1).records_on();
  }

  /// Sampling: every activity kind on or off together. Any enabled kind costs per launch (measured:
  /// with only MEMSET records left on, unsampled steps still paid about half of CUPTI's cost), so
  /// none stays on between recorded steps. On: training thread, at a recorded step's begin.
  void set_records_on() noexcept {
    if (!sampling()) return;
    detail::lock_guard lock(mu_);
    off_pending_ = false;  // a pending switch-off would cut this step's records: records stay on
    if (records_on_) return;
    const std::int64_t t0 = now_ns();
    reader_.enable_all();
    records_on_ = true;
    switch_ns_.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    switches_.fetch_add(1, std::memory_order_relaxed);
  }

  /// Off: not at the recorded step's end but once the GPU has run it, and then with a forced flush.
  /// Measured: records switched off at the step's end (its last work still queued) never came back
  /// from a default flush (CUPTI keeps a buffer with an unfinished record), and steps resolved
  /// without them. So the training thread records an event behind the step's end marker, and the
  /// worker, once the event completed, switches records off and force-flushes: everything of the
  /// recorded step is finished by then; records of later work cut off by the switch come back
  /// unfinished and are ignored (they belong to unrecorded steps).
  void switch_off_after_step(cudaStream_t stream, std::uint64_t end_marker) noexcept {
    if (!sampling()) return;
    detail::lock_guard lock(mu_);
    if (off_event_ && !detail::stream_capturing(stream) &&
        detail::rt::cudaEventRecord(off_event_, stream) == cudaSuccess) {
      off_pending_ = true;
      off_marker_ = end_marker;
      return;
    }
    detail::rt::cudaGetLastError();
    reader_.disable_all();  // no event: at once (this step's last records may be lost)
    records_on_ = false;
    off_pending_ = false;
  }

  const std::optional<recording_schedule> schedule_;  // decides when set (budget_share_ is then 0)
  const double budget_share_;
  const int sample_every_;
  mutable detail::mutex mu_;  // guards everything below but the atomics (a leaf but for reader calls)
  recording_budget budget_ TRACEML_GUARDED_BY(mu_);
  schedule_slot slot_ TRACEML_GUARDED_BY(mu_);           // the current step's place in the schedule
  std::int32_t step_ TRACEML_GUARDED_BY(mu_) = -1;       // the current step's number
  std::uint64_t scheduled_ TRACEML_GUARDED_BY(mu_) = 0;  // active steps so far (schedule only)
  bool records_on_ TRACEML_GUARDED_BY(mu_) = false;
  bool off_pending_ TRACEML_GUARDED_BY(mu_) = false;  // records go off once off_event_ completed
  // the recorded step's end marker behind which off_event_ waits
  std::uint64_t off_marker_ TRACEML_GUARDED_BY(mu_) = 0;
  cudaEvent_t off_event_ TRACEML_GUARDED_BY(mu_) = nullptr;
  cupti_reader& reader_;
  std::atomic<bool> current_{true};  // the current step is recorded (always, without sampling)
  std::atomic<std::uint64_t> switches_{0};
  std::atomic<std::int64_t> switch_ns_{0};
};

TRACEML_END_NAMESPACE
