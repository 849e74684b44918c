// qwen3/comparison.hpp: the experiment's result table and its plain-language explanation, computed
// from the profiler's run results (no LibTorch here, so it is unit-tested with hand-made runs).
//
// The explanation splits the step-time gap between the slowest and the fastest schedule into:
//   - GPU idle inside forward/backward: the GPU waited for the CPU (more, smaller launches);
//   - GPU busy inside forward/backward: the same work took longer on the GPU (shape/tiling efficiency);
//   - the optimizer: a fixed per-step cost that should not depend on the schedule;
//   - the rest: data loading and time outside any phase.
// Within a phase window wall = busy + idle exactly, so the parts add up to the gap.
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

/// One schedule's row of the result table (all times per optimizer step, mean over measured steps).
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
  std::map<std::string, double> wall_ms;    ///< per phase name (mean)
  std::map<std::string, double> kernel_ms;  ///< per phase name; empty without GPU facts
  std::map<std::string, double> busy_ms;
  std::map<std::string, double> idle_ms;
  double residual_ms = 0;
  bool gpu = false;
  double kernels_per_step = 0;
  double kernels_per_microbatch = 0;  ///< forward + backward kernels of one micro-batch
  double fb_kernels_per_step = 0;     ///< forward + backward kernels of one step
  double fb_idle_pct = 0;             ///< GPU idle share of the forward+backward wall time
  std::int64_t peak_allocated_bytes = -1;
  double tokens_per_s = 0;
  std::optional<double> mfu;          ///< model FLOPs utilisation, when a peak is known
  double ratio_to_fastest = 0;
  std::vector<traceml::kernel_stat> fb_kernels;  ///< forward+backward top kernels, per step (time and launches)

  double wall(const std::string& phase) const { auto it = wall_ms.find(phase); return it == wall_ms.end() ? 0 : it->second; }
  double busy(const std::string& phase) const { auto it = busy_ms.find(phase); return it == busy_ms.end() ? 0 : it->second; }
  double idle(const std::string& phase) const { auto it = idle_ms.find(phase); return it == idle_ms.end() ? 0 : it->second; }
  double fb_wall() const { return wall("forward") + wall("backward"); }
};

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
    for (const auto& st : runs[i].steps) row.total_s += st.wall_ms / 1e3;
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
  for (const auto& r : runs) steps += r.steps.size();
  row.steps_per_s = row.total_s > 0 ? static_cast<double>(steps) / row.total_s : 0;
  row.residual_ms = s.residual_ms.mean;
  row.tokens_per_s = s.tokens_per_s;
  row.peak_allocated_bytes = s.peak_allocated_bytes;
  const double measured = static_cast<double>(s.steps - s.warmup_steps);
  double fb_kernels = 0, fb_micro_kernels = 0;
  for (const auto& p : s.phases) {
    if (!p.top_level) continue;
    row.wall_ms[p.name] = p.wall_ms.mean;
    if (!p.kernel_ms) continue;
    row.gpu = true;
    row.kernel_ms[p.name] = p.kernel_ms->mean;
    row.busy_ms[p.name] = p.busy_ms->mean;
    row.idle_ms[p.name] = p.idle_ms->mean;
    row.kernels_per_step += p.kernels_per_step;
    if (p.kind == traceml::phase_kind::forward || p.kind == traceml::phase_kind::backward) {
      fb_kernels += p.kernels_per_step;
      fb_micro_kernels += p.kernels_per_microbatch;
      for (auto k : p.top_kernels) {
        // Per step, like every other column (the summary holds totals over the measured steps).
        k.total_ns = measured > 0 ? static_cast<std::int64_t>(static_cast<double>(k.total_ns) / measured) : 0;
        k.count = measured > 0 ? static_cast<std::uint64_t>(std::llround(static_cast<double>(k.count) / measured)) : 0;
        auto it = std::find_if(row.fb_kernels.begin(), row.fb_kernels.end(), [&](auto& x) { return x.name == k.name; });
        if (it == row.fb_kernels.end()) row.fb_kernels.push_back(k);
        else { it->total_ns += k.total_ns; it->count += k.count; }
      }
    }
  }
  row.fb_kernels_per_step = fb_kernels;
  row.kernels_per_microbatch = fb_micro_kernels;
  // Idle share of the GPU's forward/backward windows. Where the GPU keeps pace with the CPU those
  // windows are the phases' wall time; with CUDA graphs the CPU leaves a phase long before its
  // kernels finish, so the GPU-side window (busy + idle) is the one that means something.
  const double fb_gpu = row.busy("forward") + row.busy("backward") + row.idle("forward") + row.idle("backward");
  if (row.gpu && fb_gpu > 0) row.fb_idle_pct = 100.0 * (row.idle("forward") + row.idle("backward")) / fb_gpu;
  if (peak_flops > 0 && s.step_ms.mean > 0) row.mfu = flops_per_step / (s.step_ms.mean / 1e3) / peak_flops;
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
  const std::size_t label_w = 34, col_w = 14;
  std::string out = cell("", label_w);
  for (const auto& r : rows) out += cell(r.name, col_w);
  out += "\n" + std::string(label_w + col_w * rows.size(), '-') + "\n";
  const auto line = [&](const std::string& label, auto value) {
    std::string l = label + std::string(label.size() < label_w ? label_w - label.size() : 1, ' ');
    for (const auto& r : rows) l += cell(r.failed ? (r.error.rfind("OOM", 0) == 0 ? "OOM" : "failed") : value(r), col_w);
    out += l + "\n";
  };
  const bool gpu = std::any_of(rows.begin(), rows.end(), [](auto& r) { return r.gpu; });
  line("total s (all steps)", [&](auto& r) { return f("%.1f", r.total_s); });
  line("steps/s", [&](auto& r) { return f("%.2f", r.steps_per_s); });
  line("median step ms", [&](auto& r) { return f("%.1f", r.median_ms); });
  line(rows.empty() || rows[0].repeats <= 1 ? "  spread p10..p90 ms" : "  spread of run medians ms",
       [&](auto& r) { return f("%.1f", r.spread_lo_ms) + ".." + f("%.1f", r.spread_hi_ms); });
  for (const char* p : {"dataloader", "forward", "backward", "optimizer"})
    line(std::string("wall ms: ") + p, [&](auto& r) { return f("%.1f", r.wall(p)); });
  line("wall ms: (outside phases)", [&](auto& r) { return f("%.1f", r.residual_ms); });
  if (gpu) {
    for (const char* p : {"forward", "backward", "optimizer"})
      line(std::string("GPU kernel ms: ") + p, [&](auto& r) {
        auto it = r.kernel_ms.find(p);
        return it == r.kernel_ms.end() ? std::string("-") : f("%.1f", it->second);
      });
    line("kernels per micro-batch (fwd+bwd)", [&](auto& r) { return f("%.0f", r.kernels_per_microbatch); });
    line("kernels per step", [&](auto& r) { return f("%.0f", r.kernels_per_step); });
    line("GPU idle % in forward+backward", [&](auto& r) { return f("%.1f", r.fb_idle_pct); });
  }
  line("peak allocated GiB", [&](auto& r) {
    return r.peak_allocated_bytes < 0 ? std::string("-") : f("%.2f", static_cast<double>(r.peak_allocated_bytes) / (1 << 30));
  });
  line("tokens/s", [&](auto& r) { return f("%.0f", r.tokens_per_s); });
  line("MFU %", [&](auto& r) { return r.mfu ? f("%.1f", *r.mfu * 100) : std::string("-"); });
  line("step time / fastest", [&](auto& r) { return f("%.2fx", r.ratio_to_fastest); });
  return out;
}

