// traceml HTML report, part 3: the tables (configuration and summary per run, the comparison of
// runs, per-phase statistics, GPU figures and top kernels, the two GPU sources' agreement). Each
// caption names its sample set.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/sinks/html_basics.hpp"
#include "traceml/sinks/verdict_words.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {
namespace html {

/// The GPU rows of a run's summary card: GPU time over the steps it was timed on, kernel time and
/// the busy share of the step's GPU window over the recorded steps, and what recording cost.
inline void gpu_summary_rows(std::string& o, const run_summary& s) {
  if (s.step_gpu_ms)
    kv_row(o, "GPU time per step",
           ms(s.step_gpu_ms->mean) + " ms, mean over " + steps_of(s.step_gpu_ms->count, s.step_ms.count) + " (" +
               gpu_time_source(s) + ")");
  if (s.step_kernels) {
    const auto& k = *s.step_kernels;
    const std::string over = recorded_steps_note(s);
    kv_row(o, "GPU kernel time per step", ms(k.kernel_ms.mean) + " ms, mean " + over);
    kv_row(o, "GPU busy", pct(k.busy_share) + " of the step's GPU window, " + over);
    kv_row(o, "kernels per step", count_text(k.kernels_per_step) + ", " + over);
  }
  if (s.step_counters) {
    const auto& c = *s.step_counters;
    kv_row(o, "GPU busy (hardware counters)",
           share_pct(c.busy_share) + " of the step's GPU window, SM active " + share_pct(c.sm_active_share) + ", " +
               sampled_steps_note(s));
  }
  if (s.recording.cost)
    kv_row(
        o, "recording cost",
        signed_percent(*s.recording.cost) + " per recorded step (median of each against the untraced steps before it)");
}

inline void config_and_summary(std::string& o, const run_result& r, std::size_t index) {
  const auto& s = r.summary;
  o += "<section class=\"card\" id=\"run-" + std::to_string(index) + "\">\n<h3>";
  swatch(o, run_color(index));
  o += escape(r.name) + "</h3>\n";
  if (r.config.empty()) {
    o += "<p class=\"muted\">No configuration given.</p>\n";
  } else {
    o += "<table class=\"kv config\"><caption>Configuration</caption><tbody>\n";
    for (const auto& [k, v] : r.config) kv_row(o, escape(k), escape(v));
    o += "</tbody></table>\n";
  }
  o += "<table class=\"kv summary\"><caption>Summary</caption><tbody>\n";
  kv_row(o, "steps",
         std::to_string(measured_steps(s)) + " measured, " + std::to_string(s.warmup_steps) + " warm-up excluded");
  if (s.step_ms.count > 0) {
    kv_row(o, "step time median", ms(s.step_ms.median) + " ms");
    kv_row(o, "step time mean", ms(s.step_ms.mean) + " ms");
    kv_row(o, "step time p10 / p90", ms(s.step_ms.p10) + " / " + ms(s.step_ms.p90) + " ms");
  }
  if (s.tokens_per_s > 0) kv_row(o, "throughput", fixed(s.tokens_per_s, 1) + " tokens/s");
  if (s.samples_per_s > 0) kv_row(o, "throughput", fixed(s.samples_per_s, 2) + " samples/s");
  kv_row(o, "GPU", escape(s.gpu_status.empty() ? std::string(no_gpu_source_status) : s.gpu_status));
  gpu_summary_rows(o, s);
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  if (s.peak_allocated_bytes >= 0)
    kv_row(o, "peak GPU memory",
           fixed(static_cast<double>(s.peak_allocated_bytes) / gib, 2) + " GiB allocated, " +
               fixed(static_cast<double>(s.peak_reserved_bytes) / gib, 2) + " GiB reserved");
  if (const std::string lost = ring_full_note(s); !lost.empty()) kv_row(o, "<span class=\"warn\">warning</span>", lost);
  if (s.capped_records)
    kv_row(o, "<span class=\"warn\">warning</span>",
           std::to_string(s.capped_records) +
               " CPU records of other threads left out at step ends "
               "(over max_other_thread_records)");
  if (s.overlapping_steps)
    kv_row(o, "<span class=\"warn\">warning</span>",
           std::to_string(s.overlapping_steps) + " steps ignored (began while another step was open)");
  if (s.dropped_gpu_records)
    kv_row(o, "<span class=\"warn\">warning</span>", std::to_string(s.dropped_gpu_records) + " GPU records dropped");
  if (s.unattributed_kernels) kv_row(o, "unattributed kernels", std::to_string(s.unattributed_kernels));
  o += "</tbody></table>\n";
  const auto verdicts = judge_run(s);
  if (!verdicts.empty()) {
    o += "<table class=\"kv verdicts\"><caption>Verdicts</caption><tbody>\n";
    for (const auto& v : verdicts)
      kv_row(o, std::string("<code>") + to_string(v.code) + "</code>",
             escape(verdict_evidence(v)) + "<br><span class=\"muted\">try: " + escape(verdict_advice(v)) + "</span>");
    o += "</tbody></table>\n";
  }
  o += "</section>\n";
}

/// Several runs side by side, with each run's median step time over the fastest run's median: the
/// one ratio between runs, median-based everywhere (a few slower recorded steps move a mean, not a
/// median).
inline void comparison_table(std::string& o, const std::vector<run_result>& runs) {
  const double fastest = fastest_median_ms(runs);
  o += "<table class=\"data\" id=\"comparison-table\">\n<caption>Statistics over each run's measured steps; "
       "the ratio is of median step times</caption>\n";
  header_row(o,
             {"run", "steps", "median ms", "mean ms", "p10 ms", "p90 ms", "std ms", "throughput", "median / fastest"});
  o += "<tbody>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& s = runs[i].summary;
    const bool has = s.step_ms.count > 0;
    const double ratio = median_over_fastest(s, fastest);
    const bool is_fastest = has && s.step_ms.median == fastest;
    o += std::string("<tr") + (is_fastest ? " class=\"fastest\"" : "") + "><td>";
    swatch(o, run_color(i));
    o += escape(runs[i].name) + "</td>";
    o += num_cell(std::to_string(measured_steps(s)));
    o += num_cell(has ? ms(s.step_ms.median) : "&ndash;") + num_cell(has ? ms(s.step_ms.mean) : "&ndash;");
    o += num_cell(has ? ms(s.step_ms.p10) : "&ndash;") + num_cell(has ? ms(s.step_ms.p90) : "&ndash;");
    o += num_cell(has ? ms(s.step_ms.stddev) : "&ndash;");
    o += num_cell(s.tokens_per_s > 0    ? fixed(s.tokens_per_s, 1) + " tok/s"
                  : s.samples_per_s > 0 ? fixed(s.samples_per_s, 2) + " samples/s"
                                        : "&ndash;");
    o += "<td class=\"num ratio\">" + (std::isfinite(ratio) ? fixed(ratio, 2) + "&times;" : std::string("&ndash;")) +
         (is_fastest ? " (fastest)" : "") + "</td></tr>\n";
  }
  o += "</tbody></table>\n";
}

