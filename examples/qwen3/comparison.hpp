// qwen3/comparison.hpp: the experiment's result table and its plain-language explanation, formatted
// from the profiler's run summaries (no LibTorch here, so it is unit-tested with hand-made runs).
// Every number comes from summary.hpp, which computes each figure over one sample set; this file
// only picks, subtracts and formats.
//
// The explanation splits the step-time gap between the slowest and the fastest schedule into:
//   - GPU idle inside forward/backward: the GPU waited for the CPU (more, smaller launches);
//   - GPU busy inside forward/backward: the same work took longer on the GPU (shape/tiling efficiency);
//   - the optimizer: a fixed per-step cost that should not depend on the schedule;
//   - the rest: data loading and host time outside those GPU windows.
// It uses each run's baseline steps (no kernel records on them, nor on the step before), so the
// profiler's recording cost is in none of the parts: forward/backward and optimizer GPU windows and
// step time from those steps (CUDA events), busy time from the recorded steps (kernel durations do
// not change when CUPTI's host-side cost is added), idle = window - busy. The parts add up to the gap
// exactly, whatever number of steps was recorded.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <traceml/summary.hpp>

namespace qwen3 {

/// One schedule's row of the result table (all times per optimizer step).
struct schedule_row {
  std::string name;
  bool failed = false;          ///< OOM or another error: `error` says which
  std::string error;
  std::size_t repeats = 0;
  double total_s = 0;           ///< wall time of all steps (warm-up included), summed over repeats
  double steps_per_s = 0;
  double median_ms = 0;         ///< median step (median over repeats of each run's median)
  double spread_lo_ms = 0;      ///< p10..p90 within a run, or min..max of the run medians with repeats
  double spread_hi_ms = 0;
  std::size_t measured_steps = 0;           ///< steps after warm-up (wall columns rest on these)
  std::map<std::string, double> wall_ms;    ///< per phase name (mean over the measured steps)
  std::map<std::string, double> gpu_ms;     ///< per phase: GPU time between its boundaries (mean), where measured
  std::size_t gpu_steps = 0;                ///< steps the gpu_ms column rests on
  double residual_ms = 0;
  // Kernel figures: recorded steps only (`recorded_steps` of them), per recorded step.
  bool gpu = false;
  std::size_t recorded_steps = 0;
  std::map<std::string, double> kernel_ms;
  std::map<std::string, double> busy_ms;
  std::map<std::string, double> window_ms;
  double kernels_per_step = 0;
  double kernels_per_microbatch = 0;  ///< forward + backward kernels of one micro-batch
  double fb_kernels_per_step = 0;     ///< forward + backward kernels of one step
  double fb_kernel_ms = 0;            ///< forward + backward kernel time of one step
  double fb_idle_pct = 0;             ///< GPU idle share of the forward+backward GPU windows, recorded steps
  std::vector<traceml::kernel_figure> fb_kernels;  ///< forward+backward top kernels, per recorded step
  std::optional<double> recording_cost;            ///< recorded step / untraced step - 1 (medians)
  // The explanation's inputs: means over the baseline (untraced) steps.
  traceml::baseline_means baseline;
  std::map<std::string, traceml::phase_baseline> baseline_phase;
  std::int64_t peak_allocated_bytes = -1;
  double tokens_per_s = 0;
  std::optional<double> mfu;          ///< model FLOPs utilisation (median step), when a peak is known
  double ratio_to_fastest = 0;        ///< median step / the fastest schedule's median step