/// The gap between the slowest and the fastest schedule, split into its parts (ms per step).
struct gap_breakdown {
  std::string slow, fast;
  double gap_ms = 0;
  double fb_idle_ms = 0;    ///< more GPU idle time inside forward/backward
  double fb_busy_ms = 0;    ///< more GPU busy time inside forward/backward
  double fb_wall_ms = 0;    ///< forward+backward wall difference (= idle + busy with GPU facts)
  double optimizer_ms = 0;  ///< fixed per-step cost difference
  double other_ms = 0;      ///< data loading, time outside phases
  bool gpu = false;
  double kernel_ratio = 0;  ///< kernels per step, slow / fast
  double slow_mean_kernel_us = 0, fast_mean_kernel_us = 0;  ///< mean fwd+bwd kernel duration
  struct kernel_delta { std::string name; double slow_ms, fast_ms; std::uint64_t slow_count, fast_count; };
  std::vector<kernel_delta> kernels;  ///< largest per-step differences first
};

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
  // Means decompose exactly (phases + residual = step); the gap uses the same means, not medians.
  const auto step_mean = [](const schedule_row& r) {
    double t = r.residual_ms;
    for (const auto& [k, v] : r.wall_ms) t += v;
    return t;
  };
  g.gap_ms = step_mean(*slow) - step_mean(*fast);
  g.fb_wall_ms = slow->fb_wall() - fast->fb_wall();
  g.optimizer_ms = slow->wall("optimizer") - fast->wall("optimizer");
  g.other_ms = g.gap_ms - g.fb_wall_ms - g.optimizer_ms;
  g.gpu = slow->gpu && fast->gpu;
  if (g.gpu) {
    g.fb_idle_ms = (slow->idle("forward") + slow->idle("backward")) - (fast->idle("forward") + fast->idle("backward"));
    g.fb_busy_ms = (slow->busy("forward") + slow->busy("backward")) - (fast->busy("forward") + fast->busy("backward"));
    // Forward/backward measured on the GPU side (busy + idle in their windows): the rest of the gap
    // is data loading, time outside phases and whatever the GPU ran outside those windows. Equal to
    // the wall-time split where the GPU keeps pace with the CPU; the honest one where it does not
    // (CUDA graphs: the CPU leaves the phase while its kernels still run).
    g.other_ms = g.gap_ms - g.fb_idle_ms - g.fb_busy_ms - g.optimizer_ms;
    g.kernel_ratio = fast->kernels_per_step > 0 ? slow->kernels_per_step / fast->kernels_per_step : 0;
    const auto mean_kernel_us = [](const schedule_row& r) {
      const double k = r.kernel_ms.count("forward") ? r.kernel_ms.at("forward") : 0;
      const double b = r.kernel_ms.count("backward") ? r.kernel_ms.at("backward") : 0;
      return r.fb_kernels_per_step > 0 ? (k + b) * 1e3 / r.fb_kernels_per_step : 0;
    };
    g.slow_mean_kernel_us = mean_kernel_us(*slow);
    g.fast_mean_kernel_us = mean_kernel_us(*fast);
    // Per-kernel deltas over the union of the top kernels of both schedules.
    std::map<std::string, gap_breakdown::kernel_delta> deltas;
    for (const auto& k : slow->fb_kernels) {
      auto& d = deltas[k.name];
      d.name = k.name;
      d.slow_ms += static_cast<double>(k.total_ns) / 1e6;
      d.slow_count += k.count;
    }
    for (const auto& k : fast->fb_kernels) {
      auto& d = deltas[k.name];
      d.name = k.name;
      d.fast_ms += static_cast<double>(k.total_ns) / 1e6;
      d.fast_count += k.count;
    }
    for (auto& [n, d] : deltas) g.kernels.push_back(d);
    std::sort(g.kernels.begin(), g.kernels.end(), [](auto& a, auto& b) {
      return std::fabs(a.slow_ms - a.fast_ms) > std::fabs(b.slow_ms - b.fast_ms);
    });
    if (g.kernels.size() > 5) g.kernels.resize(5);
  }
  return g;
}