inline void stats_cells(std::string& o, const summary_stats& w, double share) {
  for (double v : {w.median, w.mean, w.p10, w.p90, w.min, w.max, w.stddev}) o += num_cell(ms(v));
  o += num_cell(pct(share));
}

/// The optional "gpu ms" cell of a phase-table row.
inline std::string gpu_ms_cell(const std::optional<summary_stats>& g) { return num_cell(g ? ms(g->mean) : "&ndash;"); }

/// The optional hardware-counter cells of a phase-table row: GPU busy, SM active, tensor, DRAM.
inline std::string counter_share_cells(const std::optional<counter_summary>& k) {
  if (!k) return num_cell("&ndash;") + num_cell("&ndash;") + num_cell("&ndash;") + num_cell("&ndash;");
  return num_cell(share_pct(k->busy_share)) + num_cell(share_pct(k->sm_active_share)) +
         num_cell(share_pct(k->tensor_share)) + num_cell(share_pct(k->dram_share));
}

/// Median/mean/p10/p90/min/max/std and share of the step, per phase, then residual and step; the
/// mean GPU time between the phase's boundaries beside them when it was measured, and the hardware
/// counters' shares when the run was sampled.
inline void phase_table(std::string& o, const run_result& r, const phase_palette& pal) {
  const auto& s = r.summary;
  const bool gpu =
      s.step_gpu_ms.has_value() ||
      std::any_of(s.phases.begin(), s.phases.end(), [](const phase_summary& p) { return p.gpu_ms.has_value(); });
  const bool counters = counters_measured(r);
  o += "<table class=\"data phases\">\n<caption>Wall time over the " + std::to_string(s.step_ms.count) +
       " measured steps (a step without the phase counts 0 ms); share: mean / mean step";
  if (gpu)
    o += "; gpu ms: mean GPU time between the phase's boundaries, over " +
         steps_of(gpu_time_steps(s), s.step_ms.count) + " (" + gpu_time_source(s) + ")";
  if (counters) {
    o += "; GPU busy, SM active, tensor, DRAM: shares of the sampled GPU window from hardware counters, over " +
         steps_of(counter_steps(s), s.step_ms.count) + " (sampled)";
    const std::string coarse = coarse_counter_note(s);
    if (!coarse.empty()) o += "; " + escape(coarse);
  }
  o += "</caption>\n";
  std::vector<std::string> head = {"phase",  "median ms", "mean ms", "p10 ms", "p90 ms",
                                   "min ms", "max ms",    "std ms",  "share"};
  if (gpu) head.emplace_back("gpu ms");
  if (counters)
    for (const char* h : {"GPU busy", "SM active", "tensor", "DRAM"}) head.emplace_back(h);
  header_row(o, head);
  o += "<tbody>\n";
  for (const auto& p : s.phases) {
    o += std::string("<tr") + (p.top_level ? "" : " class=\"nested\"") + "><td>";
    swatch(o, pal.color(p.kind, p.name));
    o += escape(p.name) + (p.top_level ? "" : " <span class=\"muted\">(nested)</span>") + "</td>";
    stats_cells(o, p.wall_ms, p.share);
    if (gpu) o += gpu_ms_cell(p.gpu_ms);
    if (counters) o += counter_share_cells(p.counters);
    o += "</tr>\n";
  }
  o += "<tr><td>";
  swatch(o, residual_color);
  o += "(residual)</td>";
  stats_cells(o, s.residual_ms, residual_share(s));
  if (gpu) o += num_cell("&ndash;");
  if (counters) o += counter_share_cells(std::nullopt);
  o += "</tr>\n</tbody>\n<tfoot><tr><td>step</td>";
  stats_cells(o, s.step_ms, 1);
  if (gpu) o += gpu_ms_cell(s.step_gpu_ms);
  if (counters) o += counter_share_cells(s.step_counters);
  o += "</tr></tfoot>\n</table>\n";
}

