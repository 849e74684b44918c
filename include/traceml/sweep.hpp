// traceml: the schedule sweep. For an effective batch E, which micro-batch x accumulation (MxA,
// M x A = E) fits in memory and trains fastest on this machine, and how sure is that?
//
//   traceml::sweep_options o;
//   o.effective_batch = 8;                                   // 8x1, 4x2, 2x4, 1x8
//   o.is_out_of_memory = traceml::libtorch::is_out_of_memory; // torch_adapter.hpp (LibTorch's errors)
//   o.release_memory = [] { traceml::libtorch::release_cached_memory(); };
//   o.device_memory_bytes = traceml::libtorch::device_memory_bytes();
//   auto r = traceml::sweep(o, [&](const traceml::sweep_trial& t, traceml::profiler& prof) {
//     // build the model and optimizer, then t.steps optimizer steps of t.schedule, with prof
//     // attached (callbacks.add(prof), or TRACEML_STEP scopes)
//   });
//   std::fputs(traceml::format_sweep(r).c_str(), stdout);    // sinks/sweep_report.hpp
//
// In order:
//  1. plan: every factorisation MxA of the effective batch (and of larger ones, on request);
//  2. fit: a short probe of each micro-batch from the largest down, until one runs. An out-of-memory
//     error is a result: recorded, and the micro-batches above it are taken not to fit, those below
//     it to fit (activation memory grows with the micro-batch, not with the accumulation);
//  3. measure: the fitting candidates in `repeats` rounds, each round in the opposite order of the
//     one before (ABC CBA ABC ...), so that a machine whose speed drifts (clocks, heat, neighbours)
//     favours none: over two rounds every candidate's mean position is the same;
//  4. rank by time per example (within one effective batch: by step time), with the peak memory and
//     its headroom, and recommend with a reason and a confidence: a difference inside the ranges of
//     the repeats' medians is a tie (compare.hpp's noise check), and of tied candidates the one
//     needing the least memory is recommended (rank_sweep(), sweep_result.hpp: the result's types).
// Isolation: each trial has a profiler of its own, a trial that threw has the step it interrupted
// abandoned (recording_callback::abandon_step()), and release_memory runs after every trial,
// finished or thrown, so that every candidate is measured as if it had run first.
//
// Core: C++17 only. What is LibTorch's (recognising its out-of-memory errors, emptying its cache,
// the device's memory) comes in through the options, from torch_adapter.hpp.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "traceml/analysis/summary.hpp"
#include "traceml/analysis/sweep_result.hpp"
#include "traceml/config.hpp"
#include "traceml/profiler.hpp"

TRACEML_BEGIN_NAMESPACE

/// Every MxA with M x A = effective_batch, the largest micro-batch first: factorisations(4) is
/// {4x1, 2x2, 1x4}. Throws std::invalid_argument unless 1 <= effective_batch <= max_sweep_batch.
inline std::vector<sweep_schedule> factorisations(std::int64_t effective_batch) {
  if (effective_batch < 1 || effective_batch > max_sweep_batch)
    throw std::invalid_argument("sweep: effective batch " + std::to_string(effective_batch) + " is outside 1.." +
                                std::to_string(max_sweep_batch));
  std::vector<sweep_schedule> out;
  for (std::int64_t m = effective_batch; m >= 1; --m)
    if (effective_batch % m == 0) out.push_back({m, effective_batch / m});
  return out;
}

/// The order of the measured trials: `repeats` rounds over candidates 0..n-1, even rounds forward and
/// odd rounds backward (0 1 2, 2 1 0, 0 1 2 for n = 3, repeats = 3). Over each pair of rounds every
/// candidate's mean position is (n - 1) / 2, so a linear drift of the machine favours none.
inline std::vector<std::size_t> interleaved_order(std::size_t candidates, std::size_t repeats) {
  std::vector<std::size_t> order;
  order.reserve(candidates * repeats);
  for (std::size_t r = 0; r < repeats; ++r)
    for (std::size_t i = 0; i < candidates; ++i) order.push_back(r % 2 == 0 ? i : candidates - 1 - i);
  return order;
}