/// The plain-language explanation of a gap, every number taken from the measurements.
inline std::string explain(const gap_breakdown& g) {
  using detail::f;
  const auto pct = [&](double part) { return g.gap_ms != 0 ? f("%.0f%%", 100.0 * part / g.gap_ms) : std::string("-"); };
  std::string out;
  out += "Why " + g.slow + " is slower than " + g.fast + ": " + f("%+.1f", g.gap_ms) + " ms per optimizer step (mean), of which\n";
  if (g.gpu) {
    out += "  - GPU idle inside forward/backward: " + f("%+.1f", g.fb_idle_ms) + " ms (" + pct(g.fb_idle_ms) +
           ") -- the GPU waited for the CPU to launch work. " + g.slow + " launches " + f("%.1fx", g.kernel_ratio) +
           " as many kernels per step as " + g.fast + ", each smaller (mean forward/backward kernel " +
           f("%.0f", g.slow_mean_kernel_us) + " us vs " + f("%.0f", g.fast_mean_kernel_us) + " us).\n";
    out += "  - GPU busy inside forward/backward: " + f("%+.1f", g.fb_busy_ms) + " ms (" + pct(g.fb_busy_ms) +
           ") -- the same work took longer on the GPU: smaller matrices fill fewer SMs and tile less efficiently.\n";
  } else {
    out += "  - forward/backward wall time: " + f("%+.1f", g.fb_wall_ms) + " ms (" + pct(g.fb_wall_ms) +
           ") -- no GPU kernel facts in this run, so idle and busy time cannot be told apart.\n";
  }
  out += "  - optimizer (fixed per-step cost): " + f("%+.1f", g.optimizer_ms) + " ms (" + pct(g.optimizer_ms) + ")\n";
  out += std::string("  - ") + (g.gpu ? "data loading, time outside phases and GPU/CPU overlap: " : "data loading and time outside phases: ") +
         f("%+.1f", g.other_ms) + " ms (" + pct(g.other_ms) + ")\n";
  if (!g.kernels.empty()) {
    out += "  Kernels whose time per step changed most (forward+backward, ms and launches per step, " + g.slow + " vs " +
           g.fast + "):\n";
    for (const auto& k : g.kernels)
      out += "    " + f("%8.2f", k.slow_ms) + " ms (" + std::to_string(k.slow_count) + "x) vs " + f("%8.2f", k.fast_ms) + " ms (" +
             std::to_string(k.fast_count) + "x)  " + k.name + "\n";
  }
  return out;
}