/// The run's time outside its steps, under its phase table: each phase recorded while no step was
/// open, then the gaps between consecutive steps and, of them, those at an epoch's end. Nothing when
/// the run spent no time outside its steps.
inline void outside_steps_table(std::string& o, const run_result& r) {
  const auto& x = r.summary.outside_steps;
  if (x.empty()) return;
  o += "<table class=\"data outside-steps\">\n<caption>Outside steps: phases recorded while no step was open, and "
       "the time between steps (" +
       share_pct(x.gap_share) + " of the " + ms(x.steps_span_ms) +
       " ms from the first step's start to the last step's end; " + std::to_string(x.epoch_marks) +
       " epoch marks)</caption>\n";
  header_row(o, {"outside steps", "count", "total ms", "mean ms", "max ms"});
  o += "<tbody>\n";
  const auto row = [&](const std::string& label_html, std::uint64_t n, double total, double max_ms) {
    o += "<tr><td>" + label_html + "</td>" + num_cell(std::to_string(n)) + num_cell(ms(total)) +
         num_cell(ms(n ? total / static_cast<double>(n) : 0)) + num_cell(ms(max_ms)) + "</tr>\n";
  };
  for (const auto& p : x.phases)
    row(escape(p.name) + (p.top_level ? "" : " <span class=\"muted\">(nested)</span>"), p.count, p.total_ms, p.max_ms);
  if (x.gaps.count) row("between steps", x.gaps.count, x.gaps.total_ms, x.gaps.largest_ms);
  const auto& e = x.epoch_gaps;
  if (e.count) row("&nbsp;&nbsp;at an epoch's end", e.count, e.total_ms, e.largest_ms);
  o += "</tbody>\n</table>\n";
}