  double wall(const std::string& phase) const { auto it = wall_ms.find(phase); return it == wall_ms.end() ? 0 : it->second; }
  double busy(const std::string& phase) const { auto it = busy_ms.find(phase); return it == busy_ms.end() ? 0 : it->second; }
  /// The phase's GPU window on the baseline steps (events), else its wall time there.
  double baseline_window(const std::string& phase) const {
    auto it = baseline_phase.find(phase);
    if (it == baseline_phase.end()) return 0;
    return it->second.gpu_ms >= 0 ? it->second.gpu_ms : it->second.wall_ms;
  }
  bool baseline_gpu(const std::string& phase) const {
    auto it = baseline_phase.find(phase);
    return it != baseline_phase.end() && it->second.gpu_ms >= 0;
  }
};

namespace detail {
/// Adds `from` (per-step figures) into `into` by kernel name.
inline void merge_figures(std::vector<traceml::kernel_figure>& into, const std::vector<traceml::kernel_figure>& from) {
  for (const auto& k : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const auto& x) { return x.name == k.name; });
    if (it == into.end()) {
      into.push_back(k);
      continue;
    }
    it->launches += k.launches;
    it->launches_per_step += k.launches_per_step;
    it->ms_per_step += k.ms_per_step;
    it->mean_us = it->launches_per_step > 0 ? it->ms_per_step * 1e3 / it->launches_per_step : 0;
  }
}

inline bool is_fb(traceml::phase_kind k) { return k == traceml::phase_kind::forward || k == traceml::phase_kind::backward; }

/// The kernel columns of a row, from the summary's recorded-steps figures.
inline void fill_kernel_columns(schedule_row& row, const traceml::run_summary& s) {
  double fb_idle = 0, fb_window = 0;
  for (const auto& p : s.phases) {
    if (!p.top_level || !p.kernels) continue;
    const auto& k = *p.kernels;
    row.gpu = true;
    row.recorded_steps = k.steps;
    row.kernel_ms[p.name] = k.kernel_ms.mean;
    row.busy_ms[p.name] = k.busy_ms.mean;
    row.window_ms[p.name] = k.window_ms.mean;
    row.kernels_per_step += k.kernels_per_step;
    if (!is_fb(p.kind)) continue;
    row.fb_kernels_per_step += k.kernels_per_step;
    row.kernels_per_microbatch += k.kernels_per_microbatch;
    row.fb_kernel_ms += k.kernel_ms.mean;
    fb_idle += k.idle_ms.mean;
    fb_window += k.window_ms.mean;
    merge_figures(row.fb_kernels, k.top_kernels);
  }
  // Both over the same recorded steps and windows: a share in [0, 100].
  if (fb_window > 0) row.fb_idle_pct = 100.0 * fb_idle / fb_window;
}
}  // namespace detail

/// Builds a row from the runs of one schedule (one per repeat). flops_per_step and peak_flops give
/// the MFU (peak 0 = unknown).
inline schedule_row make_row(const std::string& name, const std::vector<traceml::run_result>& runs,
                             double flops_per_step, double peak_flops) {
  schedule_row row;
  row.name = name;
  row.repeats = runs.size();
  if (runs.empty()) return row;
  std::vector<std::pair<double, std::size_t>> medians;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    medians.push_back({runs[i].summary.step_ms.median, i});
    row.total_s += runs[i].summary.total_wall_ms / 1e3;
  }
  std::sort(medians.begin(), medians.end());
  // The representative run is the one with the median median; its columns fill the row.
  const auto& rep = runs[medians[medians.size() / 2].second];
  const auto& s = rep.summary;
  row.median_ms = medians[medians.size() / 2].first;
  if (runs.size() > 1) {
    row.spread_lo_ms = medians.front().first;
    row.spread_hi_ms = medians.back().first;
  } else {
    row.spread_lo_ms = s.step_ms.p10;
    row.spread_hi_ms = s.step_ms.p90;
  }
  std::size_t steps = 0;
  for (const auto& r : runs) steps += r.summary.steps;
  row.steps_per_s = row.total_s > 0 ? static_cast<double>(steps) / row.total_s : 0;
  row.measured_steps = s.measured_steps();
  row.residual_ms = s.residual_ms.mean;
  row.tokens_per_s = s.tokens_per_s;
  row.peak_allocated_bytes = s.peak_allocated_bytes;
  row.baseline = s.baseline;
  row.recording_cost = s.recording.cost;
  for (const auto& p : s.phases) {
    if (!p.top_level) continue;
    row.wall_ms[p.name] = p.wall_ms.mean;
    row.baseline_phase[p.name] = p.baseline;
    if (p.gpu_ms) {
      row.gpu_ms[p.name] = p.gpu_ms->mean;
      row.gpu_steps = std::max(row.gpu_steps, p.gpu_ms->count);
    }
  }
  detail::fill_kernel_columns(row, s);
  if (peak_flops > 0 && row.median_ms > 0) row.mfu = flops_per_step / (row.median_ms / 1e3) / peak_flops;
  return row;
}