/// One run of one candidate, as the run function receives it.
struct sweep_trial {
  sweep_schedule schedule;
  bool probe = false;       ///< the fit probe: a few steps to see whether it fits; not ranked
  std::size_t repeat = 0;   ///< round, from 0 (0 for probes)
  std::size_t repeats = 0;  ///< rounds in all
  std::size_t steps = 0;    ///< optimizer steps to run
  std::size_t warmup = 0;   ///< of which the first are left out of the statistics
  std::string name;         ///< "4x2#1" for round 1, "4x2 probe" for the probe
};

/// How a trial ended, for sweep_options::on_trial.
struct sweep_trial_outcome {
  sweep_status status = sweep_status::measured;  ///< measured, out_of_memory or failed
  const run_result* run = nullptr;               ///< when measured
  std::string error;                             ///< first line of the exception's message otherwise
};

struct sweep_options {
  std::int64_t effective_batch = 0;  ///< required: examples per optimizer step
  /// Also sweep these larger effective batches (each above effective_batch). Candidates are then
  /// ranked by time per example; a larger effective batch also changes the optimisation (fewer
  /// updates per example), which the speed alone does not show.
  std::vector<std::int64_t> larger_batches;
  std::size_t steps = 20;       ///< optimizer steps per measured trial
  std::size_t warmup = 5;       ///< of which left out of the statistics (one-time costs)
  std::size_t repeats = 3;      ///< rounds; the spread of their medians decides ties
  std::size_t probe_steps = 2;  ///< steps of a fit probe; 0: no probe (an OOM shows in round 1)
  /// Per effective batch, how many of the largest fitting micro-batches are measured; 0: all of them.
  std::size_t max_candidates = 0;
  /// Headroom below which a candidate does not fit comfortably (a share of the device's memory):
  /// the recommendation warns and names the fastest candidate with more room.
  double min_headroom = 0.10;
  std::int64_t device_memory_bytes = -1;  ///< the device's total memory; -1: headroom unknown
  /// Whether an exception means out of memory; empty: looks_like_out_of_memory().
  std::function<bool(const std::exception&)> is_out_of_memory;
  /// Runs after every trial, finished or thrown: release cached memory (torch_adapter.hpp).
  std::function<void()> release_memory;
  /// sweep() only: adjusts each trial's profiler options (outputs, GPU figures' names, live view)
  /// after the sweep set run_name, warmup_steps, expected_steps and print_table = false.
  std::function<void(const sweep_trial&, profiler_options&)> configure;
  /// Called after every trial, on the sweep's thread (progress lines).
  std::function<void(const sweep_trial&, const sweep_trial_outcome&)> on_trial;
};

/// The default out-of-memory test (no LibTorch): std::bad_alloc, or a message that says "out of
/// memory" (the CUDA runtime's and LibTorch's wording). torch_adapter.hpp's is more thorough.
inline bool looks_like_out_of_memory(const std::exception& e) {
  return dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
         std::string(e.what()).find("out of memory") != std::string::npos;
}

/// Measures one trial: runs it and returns its run (statistics over its steps after warm-up), or
/// throws. sweep() builds one from a run function and a profiler per trial; a test can hand-make runs.
using sweep_measure = std::function<run_result(const sweep_trial&)>;

namespace detail {

/// The first line of an exception's message, at most 300 bytes (CUDA's are long and multi-line).
inline std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  if (line.size() > 300) line = line.substr(0, 297) + "...";
  return line;
}

inline void check_sweep_options(const sweep_options& o) {
  (void)factorisations(o.effective_batch);  // throws naming the batch
  for (const auto b : o.larger_batches) {
    if (b <= o.effective_batch)
      throw std::invalid_argument("sweep: larger batch " + std::to_string(b) + " is not above the effective batch " +
                                  std::to_string(o.effective_batch));
    (void)factorisations(b);
  }
  if (o.repeats == 0) throw std::invalid_argument("sweep: repeats must be at least 1");
  if (o.steps == 0 || o.warmup >= o.steps)
    throw std::invalid_argument("sweep: " + std::to_string(o.steps) + " steps per trial with " +
                                std::to_string(o.warmup) +
                                " warm-up steps leave none measured (warmup must be below steps)");
}