/// One row of the agreement table: GPU busy from each source over the same recorded steps (and the
/// records as the counters would count them, when a run modelled that).
inline void agreement_row(std::string& o, const std::string& first_cells_html, const counter_summary& k,
                          bool as_counted) {
  o += "<tr>" + first_cells_html + num_cell(std::to_string(k.recorded_steps)) +
       num_cell(share_pct(k.recorded_counter_busy_share)) + num_cell(share_pct(k.recorded_kernel_busy_share));
  if (as_counted) o += num_cell(share_pct(k.recorded_counted_share));
  o += "</tr>\n";
}

/// The two GPU sources side by side on the steps that had both: the counters' busy share of the
/// sampled window against kernel records' busy / GPU window, per phase and run, then the step. A
/// phase that ran on no such step has no row (nothing to compare).
inline void agreement_table(std::string& o, const std::vector<run_result>& runs, const phase_palette& pal) {
  const bool several = runs.size() > 1;
  o += "<table class=\"data agreement\">\n<caption>GPU busy on the recorded steps that were also sampled, from both "
       "sources over the same steps: hardware counters (busy share of the sampled window) and kernel records (busy / "
       "GPU window)</caption>\n";
  std::vector<std::string> head = {"phase"};
  if (several) head.emplace_back("run");
  for (const char* h : {"recorded steps", "counters", "kernel records"}) head.emplace_back(h);
  // The counters see the whole GPU through samples, and count each operation's set-up: shown when
  // the run was given that set-up time (without it the column reads as the records do).
  const auto modelled = std::find_if(runs.begin(), runs.end(), [](const run_result& r) {
    return r.summary.counted_interval_us > 0 && r.summary.launch_engine_us > 0;
  });
  const bool launch = modelled != runs.end();
  if (launch) head.emplace_back("records as counted");
  header_row(o, head);
  o += "<tbody>\n";
  std::string steps;
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    const auto& s = runs[ri].summary;
    const std::string run_cell = several ? "<td>" + escape(runs[ri].name) + "</td>" : std::string();
    for (const auto& p : s.phases) {
      if (!p.counters || p.counters->recorded_steps == 0) continue;
      std::string name = "<td>";
      swatch(name, pal.color(p.kind, p.name));
      name += escape(p.name) + (p.top_level ? "" : " <span class=\"muted\">(nested)</span>") + "</td>";
      agreement_row(o, name + run_cell, *p.counters, launch);
    }
    if (s.step_counters && s.step_counters->recorded_steps > 0)
      agreement_row(steps, "<td>step</td>" + run_cell, *s.step_counters, launch);
  }
  o += "</tbody>\n";
  if (!steps.empty()) o += "<tfoot>" + steps + "</tfoot>\n";
  o += "</table>\n";
  if (launch)
    o += "<p class=\"muted\">records as counted: every record of the step and its boundary markers as the counters "
         "would count them inside the phase: averaged over samples of " +
         fixed_text(modelled->summary.counted_interval_us, 0) +
         " us (busy next to a short window leaks into it), each operation begun " +
         fixed_text(modelled->summary.launch_engine_us, 2) +
         " us earlier (the engine's set-up, which the counters count and a record does not).</p>\n";
}

/// One row of the GPU table: every figure per step, over the same recorded steps (the hidden share
/// only when some phase's work ran beside another's: `hidden`).
inline void kernel_row(std::string& o, const std::string& name_html, const kernel_summary& k, bool hidden, bool step) {
  o += "<tr><td>" + name_html + "</td>" + num_cell(ms(k.wall_ms.mean)) + num_cell(ms(k.window_ms.mean)) +
       num_cell(ms(k.kernel_ms.mean)) + num_cell(ms(k.busy_ms.mean)) + num_cell(ms(k.idle_ms.mean)) +
       num_cell(k.window_ms.mean > 0 ? pct(k.busy_share) : "&ndash;") + num_cell(count_text(k.kernels_per_step)) +
       num_cell(k.kernels_per_microbatch > 0 ? count_text(k.kernels_per_microbatch) : "&ndash;");
  if (hidden) o += num_cell(step ? "&ndash;" : pct(k.hidden_share));
  o += "</tr>\n";
}

