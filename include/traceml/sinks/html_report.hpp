// traceml: a self-contained HTML report for one run or a comparison of several (schedules 1x4, 2x2,
// 4x1 of one experiment). One file: inline CSS and inline SVG charts drawn here, no script, no font,
// no network, so it opens offline, can be mailed or attached to CI, and stays readable in ten years.
// Produced from run_result like the table and the JSON summary, so it shows the same numbers.
//
//   traceml::write_html_report("report.html", {run_1x4, run_2x2, run_4x1}, "Qwen3 accumulation");
//   // with a plain-text explanation of the difference, shown under the comparison table:
//   traceml::write_html_report("report.html", runs, "Qwen3 accumulation", "4x1 is faster because ...");
//
// Output is a pure function of its input (no clock, no randomness, fixed iteration order): the same
// runs give the same bytes, so reports can be diffed and checked in.
//
// The pieces: html_basics.hpp (escaping, numbers, axes, colours, element builders), html_charts.hpp
// (SVG charts), html_tables.hpp (tables); this header assembles the document.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/output_file.hpp"
#include "traceml/sinks/html_basics.hpp"
#include "traceml/sinks/html_charts.hpp"
#include "traceml/sinks/html_tables.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
namespace html {

inline constexpr const char* style = R"css(
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: #1d1d1f; background: #ffffff; margin: 0 auto; padding: 24px 32px 48px; max-width: 1200px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #dddddd; }
h3 { font-size: 16px; margin: 0 0 8px; }
h4 { font-size: 14px; margin: 16px 0 6px; }
p.meta, .muted { color: #6b6b6b; }
p.note { color: #4a4a4a; max-width: 820px; }
p.explanation { max-width: 820px; margin: 8px 0; white-space: pre-wrap; }
.runs { display: flex; flex-wrap: wrap; gap: 16px; }
.card { border: 1px solid #dddddd; border-radius: 6px; padding: 12px 14px; flex: 1 1 320px; max-width: 560px; }
.card table { width: 100%; }
.card td { overflow-wrap: anywhere; }
.card table.kv th { white-space: normal; width: 38%; }
table { border-collapse: collapse; margin: 6px 0 12px; }
caption { text-align: left; font-weight: 600; color: #4a4a4a; padding: 4px 0; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eeeeee; text-align: left; vertical-align: top; }
thead th { border-bottom: 2px solid #cccccc; font-weight: 600; }
tfoot td { border-top: 2px solid #cccccc; font-weight: 600; }
table.kv th { font-weight: normal; color: #4a4a4a; white-space: nowrap; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.fastest td { font-weight: 600; }
tr.nested td:first-child { padding-left: 28px; }
td.kname { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px;
           word-break: break-all; max-width: 640px; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px;
          vertical-align: baseline; }
.warn { color: #b00020; font-weight: 600; }
ul.legend { list-style: none; padding: 0; margin: 4px 0 12px; display: flex; flex-wrap: wrap; gap: 4px 18px; }
svg.chart { display: block; max-width: 100%; height: auto; margin: 8px 0 4px; }
svg.chart text { font-size: 12px; fill: #1d1d1f; }
svg.chart text.tick, svg.chart text.unit, svg.chart text.note, svg.chart text.sublabel { fill: #6b6b6b; font-size: 11px; }
svg.chart text.inbar { fill: #ffffff; font-size: 11px; font-weight: 600; }
svg.chart text.inbar-dark { fill: #333333; font-size: 11px; font-weight: 600; }
svg.chart text.total { font-weight: 600; }
svg.chart text.value { font-size: 11px; }
svg.chart line.axis { stroke: #888888; stroke-width: 1; }
svg.chart line.grid { stroke: #e6e6e6; stroke-width: 1; }
svg.chart line.median { stroke-width: 1.5; }
svg.chart line.leader { stroke-width: 1; }
svg.chart text.median-label { font-size: 11px; font-weight: 600; }
svg.chart line.marker { stroke: #1d1d1f; stroke-width: 2; }
svg.chart rect.warmup { fill: #f3f3f3; }
svg.chart rect.seg, svg.chart rect.busy, svg.chart rect.idle { stroke: #ffffff; stroke-width: 1; }
footer { margin-top: 40px; color: #6b6b6b; font-size: 12px; }
)css";

}  // namespace html
}  // namespace detail

namespace detail {
namespace html {
/// The explanation: plain text, escaped; a blank line starts a new paragraph.
inline void explanation(std::string& o, const std::string& text) {
  std::size_t from = 0;
  while (from < text.size()) {
    std::size_t end = text.find("\n\n", from);
    if (end == std::string::npos) end = text.size();
    std::string para = text.substr(from, end - from);
    from = end + 2;
    while (!para.empty() && (para.back() == '\n' || para.back() == ' ')) para.pop_back();
    while (!para.empty() && (para.front() == '\n' || para.front() == ' ')) para.erase(0, 1);
    if (!para.empty()) o += "<p class=\"explanation\">" + escape(para) + "</p>\n";
  }
}

/// The section of GPU busy and idle per phase, when some run has kernel records.
inline void gpu_section(std::string& o, const std::vector<run_result>& runs, const phase_palette& pal) {
  const bool any_gpu = std::any_of(runs.begin(), runs.end(), [](const run_result& r) { return kernels_measured(r); });
  if (!any_gpu) return;
  o += "<section id=\"gpu\">\n<h2>GPU busy and idle within each phase</h2>\n";
  o += "<p class=\"note\">Mean time per recorded step inside the phase's GPU window (from when its stream reached "
       "the phase's start to when it reached its end) in which the GPU ran this phase's kernels or copies (busy) or "
       "nothing of ours (idle); busy + idle = the GPU window. Kernel records are taken on recorded steps only: ";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!kernels_measured(runs[i])) continue;
    o += (runs.size() > 1 ? escape(runs[i].name) + " " : std::string()) + recorded_steps_note(runs[i].summary);
    o += i + 1 < runs.size() ? "; " : ".";
  }
  o += "</p>\n";
  gpu_chart(o, runs, pal);
  o += "</section>\n";
}

/// The section of hardware-counter activity per phase, when some run was sampled.
inline void activity_section(std::string& o, const std::vector<run_result>& runs, const phase_palette& pal) {
  const bool any_counters =
      std::any_of(runs.begin(), runs.end(), [](const run_result& r) { return counters_measured(r); });
  if (!any_counters) return;
  o += "<section id=\"activity\">\n<h2>GPU activity within each phase (hardware counters)</h2>\n";
  o += "<p class=\"note\">Share of each phase's GPU window, over the steps it was sampled on, in which the GPU was "
       "busy, its SMs were active, its tensor pipes and its DRAM were in use (of their peak); from hardware-counter "
       "samples, which cost nothing per launch and so are taken on every step they reach, not only on recorded ones: ";
  std::string sets;
  for (const auto& r : runs)
    if (counters_measured(r))
      sets += (sets.empty() ? "" : "; ") + (runs.size() > 1 ? escape(r.name) + " " : std::string()) +
              sampled_steps_note(r.summary);
  o += sets + ".</p>\n";
  counter_chart(o, runs, pal);
  // The two sources side by side, where some step had both.
  if (std::any_of(runs.begin(), runs.end(),
                  [](const run_result& r) { return detail::counters_and_records_steps(r.summary) > 0; }))
    agreement_table(o, runs, pal);
  o += "</section>\n";
}
}  // namespace html
}  // namespace detail

/// The report document for one or more runs (several runs are compared side by side). Every name
/// and config value is HTML-escaped; the result needs nothing but a browser. `explanation`, when
/// given, is plain text saying what differs between the runs and why (escaped here; a blank line
/// starts a new paragraph): shown under the comparison table, or under the run for a single run.
/// `sections`, when given, is HTML made by another sink (sinks/sweep_report.hpp's
/// html_sweep_section()), placed first, above the runs.
inline std::string html_report(const std::vector<run_result>& runs, const std::string& title = "traceml report",
                               const std::string& explanation = "", const std::string& sections = "") {
  namespace h = detail::html;
  const h::phase_palette pal(runs);
  std::string o;
  o.reserve(32768);
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += "<meta name=\"generator\" content=\"traceml " TRACEML_VERSION_STRING "\">\n";
  o += "<title>" + h::escape(title) + "</title>\n<style>" + h::style + "</style>\n</head>\n<body>\n";
  o += "<header>\n<h1>" + h::escape(title) + "</h1>\n<p class=\"meta\">traceml " TRACEML_VERSION_STRING " &middot; " +
       std::to_string(runs.size()) + (runs.size() == 1 ? " run" : " runs") +
       " &middot; times in milliseconds; statistics over the steps after warm-up</p>\n</header>\n";
  o += sections;
  if (runs.empty()) {
    o += "<p class=\"muted\">No runs.</p>\n</body>\n</html>\n";
    return o;
  }

  o += "<section id=\"runs\">\n<h2>Runs</h2>\n<div class=\"runs\">\n";
  for (std::size_t i = 0; i < runs.size(); ++i) h::config_and_summary(o, runs[i], i);
  o += "</div>\n</section>\n";

  if (runs.size() > 1) {
    o += "<section id=\"comparison\">\n<h2>Comparison</h2>\n";
    h::comparison_table(o, runs);
    h::explanation(o, explanation);
    o += "</section>\n";
  } else if (!explanation.empty()) {
    o += "<section id=\"explanation\">\n<h2>Explanation</h2>\n";
    h::explanation(o, explanation);
    o += "</section>\n";
  }

  o += "<section id=\"step-time\">\n<h2>Step time per step</h2>\n";
  h::step_time_chart(o, runs);
  o += "</section>\n";

  o += "<section id=\"breakdown\">\n<h2>Where the mean step goes</h2>\n";
  o += "<p class=\"note\">Mean wall time of each top-level phase and of the residual (step time inside no phase); "
       "together they make up the mean step time.</p>\n";
  h::breakdown_chart(o, runs, pal);
  o += "</section>\n";

  h::gpu_section(o, runs, pal);
  h::activity_section(o, runs, pal);

  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    o += "<section class=\"details\" id=\"details-" + std::to_string(i) + "\">\n<h2>";
    h::swatch(o, h::run_color(i));
    o += "Phases of " + h::escape(r.name) + "</h2>\n";
    h::phase_table(o, r, pal);
    h::outside_steps_table(o, r);
    if (h::kernels_measured(r)) {
      o += "<h3>GPU per phase</h3>\n";
      h::gpu_tables(o, r);
    }
    o += "</section>\n";
  }
  o += "<footer>Generated by traceml " TRACEML_VERSION_STRING ". Self-contained: no scripts, no network.</footer>\n";
  o += "</body>\n</html>\n";
  return o;
}

/// Writes html_report(runs, title, explanation, sections) to `path`; false (reported once) when it cannot.
inline bool write_html_report(const std::string& path, const std::vector<run_result>& runs,
                              const std::string& title = "traceml report", const std::string& explanation = "",
                              const std::string& sections = "") {
  return detail::write_whole_file(path, "HTML report", html_report(runs, title, explanation, sections));
}

TRACEML_END_NAMESPACE
