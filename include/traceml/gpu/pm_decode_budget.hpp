// traceml: how much of the hardware counters' decoding runs, chosen from what it costs -- windows of
// evaluated samples, with gaps between them long enough that decoding stays within a share of one
// core.
//
// Why: evaluating one sample's metrics is CUPTI's host work, about 25-35 us of CPU with the default
// counters (small_steps and qwen3_overhead, per-thread CPU of "traceml counters"). At the 1 ms
// interval that is 2.5-3.5% of one core for as long as the training runs: more than everything else
// the profiler costs together, and on a host with few cores per GPU that core is the trainer's own
// (data loading, launches). Most of a pass's cost is fixed by the counter-data image, not by the
// samples in it, so evaluating fewer of them would save little; sampling less often would blur every
// phase. So the sampler takes and evaluates every sample of a window of `window_passes` decode
// passes (2 s at the default 200 ms period), then stops the hardware for a gap of passes (nothing to
// decode; the steps in the gap go without counter figures, which say how many steps they rest on).
// The gap is chosen from the measured cost of a window's pass and of a gap's pass (near nothing),
// each time a window closes, so that decoding as a whole stays within `budget` of one core; where
// evaluating everything fits the budget there is no gap. The gap never passes max_gap_windows
// windows: counters then rest on at least 1% of the run.
//
// Pure arithmetic on the decoder's thread (pm_sampler.hpp asks it before each of its passes and
// tells it each pass's cost); tested on the CPU (tests/gpu/test_pm_samples.cpp).
//
//   traceml::pm_decode_budget b(0.0025, 10);           // 0.25% of one core, windows of 10 passes
//   before a pass:  bool window = b.evaluating();      // else the hardware stays stopped
//   after it:       b.passed(window, cost_ns, period_ns);
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// A share of one core for the decoding that, with the training thread's hooks and CUPTI's
/// recordings (each within 0.1-0.25% of the step) and the profiler's other threads, keeps the whole
/// under 1%: pm_sampler_options::decode_budget's default.
inline constexpr double default_decode_budget = 0.0025;

class pm_decode_budget {
 public:
  /// The gap never passes this many windows' worth of passes: counters rest on >= 1% of the run.
  static constexpr int max_gap_windows = 99;

  /// `budget`: the share of one core decoding may use (0.0025 = 0.25%); 0 or less: every sample
  /// evaluated, whatever it costs. `window_passes`: evaluating passes per window (at least 1).
  explicit pm_decode_budget(double budget, int window_passes = 10) noexcept { set(budget, window_passes); }

  /// New settings (a new source took the sampler); a window opens with the next pass.
  void set(double budget, int window_passes) noexcept {
    budget_ = budget;
    window_passes_ = std::max(window_passes, 1);
    open_window();
  }

  /// The next passes evaluate, for a whole window (the sampler was taken or flushed: its samples are
  /// wanted now). The costs measured so far are kept.
  void open_window() noexcept { left_ = window_passes_, in_window_ = true; }

  /// Whether the next periodic pass takes and evaluates samples (else the hardware stays stopped).
  bool evaluating() const noexcept { return in_window_; }

  /// After a periodic pass: whether it was a window's, its cost (CPU time of the pass) and the
  /// decode period. Closing a window chooses the gap that follows it.
  void passed(bool evaluated, std::int64_t cost_ns, std::int64_t period_ns) noexcept {
    cost_ns = std::max<std::int64_t>(cost_ns, 0);
    if (evaluated) {
      evaluate_ns_ += cost_ns, ++evaluated_;
    } else {
      gap_ns_ += cost_ns, ++gap_passes_run_;
    }
    if (--left_ > 0) return;
    if (in_window_) {
      decided_ = true;
      gap_ = choose_gap(period_ns);
      in_window_ = gap_ == 0;
      left_ = in_window_ ? window_passes_ : gap_;
    } else {
      open_window();
    }
  }

  /// The gap chosen after the last window, in passes (0: every sample is evaluated).
  int gap_passes() const noexcept { return gap_; }
  int window_passes() const noexcept { return window_passes_; }
  /// Mean cost of a window's and of a gap's pass so far (0 when none ran).
  double mean_evaluate_ns() const noexcept { return evaluated_ ? static_cast<double>(evaluate_ns_) / evaluated_ : 0; }
  double mean_gap_ns() const noexcept { return gap_passes_run_ ? static_cast<double>(gap_ns_) / gap_passes_run_ : 0; }
  /// Whether the gaps' passes alone cost more than the budget (then the gap is the longest allowed).
  bool over_budget_in_gaps(std::int64_t period_ns) const noexcept {
    return budget_ > 0 && gap_passes_run_ > 0 && mean_gap_ns() >= budget_ * static_cast<double>(period_ns);
  }

  /// What was chosen and why, for the status line ("" without a budget, or before the first window
  /// closed: nothing chosen yet).
  std::string describe(std::int64_t period_ns) const {
    if (budget_ <= 0 || !decided_) return "";
    const double period = static_cast<double>(period_ns);
    const double all_pct = period > 0 ? 100.0 * mean_evaluate_ns() / period : 0;
    char text[320];
    if (gap_ == 0) {
      std::snprintf(text, sizeof text, "every sample evaluated (%.2f%% of one core, within the %.3g%% budget)", all_pct,
                    100 * budget_);
      return text;
    }
    std::snprintf(text, sizeof text,
                  "samples taken in windows of %.1f s with %.1f s between them, the hardware stopped (evaluating "
                  "every sample would take %.2f%% of one core, over the %.3g%% budget%s)",
                  window_passes_ * period / 1e9, gap_ * period / 1e9, all_pct, 100 * budget_,
                  over_budget_in_gaps(period_ns) ? "; the gaps alone exceed it" : "");
    return text;
  }

 private:
  /// Passes between windows so that (window x evaluate + gap x gap pass) <= budget x (window + gap) x
  /// period: gap = window x (evaluate - B) / (B - gap pass), B = budget x period.
  int choose_gap(std::int64_t period_ns) const noexcept {
    const int most = max_gap_windows * window_passes_;
    const double allowed = budget_ * static_cast<double>(period_ns);
    const double e = mean_evaluate_ns(), d = mean_gap_ns();
    if (budget_ <= 0 || e <= allowed) return 0;
    if (d >= allowed) return most;
    const double gap = std::ceil(window_passes_ * (e - allowed) / (allowed - d));
    return static_cast<int>(std::min<double>(gap, most));
  }

  double budget_ = 0;
  int window_passes_ = 10;
  int left_ = 10;          // passes left in the current window or gap
  bool in_window_ = true;  // evaluating now
  bool decided_ = false;   // a window closed: gap_ was chosen
  int gap_ = 0;
  std::int64_t evaluate_ns_ = 0, gap_ns_ = 0;
  std::uint64_t evaluated_ = 0, gap_passes_run_ = 0;
};

TRACEML_END_NAMESPACE
