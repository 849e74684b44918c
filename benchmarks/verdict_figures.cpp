// verdict_figures: each verdict's figure of saved runs, beside its threshold, whether it fires or not.
// The thresholds of docs/verdicts.md are chosen from what these print for measured runs (a run that
// should fire and one that should not); verdicts themselves only say what fired.
//
//   verdict_figures RUN_summary.json [MORE_summary.json ...]
//
// The figures are the verdicts' own (analysis/verdicts.hpp): every judge is run once more with
// thresholds that make it fire, and its evidence is read back; the three `unstable` tests come from
// the same helpers judge_stability uses. A figure the run did not measure prints as "-".
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <traceml/analysis/verdicts.hpp>

#include "summary_reader.hpp"

namespace {

using traceml::verdict;
using traceml::verdict_code;
using traceml::verdict_thresholds;

/// Thresholds at which every judge fires on any measured figure, so that its evidence shows.
verdict_thresholds firing_everything() {
  const double inf = std::numeric_limits<double>::infinity();
  verdict_thresholds t;
  t.input_share = 0;
  t.host_idle_share = 0;
  t.host_kernel_us = inf;
  t.gpu_busy_share = 0;
  t.small_busy_share = 0;
  t.small_sm_ratio = inf;
  t.residual_share = 0;
  t.outside_share = 0;
  t.copy_share = 0;
  t.copy_min_window_ms = 0;
  t.creep_share = -inf;
  t.creep_bytes = -inf;
  return t;
}

/// The verdict of `code` (and `where`, a phase, when not empty) among `vs`, or null.
const verdict* find(const std::vector<verdict>& vs, verdict_code code, const std::string& where = "") {
  for (const auto& v : vs)
    if (v.code == code && (where.empty() || v.phase == where)) return &v;
  return nullptr;
}

void row(const char* name, const std::string& where, double value, double threshold, bool fires, std::size_t steps,
         const char* rule) {
  const std::string label = where.empty() ? name : std::string(name) + " (" + where + ")";
  if (std::isnan(value))
    std::printf("  %-46s %10s   %s %-8.3g %s\n", label.c_str(), "-", rule, threshold, "not measured");
  else
    std::printf("  %-46s %10.4f   %s %-8.3g %-6s on %zu steps\n", label.c_str(), value, rule, threshold,
                fires ? "FIRES" : "quiet", steps);
}

/// unstable: its three tests, on the sample judge_stability reads.
void print_stability(const traceml::run_summary& s, const verdict_thresholds& t, const std::vector<verdict>& fired) {
  if (s.step_ms.count < t.min_steps) {
    std::printf("  unstable: fewer than %zu measured steps, not judged\n", t.min_steps);
    return;
  }
  const double none = std::nan("");
  const auto sample = traceml::detail::step_shape_sample(s, t.min_steps);
  const double halves = traceml::detail::half_ratio(sample.points);
  const auto groups = traceml::detail::best_split(sample.points);
  const double spread = sample.median > 0 ? (sample.p90 - sample.p10) / sample.median : none;
  const verdict* unstable = find(fired, verdict_code::unstable);
  const auto why = unstable ? unstable->why_unstable : traceml::instability::none;
  row("unstable: drift |halves - 1|", "", halves > 0 ? std::abs(halves - 1.0) : none, t.drift,
      why == traceml::instability::drift, sample.steps, ">=");
  row("unstable: bimodal high/low - 1", "", groups.low > 0 ? groups.high / groups.low - 1.0 : none, t.bimodal_gap,
      why == traceml::instability::bimodal, sample.steps, ">=");
  std::printf("  %-46s (minority %.3f >= %.3g, separation %.2f >= %.3g)\n", "", groups.minority, t.bimodal_minority,
              groups.separation, t.bimodal_separation);
  row("unstable: spread (p90-p10)/median", "", spread, t.spread, why == traceml::instability::spread, sample.steps,
      ">=");
}

void print_run(const traceml::run_result& run) {
  const auto& s = run.summary;
  const verdict_thresholds t;
  const auto fired = traceml::judge_run(s, t);
  const auto all = traceml::judge_run(s, firing_everything());
  const double none = std::nan("");
  std::printf("%s: %zu measured steps, median %.3f ms\n", run.name.c_str(), s.step_ms.count, s.step_ms.median);
  const auto one = [&](verdict_code code, const char* figure, const char* name, double threshold, const char* rule,
                       const std::string& where = "") {
    const verdict* v = find(all, code, where);
    row(name, where, v ? v->figure(figure, none) : none, threshold, find(fired, code, where) != nullptr,
        v ? v->steps : 0, rule);
  };
  one(verdict_code::input_bound, "share", "input_bound: dataloader share", t.input_share, ">=");
  for (const auto& p : s.phases)
    if (traceml::is_forward_backward(p.kind)) {
      one(verdict_code::host_bound, "idle_share", "host_bound: idle share", t.host_idle_share, ">=", p.name);
      one(verdict_code::host_bound, "mean_kernel_us", "host_bound: mean kernel us", t.host_kernel_us, "<", p.name);
      // small_kernels: busy at least small_busy_share, with SMs active under small_sm_ratio of busy.
      const verdict* v = find(all, verdict_code::small_kernels, p.name);
      const double busy = v ? v->figure("busy_share", none) : none;
      const bool fires = find(fired, verdict_code::small_kernels, p.name) != nullptr;
      row("small_kernels: busy share", p.name, busy, t.small_busy_share, fires, v ? v->steps : 0, ">=");
      row("small_kernels: SM active / busy", p.name, v && busy > 0 ? v->figure("sm_active_share", none) / busy : none,
          t.small_sm_ratio, fires, v ? v->steps : 0, "<");
    }
  one(verdict_code::gpu_bound, "busy_share", "gpu_bound: step busy share", t.gpu_busy_share, ">=");
  one(verdict_code::residual_heavy, "share", "residual_heavy: residual share", t.residual_share, ">=");
  one(verdict_code::outside_steps, "gap_share", "outside_steps: gap share", t.outside_share, ">=");
  for (const auto& p : s.phases)
    if (p.kernels && p.kernels->steps > 0)
      one(verdict_code::copy_bound, "copy_share", "copy_bound: copy share", t.copy_share, ">=", p.name);
  one(verdict_code::memory_creep, "growth_share", "memory_creep: growth share", t.creep_share, ">=");

  print_stability(s, t, fired);
  std::printf("  verdicts that fire: ");
  for (const auto& v : fired)
    std::printf("%s%s ", traceml::to_string(v.code), v.phase.empty() ? "" : ("(" + v.phase + ")").c_str());
  std::printf("%s\n", fired.empty() ? "none" : "");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: verdict_figures RUN_summary.json [MORE_summary.json ...]\n");
    return 2;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    try {
      const auto saved = traceml::tools::read_summary_file(argv[i]);
      std::printf("== %s\n", argv[i]);
      for (const auto& run : saved.runs) print_run(run);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "verdict_figures: %s: %s\n", argv[i], e.what());
      status = 2;
    }
  }
  return status;
}