/// One row of the idle table: the idle time by kind (adding up to idle ms), launches and copies.
inline void idle_split_row(std::string& o, const std::string& name_html, const kernel_summary& k) {
  const bool launched = k.kernels_per_step > 0;
  o += "<tr><td>" + name_html + "</td>" + num_cell(ms(k.idle_ms.mean)) + num_cell(ms(k.idle_host_ms)) +
       num_cell(ms(k.idle_kernel_gap_ms)) + num_cell(ms(k.idle_other_ms)) + num_cell(count_text(k.kernels_per_step)) +
       num_cell(launched ? fixed(k.median_kernel_us, 1) : "&ndash;") +
       num_cell(launched ? pct(k.short_kernel_share) : "&ndash;") +
       num_cell(k.window_ms.mean > 0 ? pct(k.copy_share) : "&ndash;") + "</tr>\n";
}

/// Where each phase's GPU idle time went and how it launches, per recorded step.
inline void idle_split_table(std::string& o, const run_summary& s) {
  o += "<table class=\"data idle\">\n<caption>GPU idle by kind, mean per step " + recorded_steps_note(s) +
       ": host + kernel gaps + other = idle</caption>\n";
  header_row(o, {"phase", "idle ms", "host ms", "kernel gaps ms", "other ms", "launches/step", "median kernel &micro;s",
                 "short kernels", "copy share"});
  o += "<tbody>\n";
  for (const auto& p : s.phases)
    if (has_gpu_facts(p)) idle_split_row(o, escape(p.name), *p.kernels);
  o += "</tbody>\n";
  if (s.step_kernels) {
    o += "<tfoot>";
    idle_split_row(o, "step", *s.step_kernels);
    o += "</tfoot>\n";
  }
  o += "</table>\n<p class=\"muted\">" + escape(idle_split_note()) + ".</p>\n";
}

/// GPU facts per phase (and the whole step), then each phase's top kernels; all per recorded step.
inline void gpu_tables(std::string& o, const run_result& r) {
  const auto& s = r.summary;
  const std::string over = recorded_steps_note(s);
  o += "<table class=\"data gpu\">\n<caption>Mean per step " + over +
       ": the phase's wall time and GPU window on those steps; busy + idle = the GPU window</caption>\n";
  const bool hidden = any_phase_hidden(s);
  std::vector<std::string> header = {"phase",   "wall ms",    "GPU window ms", "kernel ms",          "busy ms",
                                     "idle ms", "busy share", "kernels/step",  "kernels/micro-batch"};
  if (hidden) header.push_back("hidden share");
  header_row(o, header);
  o += "<tbody>\n";
  for (const auto& p : s.phases)
    if (has_gpu_facts(p)) kernel_row(o, escape(p.name), *p.kernels, hidden, false);
  o += "</tbody>\n";
  if (s.step_kernels) {
    o += "<tfoot>";
    kernel_row(o, "step", *s.step_kernels, hidden, true);
    o += "</tfoot>\n";
  }
  o += "</table>\n";
  if (hidden)
    o += "<p class=\"muted\">hidden share: of the phase's own GPU time (the union of its records), the share during "
         "which other work of the step ran beside it on another stream (communication hidden under backward).</p>\n";
  idle_split_table(o, s);
  for (const auto& p : s.phases) {
    if (!has_gpu_facts(p) || p.kernels->top_kernels.empty()) continue;
    o += "<h4>Top kernels in " + escape(p.name) + "</h4>\n<table class=\"data kernels\">\n<caption>Per step " + over +
         "; merged over those steps, then the longest " + std::to_string(top_kernel_count) + "</caption>\n";
    header_row(o, {"kernel", "launches/step", "ms/step", "mean &micro;s"});
    o += "<tbody>\n";
    for (const auto& k : p.kernels->top_kernels)
      o += "<tr><td class=\"kname\">" + escape(k.name) + "</td>" + num_cell(count_text(k.launches_per_step)) +
           num_cell(ms(k.ms_per_step)) + num_cell(fixed(k.mean_us, 1)) + "</tr>\n";
    o += "</tbody></table>\n";
  }
}

}  // namespace html
}  // namespace detail
TRACEML_END_NAMESPACE
