// traceml: which steps CUPTI may record, so that recording costs at most a given share of the run.
//
// Why: CUPTI's kernel records cost per launch, inside the driver, and nothing traceml does removes
// that (measured on an H200: +7% to +14% step time with every step recorded, the same with markers,
// clock callback and periodic flushes switched off; docs/attribution.md). A step without records
// costs what an untraced step costs. So the cost is a choice of how many steps to record.
//
// How: steps run untraced and their durations form a baseline (the median of the last few). A step
// is recorded when the cost spent so far, plus what a recording is expected to cost, fits in
// `budget` x the run time so far. A recorded step is charged what it took beyond the baseline, and
// so is the step after it (switching records off has after-effects); neither enters the baseline.
// Warm-up steps (one-time costs) are neither recorded nor counted. Pure arithmetic, no CUDA: the
// CUPTI source (cupti_source.hpp) asks it at each step begin and tells it each step's duration.
//
// A recording also costs after its step: its records are attributed to phases on the profiler's
// attribution worker (milliseconds of CPU for a step of thousands of kernels; on the eager Qwen3
// trainer that thread took as much of a core as the recorded steps' slowdown). That CPU is charged
// here too (charge_processing), so the budget bounds what recording costs wherever it is paid, and
// the expected cost of the next recording includes it.
//
//   traceml::recording_budget b(0.01);             // records may cost 1% of the run
//   at step begin:  bool rec = b.should_record();
//   at step end:    b.step_done(end_ns - begin_ns, rec);
//   attributed:     b.charge_processing(cpu_ns);   // the attribution worker's CPU since the last call
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// CUPTI's kernel records' default share of the run time (cupti_options::overhead_budget; why this
/// share: cupti_source.hpp).
inline constexpr double default_recording_budget = 0.0025;

/// Fixed-size state, no allocation: the baseline is a ring of at most `max_baseline_steps`.
class recording_budget {
 public:
  static constexpr std::size_t max_baseline_steps = 64;

  /// `budget`: the share of run time recordings may cost (0.01 = 1%). `warmup`: leading steps that
  /// are neither recorded nor counted. `baseline_steps`: how many recent untraced steps make the
  /// baseline (at least 3 before the first recording; at most max_baseline_steps).
  explicit recording_budget(double budget, int warmup = 3, std::size_t baseline_steps = 5) noexcept
      : budget_(budget),
        warmup_(warmup),
        window_(std::min(std::max<std::size_t>(baseline_steps, 3), max_baseline_steps)) {}

  /// At a step's begin: record this step? Cost: a few compares and a multiply.
  bool should_record() const noexcept {
    if (budget_ <= 0 || seen_ < warmup_ || baseline_size() < 3 || charging_next_) return false;
    if (clean_since_recording_ < 1 && recordings_ > 0) return false;  // a baseline step between recordings
    return spent_ns_ + expected_cost_ns() <= budget_ * static_cast<double>(total_ns_);
  }

  /// At a step's end: its wall duration and whether it was recorded. Cost: a ring write, or, after
  /// a recording, the baseline's median (window^2 compares: 25 at the default window).
  void step_done(std::int64_t duration_ns, bool recorded) noexcept {
    if (duration_ns < 0) duration_ns = 0;
    if (seen_++ < warmup_) return;
    total_ns_ += duration_ns;
    if (recorded || charging_next_) {
      const double extra = std::max(0.0, static_cast<double>(duration_ns) - baseline_ns());
      spent_ns_ += extra;
      if (recorded) {
        ++recordings_;
        recorded_ns_ += extra;
        charging_next_ = true;
        clean_since_recording_ = 0;
      } else {
        after_ns_ += extra;
        charging_next_ = false;
      }
      return;
    }
    ++clean_since_recording_;
    baseline_[next_ % window_] = duration_ns;  // the oldest makes room once the window is full
    ++next_;
  }

  /// The CPU the recordings' records took to process since the last call (the attribution worker's):
  /// spent like the recorded steps' own cost.
  void charge_processing(std::int64_t cpu_ns) noexcept {
    if (cpu_ns <= 0) return;
    spent_ns_ += static_cast<double>(cpu_ns);
    processing_ns_ += static_cast<double>(cpu_ns);
  }

  std::uint64_t recordings() const noexcept { return recordings_; }
  /// The processing CPU charged per recording so far (0 before the first), in nanoseconds.
  double processing_per_recording_ns() const noexcept {
    return recordings_ ? processing_ns_ / static_cast<double>(recordings_) : 0.0;
  }
  /// Share of the counted run time spent on recordings so far (what the budget bounds): the recorded
  /// steps' slowdown and their records' processing.
  double spent_share() const noexcept { return total_ns_ > 0 ? spent_ns_ / static_cast<double>(total_ns_) : 0.0; }
  /// The part of spent_share() that the steps themselves took (their slowdown, not the processing).
  double step_share() const noexcept {
    return total_ns_ > 0 ? (spent_ns_ - processing_ns_) / static_cast<double>(total_ns_) : 0.0;
  }
  /// What one recording cost on average (the recorded step and the one after, not its processing),
  /// as a share of the baseline step; 0 before the first.
  double cost_per_recording() const noexcept {
    const double b = baseline_ns();
    return recordings_ && b > 0 ? (recorded_ns_ + after_ns_) / static_cast<double>(recordings_) / b : 0.0;
  }
  double budget() const noexcept { return budget_; }
  /// The baseline step duration: the median of the last untraced steps (for an even count, the
  /// upper of the two middle ones); 0 before the first.
  double baseline_ns() const noexcept {
    const std::size_t n = baseline_size();
    return n ? static_cast<double>(upper_median(baseline_.data(), n)) : 0.0;
  }

 private:
  std::size_t baseline_size() const noexcept { return std::min<std::size_t>(next_, window_); }

  /// The element of rank n/2 in sorted order, found by counting (n^2 compares, no copy: n is small).
  static std::int64_t upper_median(const std::int64_t* v, std::size_t n) noexcept {
    const std::size_t k = n / 2;
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t less = 0, equal = 0;
      for (std::size_t j = 0; j < n; ++j) {
        less += v[j] < v[i];
        equal += v[j] == v[i];
      }
      if (less <= k && k < less + equal) return v[i];
    }
    return v[0];  // not reached: some element has rank k
  }
  /// What the next recording is expected to cost: the mean of the earlier ones, their processing
  /// included.
  double expected_cost_ns() const noexcept {
    return recordings_ ? (recorded_ns_ + after_ns_ + processing_ns_) / static_cast<double>(recordings_) : 0.0;
  }

  double budget_;
  int warmup_;
  std::size_t window_;
  int seen_ = 0;
  std::int64_t total_ns_ = 0;
  double spent_ns_ = 0, recorded_ns_ = 0, after_ns_ = 0, processing_ns_ = 0;
  std::uint64_t recordings_ = 0;
  bool charging_next_ = false;
  int clean_since_recording_ = 0;
  std::array<std::int64_t, max_baseline_steps> baseline_{};  // a ring over the first window_ slots
  std::uint64_t next_ = 0;                                   // untraced steps seen (next ring slot)
};

TRACEML_END_NAMESPACE