/// The one place a trial runs: an exception is a result (out of memory or failed), memory is
/// released afterwards whatever happened, and the caller hears of it.
inline sweep_trial_outcome run_trial(const sweep_options& o, const sweep_measure& measure, const sweep_trial& t,
                                     run_result& run) {
  sweep_trial_outcome out;
  try {
    run = measure(t);
    out.run = &run;
  } catch (const std::exception& e) {
    const bool oom = o.is_out_of_memory ? o.is_out_of_memory(e) : looks_like_out_of_memory(e);
    out.status = oom ? sweep_status::out_of_memory : sweep_status::failed;
    out.error = first_line(e.what());
  } catch (...) {
    out.status = sweep_status::failed;
    out.error = "an exception that is not a std::exception";
  }
  if (o.release_memory) o.release_memory();
  if (o.on_trial) o.on_trial(t, out);
  return out;
}

inline sweep_trial make_trial(const sweep_schedule& s, bool probe, std::size_t repeat, const sweep_options& o) {
  sweep_trial t;
  t.schedule = s;
  t.probe = probe;
  t.repeat = repeat;
  t.repeats = o.repeats;
  t.steps = probe ? o.probe_steps : o.steps;
  t.warmup = probe ? 0 : o.warmup;
  t.name = s.name() + (probe ? std::string(" probe") : "#" + std::to_string(repeat + 1));
  return t;
}

/// Probes micro-batches from the largest down until one runs (step 2 of the file comment); marks
/// the candidates it learnt cannot run. Returns the largest micro-batch that ran (0: none).
inline std::int64_t find_fit(std::vector<sweep_candidate>& plan, const sweep_options& o, const sweep_measure& measure) {
  std::vector<std::int64_t> micro;
  for (const auto& c : plan) micro.push_back(c.schedule.micro_batch);
  std::sort(micro.rbegin(), micro.rend());
  micro.erase(std::unique(micro.begin(), micro.end()), micro.end());
  for (const auto m : micro) {
    // The probe runs the fewest accumulation steps with this micro-batch: memory is the same, time less.
    sweep_candidate* probe = nullptr;
    for (auto& c : plan)
      if (c.schedule.micro_batch == m && (!probe || c.schedule.accumulation < probe->schedule.accumulation)) probe = &c;
    run_result discarded;  // a probe's figures include one-time costs: not ranked
    const auto out = run_trial(o, measure, make_trial(probe->schedule, true, 0, o), discarded);
    if (out.status == sweep_status::measured) return m;
    for (auto& c : plan) {
      if (c.schedule.micro_batch != m) continue;
      c.status = out.status;
      const std::string what = out.status == sweep_status::out_of_memory ? "out of memory" : "failed";
      c.note = &c == probe ? what + " in the fit probe: " + out.error
                           : what + " in the fit probe of " + probe->name() + " (same micro-batch): " + out.error;
    }
  }
  return 0;
}

/// Which fitting candidates are measured: per effective batch, the `max_candidates` largest
/// micro-batches (all with 0). Returns their indices in plan order.
inline std::vector<std::size_t> pick_measured(std::vector<sweep_candidate>& plan, std::int64_t largest_fit,
                                              const sweep_options& o) {
  std::vector<std::size_t> picked;
  std::int64_t batch = 0;
  std::size_t taken = 0;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    auto& c = plan[i];
    if (c.schedule.effective_batch() != batch) {
      batch = c.schedule.effective_batch();
      taken = 0;
    }
    if (c.schedule.micro_batch > largest_fit) continue;  // its probe ran out of memory or failed
    if (o.max_candidates > 0 && taken == o.max_candidates) {
      c.note = "not measured: only the " + std::to_string(o.max_candidates) +
               " largest micro-batches that fit are measured (max_candidates)";
      continue;
    }
    ++taken;
    picked.push_back(i);
  }
  return picked;
}