/// Fills ratio_to_fastest (step time / the fastest schedule's); failed rows keep 0.
inline void rank_rows(std::vector<schedule_row>& rows) {
  double best = 0;
  for (const auto& r : rows)
    if (!r.failed && r.median_ms > 0 && (best == 0 || r.median_ms < best)) best = r.median_ms;
  for (auto& r : rows) r.ratio_to_fastest = (!r.failed && best > 0) ? r.median_ms / best : 0;
}

namespace detail {
inline std::string f(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}
inline std::string cell(std::string s, std::size_t w) { return s.size() >= w ? s + " " : std::string(w - s.size(), ' ') + s; }
}  // namespace detail

/// The result table, one column per schedule (rows are the measures: easier to read with long names).
inline std::string format_rows(const std::vector<schedule_row>& rows) {
  using detail::cell;
  using detail::f;
  const std::size_t label_w = 36, col_w = 14;
  std::string out = cell("", label_w);
  for (const auto& r : rows) out += cell(r.name, col_w);
  out += "\n" + std::string(label_w + col_w * rows.size(), '-') + "\n";
  const auto line = [&](const std::string& label, auto value) {
    std::string l = label + std::string(label.size() < label_w ? label_w - label.size() : 1, ' ');
    for (const auto& r : rows) l += cell(r.failed ? (r.error.rfind("OOM", 0) == 0 ? "OOM" : "failed") : value(r), col_w);
    out += l + "\n";
  };
  const auto in = [&](const std::map<std::string, double>& m, const char* p, const char* fmt) {
    auto it = m.find(p);
    return it == m.end() ? std::string("-") : f(fmt, it->second);
  };
  const bool gpu = std::any_of(rows.begin(), rows.end(), [](auto& r) { return r.gpu; });
  const bool gpu_time = std::any_of(rows.begin(), rows.end(), [](auto& r) { return !r.gpu_ms.empty(); });
  line("total s (all steps)", [&](auto& r) { return f("%.1f", r.total_s); });
  line("steps/s", [&](auto& r) { return f("%.2f", r.steps_per_s); });
  line("median step ms", [&](auto& r) { return f("%.1f", r.median_ms); });
  line(rows.empty() || rows[0].repeats <= 1 ? "  spread p10..p90 ms" : "  spread of run medians ms",
       [&](auto& r) { return f("%.1f", r.spread_lo_ms) + ".." + f("%.1f", r.spread_hi_ms); });
  for (const char* p : {"dataloader", "forward", "backward", "optimizer"})
    line(std::string("wall ms: ") + p, [&](auto& r) { return f("%.1f", r.wall(p)); });
  line("wall ms: (outside phases)", [&](auto& r) { return f("%.1f", r.residual_ms); });
  if (gpu_time)
    for (const char* p : {"forward", "backward", "optimizer"})
      line(std::string("GPU ms: ") + p, [&](auto& r) { return in(r.gpu_ms, p, "%.1f"); });
  if (gpu) {
    for (const char* p : {"forward", "backward", "optimizer"})
      line(std::string("GPU kernel ms: ") + p, [&](auto& r) { return in(r.kernel_ms, p, "%.1f"); });
    line("kernels per micro-batch (fwd+bwd)", [&](auto& r) { return f("%.0f", r.kernels_per_microbatch); });
    line("kernels per step", [&](auto& r) { return f("%.0f", r.kernels_per_step); });
    line("GPU idle % in fwd+bwd GPU windows", [&](auto& r) { return f("%.1f", r.fb_idle_pct); });
    line("recording cost per recorded step", [&](auto& r) {
      return r.recording_cost ? f("%+.0f%%", 100.0 * *r.recording_cost) : std::string("-");
    });
  }
  line("peak allocated GiB", [&](auto& r) {
    return r.peak_allocated_bytes < 0 ? std::string("-") : f("%.2f", static_cast<double>(r.peak_allocated_bytes) / (1 << 30));
  });
  line("tokens/s", [&](auto& r) { return f("%.0f", r.tokens_per_s); });
  line("MFU % (median step)", [&](auto& r) { return r.mfu ? f("%.1f", *r.mfu * 100) : std::string("-"); });
  line("median step / fastest median", [&](auto& r) { return f("%.2fx", r.ratio_to_fastest); });
  // What each block rests on: the sample sets differ, and the reader should know which is which.
  const auto counts = [&](auto get) {
    std::string c;
    for (const auto& r : rows)
      if (!r.failed) c += (c.empty() ? "" : ", ") + r.name + " " + get(r);
    return c;
  };
  out += "wall: " + counts([](auto& r) { return std::to_string(r.measured_steps); }) + " measured steps";
  if (gpu_time) out += "; GPU ms: " + counts([](auto& r) { return std::to_string(r.gpu_steps); }) + " steps (CUDA events)";
  if (gpu)
    out += "; kernel figures: " + counts([](auto& r) { return std::to_string(r.recorded_steps); }) +
           " recorded steps (CUPTI), per recorded step";
  out += "\n";
  return out;
}

