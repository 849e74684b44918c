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
//   traceml::recording_budget b(0.01);             // records may cost 1% of the run
//   at step begin:  bool rec = b.should_record();
//   at step end:    b.step_done(end_ns - begin_ns, rec);
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

class recording_budget {
 public:
  /// `budget`: the share of run time recordings may cost (0.01 = 1%). `warmup`: leading steps that
  /// are neither recorded nor counted. `baseline_steps`: how many recent untraced steps make the
  /// baseline (at least 3 before the first recording).
  explicit recording_budget(double budget, int warmup = 3, std::size_t baseline_steps = 5) noexcept
      : budget_(budget), warmup_(warmup), window_(std::max<std::size_t>(baseline_steps, 3)) {}

  /// At a step's begin: record this step?
  bool should_record() const noexcept {
    if (budget_ <= 0 || seen_ < warmup_ || baseline_.size() < 3 || charging_next_) return false;
    if (clean_since_recording_ < 1 && recordings_ > 0) return false;  // a baseline step between recordings
    return spent_ns_ + expected_cost_ns() <= budget_ * static_cast<double>(total_ns_);
  }

  /// At a step's end: its wall duration and whether it was recorded.
  void step_done(std::int64_t duration_ns, bool recorded) {
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
    baseline_.push_back(duration_ns);
    if (baseline_.size() > window_) baseline_.pop_front();
  }

  std::uint64_t recordings() const noexcept { return recordings_; }
  /// Share of the counted run time spent on recordings so far (what the budget bounds).
  double spent_share() const noexcept { return total_ns_ > 0 ? spent_ns_ / static_cast<double>(total_ns_) : 0.0; }
  /// What one recording cost on average (the recorded step and the one after), as a share of the
  /// baseline step; 0 before the first.
  double cost_per_recording() const noexcept {
    const double b = baseline_ns();
    return recordings_ && b > 0 ? expected_cost_ns() / b : 0.0;
  }
  double budget() const noexcept { return budget_; }

 private:
  double baseline_ns() const {
    if (baseline_.empty()) return 0;
    std::vector<std::int64_t> v(baseline_.begin(), baseline_.end());
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return static_cast<double>(v[v.size() / 2]);
  }
  double expected_cost_ns() const noexcept {
    return recordings_ ? (recorded_ns_ + after_ns_) / static_cast<double>(recordings_) : 0.0;
  }

  double budget_;
  int warmup_;
  std::size_t window_;
  int seen_ = 0;
  std::int64_t total_ns_ = 0;
  double spent_ns_ = 0, recorded_ns_ = 0, after_ns_ = 0;
  std::uint64_t recordings_ = 0;
  bool charging_next_ = false;
  int clean_since_recording_ = 0;
  std::deque<std::int64_t> baseline_;
};

TRACEML_END_NAMESPACE
