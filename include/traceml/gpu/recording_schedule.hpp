// traceml: a recording schedule -- which steps CUPTI records, in windows, as torch.profiler.schedule
// lays them out. The alternative to the overhead budget (recording_budget.hpp) for users who want
// whole windows of consecutive steps, each written out as one Chrome trace (on_trace_ready in
// profiler.hpp).
//
// Semantics (those of torch.profiler.schedule): the first `skip_first` steps are skipped; then come
// cycles of `wait` steps (nothing recorded), `warmup` steps (kernel records on, results discarded:
// CUPTI's first recorded step carries one-time costs) and `active` steps (recorded). `repeat` is the
// number of cycles; 0 repeats them until the run ends. Steps are the profiler's step numbers (0, 1,
// ...). Pure arithmetic, no CUDA: the record switch (record_switch.hpp) asks it at each step begin,
// and tests/gpu/test_recording_schedule.cpp checks it against hand-written sequences.
//
//   traceml::recording_schedule s(/*wait=*/1, /*warmup=*/1, /*active=*/3, /*repeat=*/2);
//   s.at(0).phase == traceml::schedule_phase::wait
//   s.at(1).phase == traceml::schedule_phase::warmup
//   s.at(2..4)    active (cycle 0; at(4).last_active), 5 wait, 6 warmup, 7..9 active (cycle 1), 10.. done
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// Where a step sits in a schedule. `unscheduled`: no schedule decided the step (overhead budget,
/// one in N, every step, or no CUPTI source).
enum class schedule_phase : std::uint8_t { unscheduled, skip, wait, warmup, active, done };

inline const char* to_string(schedule_phase p) noexcept {
  switch (p) {
    case schedule_phase::unscheduled: return "unscheduled";
    case schedule_phase::skip: return "skip";
    case schedule_phase::wait: return "wait";
    case schedule_phase::warmup: return "warmup";
    case schedule_phase::active: return "active";
    case schedule_phase::done: return "done";
  }
  return "unscheduled";
}

/// One step's place in a schedule: its phase, its cycle and whether it closes an active window.
struct schedule_slot {
  schedule_phase phase = schedule_phase::unscheduled;
  std::int32_t cycle = -1;   ///< 0-based cycle of wait/warmup/active steps; -1 when skipped, done or unscheduled
  bool last_active = false;  ///< the last active step of its cycle: its window is complete after it
  /// Kernel records are on during the step (warm-up and active steps).
  bool records_on() const noexcept { return phase == schedule_phase::warmup || phase == schedule_phase::active; }
  bool operator==(const schedule_slot& o) const noexcept {
    return phase == o.phase && cycle == o.cycle && last_active == o.last_active;
  }
  bool operator!=(const schedule_slot& o) const noexcept { return !(*this == o); }
};

/// skip_first, then `repeat` cycles (0: forever) of wait, warmup and active steps. Immutable and
/// valid once constructed: every query is a few integer operations, no allocation.
class recording_schedule {
 public:
  /// The arguments in torch.profiler.schedule's order. Throws std::invalid_argument when a count is
  /// negative or `active` is 0 (a cycle that records nothing is a mistake, not a schedule).
  recording_schedule(int wait, int warmup, int active, int repeat = 0, int skip_first = 0)
      : wait_(wait), warmup_(warmup), active_(active), repeat_(repeat), skip_first_(skip_first) {
    check(wait, "wait", 0);
    check(warmup, "warmup", 0);
    check(active, "active", 1);
    check(repeat, "repeat", 0);
    check(skip_first, "skip_first", 0);
  }

  int wait() const noexcept { return wait_; }
  int warmup() const noexcept { return warmup_; }
  int active() const noexcept { return active_; }
  int repeat() const noexcept { return repeat_; }
  int skip_first() const noexcept { return skip_first_; }
  /// Steps in one cycle (at least 1). 64-bit: three ints may not fit in one.
  std::int64_t cycle_length() const noexcept { return static_cast<std::int64_t>(wait_) + warmup_ + active_; }

  /// Where `step` sits. Steps before 0 (outside any step) are skipped. Cost: a division.
  schedule_slot at(std::int64_t step) const noexcept {
    schedule_slot s;
    if (step < skip_first_) {
      s.phase = schedule_phase::skip;
      return s;
    }
    const std::int64_t n = step - skip_first_;
    const std::int64_t cycle = n / cycle_length();
    if (repeat_ > 0 && cycle >= repeat_) {
      s.phase = schedule_phase::done;
      return s;
    }
    const std::int64_t k = n % cycle_length();
    s.cycle = cycle > INT32_MAX ? INT32_MAX : static_cast<std::int32_t>(cycle);
    if (k < wait_)
      s.phase = schedule_phase::wait;
    else if (k < static_cast<std::int64_t>(wait_) + warmup_)
      s.phase = schedule_phase::warmup;
    else
      s.phase = schedule_phase::active;
    s.last_active = k == cycle_length() - 1;
    return s;
  }

  /// The first active step of `cycle` (its window is [first_active, first_active + active - 1]).
  std::int64_t first_active(std::int32_t cycle) const noexcept {
    return skip_first_ + static_cast<std::int64_t>(cycle) * cycle_length() + wait_ + warmup_;
  }

  /// "schedule(skip_first=0, wait=1, warmup=1, active=3, repeat=2)", for status lines.
  std::string describe() const {
    return "schedule(skip_first=" + std::to_string(skip_first_) + ", wait=" + std::to_string(wait_) +
           ", warmup=" + std::to_string(warmup_) + ", active=" + std::to_string(active_) +
           ", repeat=" + std::to_string(repeat_) + ")";
  }

 private:
  static void check(int value, const char* name, int min) {
    if (value >= min) return;
    throw std::invalid_argument(std::string("traceml::recording_schedule: ") + name + " must be " +
                                (min == 0 ? "0 or more" : "1 or more") + ", got " + std::to_string(value) +
                                (min > 0 ? " (a cycle without active steps records nothing)" : ""));
  }

  int wait_, warmup_, active_, repeat_, skip_first_;
};

TRACEML_END_NAMESPACE