/// The gap between the slowest and the fastest schedule, split into its parts (ms per step, means
/// over each run's baseline steps; busy from its recorded steps).
struct gap_breakdown {
  std::string slow, fast;
  std::size_t slow_steps = 0, fast_steps = 0;          ///< baseline steps of each
  std::size_t slow_recorded = 0, fast_recorded = 0;    ///< recorded steps busy time comes from
  bool untraced = true;     ///< both baselines are steps without kernel records
  double gap_ms = 0;
  double fb_window_ms = 0;  ///< forward+backward GPU window difference (= idle + busy with kernel facts)
  double fb_idle_ms = 0;    ///< more GPU idle time inside forward/backward
  double fb_busy_ms = 0;    ///< more GPU busy time inside forward/backward
  double optimizer_ms = 0;  ///< fixed per-step cost difference (its GPU window where measured)
  double other_ms = 0;      ///< data loading, host time outside those GPU windows
  bool gpu = false;         ///< busy/idle known (kernel records in both runs)
  bool gpu_windows = false; ///< forward/backward windows are GPU-side (events), not wall time
  double kernel_ratio = 0;  ///< kernels per step, slow / fast
  double slow_mean_kernel_us = 0, fast_mean_kernel_us = 0;  ///< mean fwd+bwd kernel duration
  struct kernel_delta { std::string name; double slow_ms, fast_ms, slow_count, fast_count; };
  std::vector<kernel_delta> kernels;  ///< largest per-step differences first
};

namespace detail {
inline void kernel_deltas(gap_breakdown& g, const schedule_row& slow, const schedule_row& fast) {
  std::map<std::string, gap_breakdown::kernel_delta> deltas;
  for (const auto* r : {&slow, &fast})
    for (const auto& k : r->fb_kernels) {
      auto& d = deltas[k.name];
      d.name = k.name;
      (r == &slow ? d.slow_ms : d.fast_ms) += k.ms_per_step;
      (r == &slow ? d.slow_count : d.fast_count) += k.launches_per_step;
    }
  for (auto& [n, d] : deltas) g.kernels.push_back(d);
  std::sort(g.kernels.begin(), g.kernels.end(), [](auto& a, auto& b) {
    const double da = std::fabs(a.slow_ms - a.fast_ms), db = std::fabs(b.slow_ms - b.fast_ms);
    return da != db ? da > db : a.name < b.name;
  });
  if (g.kernels.size() > 5) g.kernels.resize(5);
}
}  // namespace detail