/// Rows and breakdown as JSON (the "comparison" member of the experiment's JSON summary).
inline nlohmann::json comparison_json(const std::vector<schedule_row>& rows, const std::optional<gap_breakdown>& g) {
  nlohmann::json j;
  j["schedules"] = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json x = {{"name", r.name}, {"failed", r.failed}, {"error", r.error}, {"repeats", r.repeats},
                        {"total_s", r.total_s}, {"steps_per_s", r.steps_per_s}, {"median_step_ms", r.median_ms},
                        {"spread_ms", {r.spread_lo_ms, r.spread_hi_ms}}, {"wall_ms", r.wall_ms},
                        {"residual_ms", r.residual_ms}, {"tokens_per_s", r.tokens_per_s},
                        {"peak_allocated_bytes", r.peak_allocated_bytes}, {"ratio_to_fastest", r.ratio_to_fastest}};
    if (r.mfu) x["mfu"] = *r.mfu;
    if (r.gpu) {
      x["gpu_kernel_ms"] = r.kernel_ms;
      x["gpu_busy_ms"] = r.busy_ms;
      x["gpu_idle_ms"] = r.idle_ms;
      x["kernels_per_step"] = r.kernels_per_step;
      x["kernels_per_microbatch"] = r.kernels_per_microbatch;
      x["fb_idle_pct"] = r.fb_idle_pct;
    }
    j["schedules"].push_back(x);
  }
  if (g) {
    j["gap"] = {{"slow", g->slow}, {"fast", g->fast}, {"gap_ms", g->gap_ms}, {"fb_idle_ms", g->fb_idle_ms},
                {"fb_busy_ms", g->fb_busy_ms}, {"fb_wall_ms", g->fb_wall_ms}, {"optimizer_ms", g->optimizer_ms},
                {"other_ms", g->other_ms}, {"gpu", g->gpu}, {"kernel_ratio", g->kernel_ratio},
                {"slow_mean_kernel_us", g->slow_mean_kernel_us}, {"fast_mean_kernel_us", g->fast_mean_kernel_us}};
    j["explanation"] = explain(*g);
  }
  return j;
}

}  // namespace qwen3