/// The interleaved rounds (step 3): a candidate that runs out of memory or fails in a round leaves
/// the sweep with what it learnt, and its earlier repeats are dropped (it fits only sometimes).
inline void measure_rounds(std::vector<sweep_candidate>& plan, const std::vector<std::size_t>& measured,
                           const sweep_options& o, const sweep_measure& measure) {
  const auto order = interleaved_order(measured.size(), o.repeats);
  for (std::size_t k = 0; k < order.size(); ++k) {
    auto& c = plan[measured[order[k]]];
    const std::size_t repeat = k / measured.size();
    if (repeat > 0 && c.status != sweep_status::measured) continue;  // left in an earlier round
    run_result run;
    const auto out = run_trial(o, measure, make_trial(c.schedule, false, repeat, o), run);
    c.status = out.status;
    if (out.status == sweep_status::measured) {
      c.runs.push_back(std::move(run));
      continue;
    }
    c.runs.clear();
    c.note = std::string(out.status == sweep_status::out_of_memory ? "out of memory" : "failed") + " in repeat " +
             std::to_string(repeat + 1) + " of " + std::to_string(o.repeats) + ": " + out.error;
  }
}

}  // namespace detail

/// The sweep with a measure function of the caller's (see the file comment for the steps). Throws
/// std::invalid_argument for options that cannot make a sweep, naming the field and value.
inline sweep_result run_sweep(const sweep_options& o, const sweep_measure& measure) {
  detail::check_sweep_options(o);
  sweep_result r;
  r.repeats = o.repeats;
  r.steps = o.steps;
  r.warmup = o.warmup;
  r.probe_steps = o.probe_steps;
  r.device_memory_bytes = o.device_memory_bytes;
  std::vector<std::int64_t> batches{o.effective_batch};
  for (const auto b : o.larger_batches)
    if (std::find(batches.begin(), batches.end(), b) == batches.end()) batches.push_back(b);
  std::sort(batches.begin(), batches.end());
  for (const auto b : batches)
    for (const auto& s : factorisations(b)) {
      sweep_candidate c;
      c.schedule = s;
      r.candidates.push_back(std::move(c));
    }
  std::int64_t largest = 0;
  for (const auto& c : r.candidates) largest = std::max(largest, c.schedule.micro_batch);
  r.largest_fitting_micro_batch = o.probe_steps > 0 ? detail::find_fit(r.candidates, o, measure) : largest;
  auto measured = detail::pick_measured(r.candidates, r.largest_fitting_micro_batch, o);
  for (const auto i : measured) r.candidates[i].status = sweep_status::measured;
  detail::measure_rounds(r.candidates, measured, o, measure);
  if (o.probe_steps == 0) {
    // Without probes, the largest micro-batch that fits is the largest that ran every round.
    r.largest_fitting_micro_batch = 0;
    for (const auto& c : r.candidates)
      if (c.status == sweep_status::measured)
        r.largest_fitting_micro_batch = std::max(r.largest_fitting_micro_batch, c.schedule.micro_batch);
  }
  rank_sweep(r, o.min_headroom);
  return r;
}

TRACEML_BEGIN_MODE_NAMESPACE
/// The function a trainer gives the sweep: run `t.steps` optimizer steps of `t.schedule` (from the
/// same initial state for every trial) with `prof` attached: callbacks.add(prof), or steps and phases
/// as scopes. May throw (out of memory is expected); `prof` is new for every trial.
using sweep_run = std::function<void(const sweep_trial& t, profiler& prof)>;

/// The sweep of a training loop: every trial gets a profiler of its own (options from
/// sweep_options::configure), finished when the trial returns. A trial that throws has the step it
/// interrupted abandoned (its open hooks discarded) and its profiler dropped, so nothing of it
/// reaches the next trial.
inline sweep_result sweep(const sweep_options& o, const sweep_run& run) {
  return run_sweep(o, [&](const sweep_trial& t) {
    profiler_options po = profiler_options::named(t.name);
    po.warmup_steps = t.warmup;
    po.expected_steps = t.steps;
    po.print_table = false;
    if (o.configure) o.configure(t, po);
    profiler prof(po);
    try {
      run(t, prof);
    } catch (...) {
      prof.abandon_step();  // before the profiler finishes: the interrupted step is not a step
      throw;
    }
    return prof.finish();
  });
}
TRACEML_END_MODE_NAMESPACE

TRACEML_END_NAMESPACE