/// nullopt when fewer than two schedules succeeded.
inline std::optional<gap_breakdown> break_down_gap(const std::vector<schedule_row>& rows) {
  const schedule_row* slow = nullptr;
  const schedule_row* fast = nullptr;
  for (const auto& r : rows) {
    if (r.failed) continue;
    if (!slow || r.median_ms > slow->median_ms) slow = &r;
    if (!fast || r.median_ms < fast->median_ms) fast = &r;
  }
  if (!slow || !fast || slow == fast) return std::nullopt;
  gap_breakdown g;
  g.slow = slow->name;
  g.fast = fast->name;
  g.slow_steps = slow->baseline.steps;
  g.fast_steps = fast->baseline.steps;
  g.untraced = slow->baseline.untraced && fast->baseline.untraced;
  // Means decompose exactly; every part below is a mean over the same baseline steps of each run.
  g.gap_ms = slow->baseline.step_ms - fast->baseline.step_ms;
  g.gpu_windows = slow->baseline_gpu("forward") && fast->baseline_gpu("forward");
  const auto fb_window = [](const schedule_row& r) { return r.baseline_window("forward") + r.baseline_window("backward"); };
  g.fb_window_ms = fb_window(*slow) - fb_window(*fast);
  g.optimizer_ms = slow->baseline_window("optimizer") - fast->baseline_window("optimizer");
  g.other_ms = g.gap_ms - g.fb_window_ms - g.optimizer_ms;
  g.gpu = slow->gpu && fast->gpu;
  if (!g.gpu) return g;
  g.slow_recorded = slow->recorded_steps;
  g.fast_recorded = fast->recorded_steps;
  // Busy time from the recorded steps (the GPU's own durations: recording's host-side cost does not
  // change them); idle is the rest of the baseline window, so idle + busy = the window difference.
  g.fb_busy_ms = (slow->busy("forward") + slow->busy("backward")) - (fast->busy("forward") + fast->busy("backward"));
  g.fb_idle_ms = g.fb_window_ms - g.fb_busy_ms;
  g.kernel_ratio = fast->kernels_per_step > 0 ? slow->kernels_per_step / fast->kernels_per_step : 0;
  const auto mean_kernel_us = [](const schedule_row& r) {
    return r.fb_kernels_per_step > 0 ? r.fb_kernel_ms * 1e3 / r.fb_kernels_per_step : 0;
  };
  g.slow_mean_kernel_us = mean_kernel_us(*slow);
  g.fast_mean_kernel_us = mean_kernel_us(*fast);
  detail::kernel_deltas(g, *slow, *fast);
  return g;
}

/// The plain-language explanation of a gap, every number taken from the measurements.
inline std::string explain(const gap_breakdown& g) {
  using detail::f;
  const auto pct = [&](double part) { return g.gap_ms != 0 ? f("%.0f%%", 100.0 * part / g.gap_ms) : std::string("-"); };
  std::string out;
  out += "Why " + g.slow + " is slower than " + g.fast + ": " + f("%+.1f", g.gap_ms) +
         " ms per optimizer step (means over " + std::to_string(g.slow_steps) + " and " + std::to_string(g.fast_steps) +
         (g.untraced ? " steps without kernel records" : " steps, all with kernel records") + "), of which\n";
  const std::string window = g.gpu_windows ? "GPU window" : "wall time";
  if (g.gpu) {
    out += "  - GPU idle inside forward/backward: " + f("%+.1f", g.fb_idle_ms) + " ms (" + pct(g.fb_idle_ms) +
           ") -- the GPU waited for the CPU to launch work. " + g.slow + " launches " + f("%.1fx", g.kernel_ratio) +
           " as many kernels per step as " + g.fast + ", each smaller (mean forward/backward kernel " +
           f("%.0f", g.slow_mean_kernel_us) + " us vs " + f("%.0f", g.fast_mean_kernel_us) + " us).\n";
    out += "  - GPU busy inside forward/backward: " + f("%+.1f", g.fb_busy_ms) + " ms (" + pct(g.fb_busy_ms) +
           ") -- the same work took longer on the GPU: smaller matrices fill fewer SMs and tile less efficiently" +
           " (busy time from " + std::to_string(g.slow_recorded) + " and " + std::to_string(g.fast_recorded) +
           " recorded steps).\n";
  } else {
    out += "  - forward/backward " + window + ": " + f("%+.1f", g.fb_window_ms) + " ms (" + pct(g.fb_window_ms) +
           ") -- no kernel records in both runs, so idle and busy time cannot be told apart.\n";
  }
  out += "  - optimizer (fixed per-step cost, " + window + "): " + f("%+.1f", g.optimizer_ms) + " ms (" +
         pct(g.optimizer_ms) + ")\n";
  out += "  - everything else (data loading, host time outside the forward/backward/optimizer " + window + "s): " +
         f("%+.1f", g.other_ms) + " ms (" + pct(g.other_ms) + ")\n";
  if (!g.kernels.empty()) {
    out += "  Kernels whose time per step changed most (forward+backward, ms and launches per recorded step, " + g.slow +
           " vs " + g.fast + "):\n";
    for (const auto& k : g.kernels)
      out += "    " + f("%8.2f", k.slow_ms) + " ms (" + f("%.0f", k.slow_count) + "x) vs " + f("%8.2f", k.fast_ms) +
             " ms (" + f("%.0f", k.fast_count) + "x)  " + k.name + "\n";
  }
  return out;
}

