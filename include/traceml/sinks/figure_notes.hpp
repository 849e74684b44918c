// traceml: the words every sink uses to say what a figure rests on ("1 of 10 steps", "recording
// cost +45.8% per recorded step"). The table and the HTML report say the same thing in the same
// words because they call these; the numbers in them are formatted by detail/format.hpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/format.hpp"
#include "traceml/gpu/idle_split.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// "1 of 10 steps", "10 of 10 steps", "1 step" (when `of` is 0: the total is not known).
inline std::string steps_of(std::size_t n, std::size_t of) {
  if (of == 0) return std::to_string(n) + (n == 1 ? " step" : " steps");
  return std::to_string(n) + " of " + std::to_string(of) + (of == 1 ? " step" : " steps");
}

/// How many steps a run's per-phase GPU time rests on: the step window's count (the phases share
/// it: a step without the phase counts 0 there), or the largest phase count without a step figure.
inline std::size_t gpu_time_steps(const run_summary& s) {
  if (s.step_gpu_ms) return s.step_gpu_ms->count;
  std::size_t n = 0;
  for (const auto& p : s.phases)
    if (p.gpu_ms && p.gpu_ms->count > n) n = p.gpu_ms->count;
  return n;
}

/// Where the GPU time came from: CUDA events when it covers more steps than kernel records did,
/// otherwise the boundary markers of the recorded steps.
inline const char* gpu_time_source(const run_summary& s) {
  return gpu_time_steps(s) > s.recording.recorded_steps ? "CUDA events" : "phase boundaries";
}

/// How many steps the kernel figures rest on (recorded steps after warm-up); 0 without any.
inline std::size_t kernel_steps(const run_summary& s) {
  if (s.step_kernels) return s.step_kernels->steps;
  for (const auto& p : s.phases)
    if (p.kernels) return p.kernels->steps;
  return 0;
}

/// What the idle split's kinds and the launch statistics mean, with their thresholds, in one sentence.
inline std::string idle_split_note() {
  return "kernel gaps: nothing on the GPU for under " + fixed_text(static_cast<double>(idle_kernel_gap_ns) / 1e3, 0) +
         " us between two activities; other: other work of the step ran beside the phase (another stream); "
         "host: nothing queued (longer gaps, or before the first or after the last activity); median kernel "
         "within 0.5% (DDSketch); short: kernels under " +
         fixed_text(static_cast<double>(short_kernel_ns) / 1e3, 0) +
         " us; copy: the union of the phase's copies, share of its GPU window";
}

/// How many steps the hardware-counter figures rest on (sampled steps after warm-up); 0 without any.
inline std::size_t counter_steps(const run_summary& s) {
  if (s.step_counters) return s.step_counters->steps;
  for (const auto& p : s.phases)
    if (p.counters) return p.counters->steps;
  return 0;
}

/// The most steps that were both sampled and recorded under any phase or the step: the steps on which
/// the hardware counters' busy share can be held against the kernel records'; 0 when there were none.
inline std::size_t counters_and_records_steps(const run_summary& s) {
  std::size_t n = s.step_counters ? s.step_counters->recorded_steps : 0;
  for (const auto& p : s.phases)
    if (p.counters) n = std::max(n, p.counters->recorded_steps);
  return n;
}

/// Below this many samples per step a phase's counter shares are coarse: the samples straddling its
/// window's edges weigh as much as those inside, and the samples' clock is aligned to tens of
/// microseconds (docs/hardware_counters.md).
constexpr double few_samples_per_step = 5;

/// "coarse in dataloader, optimizer (under 5 samples per step: ...)": names the sampled phases whose
/// windows held fewer than few_samples_per_step samples per step; "" when none.
inline std::string coarse_counter_note(const run_summary& s) {
  std::string names;
  for (const auto& p : s.phases)
    if (p.counters && p.counters->steps > 0 && p.counters->samples_per_step < few_samples_per_step)
      names += (names.empty() ? "" : ", ") + p.name;
  if (names.empty()) return names;
  return "coarse in " + names + " (under " + fixed_text(few_samples_per_step, 0) +
         " samples per step: its edges weigh as much as its inside)";
}

/// Whether some phase's GPU work ran beside other work on recorded steps (kernel_summary::
/// hidden_share): the table and the HTML show the hidden share only then.
inline bool any_phase_hidden(const run_summary& s) {
  for (const auto& p : s.phases)
    if (p.kernels && p.kernels->hidden_share > 0) return true;
  return false;
}

/// "recording cost +45.8% per recorded step (median of each against the untraced steps before it)", or "" when the
/// cost is not known (no recorded step, or no untraced step to compare with).
inline std::string recording_cost_note(const recording_summary& r) {
  if (!r.cost) return "";
  return "recording cost " + signed_percent(*r.cost) +
         " per recorded step (median of each against the untraced steps before it)";
}

/// The warning about CPU records lost to full per-thread rings: the run's count, and the steps that
/// lost phases (of all steps, and of the measured ones the statistics rest on: their phase times are
/// undercounted). Empty when nothing was lost.
inline std::string ring_full_note(const run_summary& s) {
  if (!s.dropped_records && !s.steps_with_lost_phases) return {};
  std::string out = std::to_string(s.dropped_records) + " CPU records dropped (ring full)";
  if (s.steps_with_lost_phases)
    out += ": " + std::to_string(s.steps_with_lost_phases) + " of " + std::to_string(s.steps) +
           " steps lost phases to a full ring, " + std::to_string(s.measured_steps_with_lost_phases) + " of the " +
           std::to_string(s.measured_steps()) +
           " measured (their phase times are undercounted; each step's "
           "lost_phases is in the JSON)";
  return out;
}

}  // namespace detail
TRACEML_END_NAMESPACE
