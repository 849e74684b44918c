// traceml: which steps get CUDA-event phase timing, chosen per run from what the events cost the
// training thread against the length of its steps.
//
// Why: an event record costs the training thread ~1-2 us (with the stream's capture check and the
// pool's lock), two per step and phase scope. On a 300 ms step that is nothing; on a 2 ms step of
// five scopes it is ~15 us, 0.7% of the loop, more than the whole profiler may cost. So the events'
// own cost decides: while their measured time per timed step stays within `budget` x the mean step,
// every step is timed; beyond, one step in `every`, with every = ceil(share / budget), so that the
// events cost the run at most the budget. The choice is revisited every window of steps (a run
// whose steps grow, or whose phases multiply, changes it), and the status line says what was chosen
// and why. Steps left untimed report no GPU time; every GPU figure counts the steps it rests on.
//
// Pure arithmetic and two atomics: the sources (cuda_events_source.hpp, cupti_source.hpp) ask it at
// each step's begin, add the time of each event record, and tell it each step's wall time.
//
//   traceml::event_sampling s(0.0025);              // events may cost 0.25% of the run
//   at step begin (training thread):  bool timed = s.begin_step();
//   around each event record:         s.add_cost(ns);   // any thread, only on timed steps
//   at step end (training thread):    s.end_step(end_ns - begin_ns);
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// The events' default share of the run: with CUPTI's 0.25% (cupti_options::overhead_budget) and
/// the profiler's own step end (~0.2 us on the training thread, benchmarks/cpu_step_cost) the whole
/// stays under 0.5% at any step length. On the graphed Qwen3 trainer (1x4, an H100) its 26 event
/// records took 254 us of a 103 ms step: 0.25%, the earlier budget, all of it.
inline constexpr double default_event_budget = 0.001;

class event_sampling {
 public:
  /// The sampling interval never passes this: GPU figures then rest on at least 1% of the steps.
  static constexpr int max_every = 100;
  /// Steps per decision: enough that one slow step (a checkpoint, a recompilation) does not decide.
  static constexpr int window_steps = 32;
  /// Timed steps a decision needs at least (a window at every = 100 is extended until it has them).
  static constexpr int window_timed_steps = 4;

  /// `budget`: the share of the run the events may cost (0.0025 = 0.25%); 0 or less: every step,
  /// whatever it costs. `skip`: leading steps neither timed differently nor counted (the first
  /// event records and the first steps pay one-time costs).
  explicit event_sampling(double budget, int skip = 2) noexcept : budget_(budget), skip_(skip) {}

  /// Training thread, at a step's begin: whether this step gets events.
  bool begin_step() noexcept {
    const int every = every_.load(std::memory_order_relaxed);
    const bool timed = every <= 1 || seen_ % every == 0;
    ++seen_;
    step_cost_.store(0, std::memory_order_relaxed);
    timing_.store(timed, std::memory_order_relaxed);
    return timed;
  }
  /// Whether the step begun last is timed (its scopes' hooks ask, on any thread).
  bool timing() const noexcept { return timing_.load(std::memory_order_relaxed); }

  /// Any thread recording an event of the current step: the record's time on that thread.
  void add_cost(std::int64_t ns) noexcept { step_cost_.fetch_add(ns, std::memory_order_relaxed); }

  /// Training thread, at the step's end: its wall time (CPU clock). Decides at each window's end.
  void end_step(std::int64_t wall_ns) noexcept {
    if (seen_ <= skip_) return;
    if (timing()) {
      window_cost_ns_ += step_cost_.load(std::memory_order_relaxed);
      ++window_timed_;
    }
    window_wall_ns_ += std::max<std::int64_t>(wall_ns, 0);
    ++window_steps_;
    if (window_steps_ < window_steps || window_timed_ < window_timed_steps) return;
    const double cost = static_cast<double>(window_cost_ns_) / window_timed_;
    const double wall = static_cast<double>(window_wall_ns_) / window_steps_;
    int every = 1;
    if (budget_ > 0 && wall > 0 && cost / wall > budget_)
      every = static_cast<int>(std::min<double>(max_every, std::ceil(cost / wall / budget_)));
    every_.store(every, std::memory_order_relaxed);
    last_cost_ns_.store(static_cast<std::int64_t>(cost), std::memory_order_relaxed);
    last_wall_ns_.store(static_cast<std::int64_t>(wall), std::memory_order_relaxed);
    decisions_.fetch_add(1, std::memory_order_relaxed);
    window_cost_ns_ = window_wall_ns_ = 0;
    window_steps_ = window_timed_ = 0;
  }

  /// One step in every() is timed (1: every step).
  int every() const noexcept { return every_.load(std::memory_order_relaxed); }

  /// What was chosen and why, for the source's status line (any thread): "on every step (events
  /// 8.1 us a step, 0.40% of 2.03 ms steps; budget 0.25%)".
  std::string describe() const {
    const int every = this->every();
    std::string s = every <= 1 ? "on every step" : "on 1 step in " + std::to_string(every);
    if (decisions_.load(std::memory_order_relaxed) == 0) {
      if (budget_ > 0) s += " (too few steps to measure what the events cost)";
      return s;
    }
    const double cost_us = static_cast<double>(last_cost_ns_.load(std::memory_order_relaxed)) / 1e3;
    const double wall_ms = static_cast<double>(last_wall_ns_.load(std::memory_order_relaxed)) / 1e6;
    char buf[160];
    std::snprintf(buf, sizeof buf, " (events %.1f us a timed step, %.2f%% of %.2f ms steps; budget %.3g%%)", cost_us,
                  wall_ms > 0 ? 100.0 * cost_us / 1e3 / wall_ms : 0.0, wall_ms, 100.0 * budget_);
    return s + buf;
  }

 private:
  double budget_;
  int skip_;
  // Training thread only.
  int seen_ = 0;
  std::int64_t window_cost_ns_ = 0, window_wall_ns_ = 0;
  int window_steps_ = 0, window_timed_ = 0;
  // Read by other threads (the status line) or written by them (a phase's events on another thread).
  std::atomic<bool> timing_{true};
  std::atomic<std::int64_t> step_cost_{0};
  std::atomic<int> every_{1};
  std::atomic<std::int64_t> last_cost_ns_{0}, last_wall_ns_{0};
  std::atomic<int> decisions_{0};
};

TRACEML_END_NAMESPACE