/// Rows and breakdown as JSON (the "comparison" member of the experiment's JSON summary).
inline nlohmann::json comparison_json(const std::vector<schedule_row>& rows, const std::optional<gap_breakdown>& g) {
  nlohmann::json j;
  j["ratio"] = "median step / fastest median step";
  j["schedules"] = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json x = {{"name", r.name}, {"failed", r.failed}, {"error", r.error}, {"repeats", r.repeats},
                        {"total_s", r.total_s}, {"steps_per_s", r.steps_per_s}, {"median_step_ms", r.median_ms},
                        {"spread_ms", {r.spread_lo_ms, r.spread_hi_ms}}, {"measured_steps", r.measured_steps},
                        {"wall_ms", r.wall_ms}, {"residual_ms", r.residual_ms}, {"tokens_per_s", r.tokens_per_s},
                        {"peak_allocated_bytes", r.peak_allocated_bytes}, {"ratio_to_fastest", r.ratio_to_fastest}};
    if (r.mfu) x["mfu"] = *r.mfu;
    if (!r.gpu_ms.empty()) x["gpu_ms"] = {{"steps", r.gpu_steps}, {"per_phase", r.gpu_ms}};
    if (r.gpu) {
      x["kernels"] = {{"steps", r.recorded_steps}, {"kernel_ms", r.kernel_ms}, {"busy_ms", r.busy_ms},
                      {"window_ms", r.window_ms}, {"kernels_per_step", r.kernels_per_step},
                      {"kernels_per_microbatch", r.kernels_per_microbatch}, {"fb_idle_pct", r.fb_idle_pct}};
      if (r.recording_cost) x["kernels"]["recording_cost"] = *r.recording_cost;
    }
    j["schedules"].push_back(x);
  }
  if (g) {
    j["gap"] = {{"slow", g->slow}, {"fast", g->fast}, {"slow_steps", g->slow_steps}, {"fast_steps", g->fast_steps},
                {"untraced", g->untraced}, {"gap_ms", g->gap_ms}, {"fb_window_ms", g->fb_window_ms},
                {"fb_idle_ms", g->fb_idle_ms}, {"fb_busy_ms", g->fb_busy_ms}, {"optimizer_ms", g->optimizer_ms},
                {"other_ms", g->other_ms}, {"gpu", g->gpu}, {"gpu_windows", g->gpu_windows},
                {"slow_recorded_steps", g->slow_recorded}, {"fast_recorded_steps", g->fast_recorded},
                {"kernel_ratio", g->kernel_ratio}, {"slow_mean_kernel_us", g->slow_mean_kernel_us},
                {"fast_mean_kernel_us", g->fast_mean_kernel_us}};
    j["explanation"] = explain(*g);
  }
  return j;
}

}  // namespace qwen3
