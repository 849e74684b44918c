// traceml: the words of a verdict (analysis/verdicts.hpp): its evidence, figures with the steps they
// rest on, and one next step. Every output that shows verdicts (the table, the JSON summary, the
// HTML report, `traceml show`) takes its text from here, so that they say the same thing.
#pragma once
#include <cstdio>
#include <string>

#include "traceml/analysis/verdicts.hpp"
#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
inline std::string verdict_pct(double share) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100.0 * share);
  return b;
}
inline std::string verdict_num(double v, const char* fmt = "%.1f") {
  char b[32];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}
inline std::string verdict_steps(const verdict& v) {
  const char* what = std::string(v.source) == "kernels"    ? " with kernel records"
                     : std::string(v.source) == "counters" ? " with hardware counters"
                     : std::string(v.source) == "untraced" ? " without kernel records"
                                                           : "";
  return " (" + std::to_string(v.steps) + " step" + (v.steps == 1 ? "" : "s") + what + ")";
}
}  // namespace detail

/// The figures in words, with the steps they rest on.
inline std::string verdict_evidence(const verdict& v) {
  using detail::verdict_num;
  using detail::verdict_pct;
  const std::string where = v.phase.empty() ? std::string() : v.phase + ": ";
  switch (v.code) {
    case verdict_code::input_bound:
      return "the dataloader takes " + verdict_pct(v.figure("share")) + " of the step, " +
             verdict_num(v.figure("ms_per_step"), "%.2f") + " ms per step" + detail::verdict_steps(v);
    case verdict_code::host_bound:
      if (v.figure("mean_kernel_us") >= 0)
        return where + "the GPU is idle " + verdict_pct(v.figure("idle_share")) + " of the phase while it runs " +
               verdict_num(v.figure("kernels_per_step"), "%.0f") + " kernels per step of " +
               verdict_num(v.figure("mean_kernel_us")) + " us on average" + detail::verdict_steps(v);
      return where + "the GPU is idle " + verdict_pct(v.figure("idle_share")) + " of the phase" +
             detail::verdict_steps(v);
    case verdict_code::gpu_bound:
      return "the GPU is busy " + verdict_pct(v.figure("busy_share")) + " of the step" + detail::verdict_steps(v);
    case verdict_code::small_kernels:
      return where + "the GPU is busy " + verdict_pct(v.figure("busy_share")) +
             " of the phase but the SMs are active only " + verdict_pct(v.figure("sm_active_share")) +
             detail::verdict_steps(v);
    case verdict_code::residual_heavy:
      return verdict_pct(v.figure("share")) + " of the step (" + verdict_num(v.figure("ms_per_step"), "%.2f") +
             " ms) lies in no phase" + detail::verdict_steps(v);
    case verdict_code::unstable:
      switch (v.why_unstable) {
        case instability::drift:
          return "the second half of the steps is " +
                 verdict_num(100.0 * (v.figure("second_half_over_first") - 1.0), "%+.0f") + "% against the first" +
                 detail::verdict_steps(v);
        case instability::bimodal:
          return "the steps fall in two groups, about " + verdict_num(v.figure("low_ms"), "%.3g") + " and " +
                 verdict_num(v.figure("high_ms"), "%.3g") + " ms, the smaller one holding " +
                 verdict_pct(v.figure("minority_share")) + detail::verdict_steps(v);
        case instability::spread:
          return "steps from " + verdict_num(v.figure("p10_ms"), "%.3g") + " to " +
                 verdict_num(v.figure("p90_ms"), "%.3g") + " ms (p10 to p90) around a median of " +
                 verdict_num(v.figure("median_ms"), "%.3g") + " ms" + detail::verdict_steps(v);
        case instability::none: break;
      }
      return "the step time is not stable" + detail::verdict_steps(v);
    case verdict_code::outside_steps: {
      std::string out = verdict_pct(v.figure("gap_share")) + " of the run (" +
                        verdict_num(v.figure("gaps_ms"), "%.1f") + " of " + verdict_num(v.figure("span_ms"), "%.1f") +
                        " ms from the first step's start to the last step's end) lies between steps, in " +
                        verdict_num(v.figure("gaps"), "%.0f") + " gaps; the largest, " +
                        verdict_num(v.figure("largest_ms"), "%.1f") + " ms, after step " +
                        verdict_num(v.figure("largest_after_step"), "%.0f");
      const double epoch_gaps = v.figure("epoch_gaps");
      if (epoch_gaps > 0)
        out += "; " + verdict_num(v.figure("epoch_gaps_ms"), "%.1f") + " ms in " + verdict_num(epoch_gaps, "%.0f") +
               (epoch_gaps == 1 ? " gap" : " gaps") + " at an epoch's end";
      if (v.figure("outside_phases_ms") > 0)
        out += "; phases outside steps take " + verdict_num(v.figure("outside_phases_ms"), "%.1f") + " ms";
      return out + detail::verdict_steps(v);
    }
    case verdict_code::copy_bound:
      return where + "copies take " + verdict_pct(v.figure("copy_share")) + " of the phase's GPU window (" +
             verdict_num(v.figure("copy_ms_per_step"), "%.2f") + " of " + verdict_num(v.figure("window_ms"), "%.2f") +
             " ms per step)" + detail::verdict_steps(v);
    case verdict_code::memory_creep:
      return "allocated GPU memory grows from " + verdict_num(v.figure("first_quarter_mib"), "%.0f") +
             " MiB in the first quarter of the steps to " + verdict_num(v.figure("last_quarter_mib"), "%.0f") +
             " MiB in the last (" + verdict_num(100.0 * v.figure("growth_share"), "%+.0f") + "%)" +
             detail::verdict_steps(v);
  }
  return {};
}

/// One next step, in words.
inline std::string verdict_advice(const verdict& v) {
  switch (v.code) {
    case verdict_code::input_bound:
      return "load ahead of the step: data loader workers, pinned memory and non-blocking copies, or a cheaper "
             "transform";
    case verdict_code::host_bound:
      return "launch fewer, larger kernels: a larger micro-batch with less accumulation, CUDA graphs, or fused "
             "operations";
    case verdict_code::gpu_bound:
      return "the GPU is the limit: lower precision (bf16), fused or faster kernels, or less work per step";
    case verdict_code::small_kernels:
      return "give each kernel more work: larger micro-batches or sequence lengths, or shapes that fill the SMs";
    case verdict_code::residual_heavy:
      return "wrap the unmarked time in phases (TRACEML_PHASE) to see what it is: logging, checkpoints, "
             "synchronisations";
    case verdict_code::unstable:
      return "compare medians with care: run longer or on a quiet machine, and look at the step-time chart";
    case verdict_code::outside_steps:
      return "see what runs between steps (the outside-steps table, the trace's \"between steps\" track): evaluate "
             "or checkpoint less often or on fewer batches, overlap it with training, or wrap it in phases "
             "(TRACEML_PHASE_NAMED) to name it";
    case verdict_code::copy_bound:
      return "move copies off the critical path: pinned memory and non-blocking copies on a side stream, fewer "
             "and larger transfers, or keep the data on the GPU";
    case verdict_code::memory_creep:
      return "look for tensors kept across steps: losses or outputs stored without .item() or .detach(), growing "
             "caches or lists";
  }
  return {};
}

TRACEML_END_NAMESPACE
