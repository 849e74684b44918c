// traceml: a schedule sweep (sweep.hpp, sweep_result.hpp) for people and programs: the ranked table with the
// recommendation for the terminal, the same as a section of the HTML report, and the JSON `sweep`
// object documented in docs/json-schema.md. Only formats: every figure comes from sweep_result.
//
//   std::fputs(traceml::format_sweep(r).c_str(), stdout);
//   traceml::write_html_report("report.html", runs, "sweep", explanation, traceml::html_sweep_section(r));
//   std::string json = traceml::sweep_json(r);
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "traceml/analysis/sweep_result.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/json_writer.hpp"
#include "traceml/sinks/comparison_json.hpp"
#include "traceml/sinks/figure_notes.hpp"
#include "traceml/sinks/html_basics.hpp"
#include "traceml/sinks/report_table.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
/// "3 repeats x 20 steps (5 warm-up) per candidate, interleaved; fit probes of 2 steps".
inline std::string sweep_plan_text(const sweep_result& r) {
  std::string s = std::to_string(r.repeats) + (r.repeats == 1 ? " repeat" : " repeats") + " x " +
                  std::to_string(r.steps) + " steps (" + std::to_string(r.warmup) +
                  " warm-up) per candidate, each round in the opposite order of the one before";
  s +=
      r.probe_steps > 0 ? "; fit probes of " + std::to_string(r.probe_steps) + " steps, not ranked" : "; no fit probes";
  return s;
}

/// "8" or "8, 16": the effective batches swept.
inline std::string sweep_batches_text(const sweep_result& r) {
  std::vector<std::int64_t> batches;
  for (const auto& c : r.candidates)
    if (std::find(batches.begin(), batches.end(), c.schedule.effective_batch()) == batches.end())
      batches.push_back(c.schedule.effective_batch());
  std::sort(batches.begin(), batches.end());
  std::string s;
  for (const auto b : batches) s += (s.empty() ? "" : ", ") + std::to_string(b);
  return s;
}

inline std::string gib_cell(std::int64_t bytes) {
  return bytes < 0 ? "-" : fixed_text(static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0), 1);
}
inline std::string headroom_cell(double headroom) { return headroom < 0 ? "-" : fixed_text(headroom * 100, 0) + "%"; }

/// The spread's basis, said once under the table.
inline std::string sweep_spread_note(const sweep_result& r) {
  return r.repeats > 1 ? "spread: min..max of the " + std::to_string(r.repeats) + " repeats' median step times"
                       : "spread: p10..p90 of the measured steps' times (one repeat)";
}

/// "Largest micro-batch that fits: 4 (probed); device memory 139.8 GiB".
inline std::string sweep_fit_text(const sweep_result& r) {
  std::string s =
      "Largest micro-batch that fits: " +
      (r.largest_fitting_micro_batch > 0 ? std::to_string(r.largest_fitting_micro_batch) : std::string("none"));
  if (r.device_memory_bytes > 0) s += "; device memory " + gib_cell(r.device_memory_bytes) + " GiB";
  return s;
}

inline std::string recommendation_line(const sweep_recommendation& rec) {
  if (rec.schedule.empty()) return "Recommendation: none. " + rec.reason;
  return "Recommendation: " + rec.schedule + " (confidence: " + to_string(rec.confidence) + "). " + rec.reason;
}
}  // namespace detail

/// The ranked table, the fit, the recommendation with its reason and the explanation.
inline std::string format_sweep(const sweep_result& r) {
  using detail::fixed_text;
  using detail::pad;
  std::string out =
      "Schedule sweep, effective batch " + detail::sweep_batches_text(r) + ": " + detail::sweep_plan_text(r) + "\n";
  out += detail::sweep_fit_text(r) + "\n";
  const std::vector<std::size_t> w{5, 10, 7, 9, 16, 12, 12, 9, 10, 10};
  const std::vector<std::string> head{"rank",       "schedule",   "batch",   "median",   "spread ms",
                                      "ms/example", "examples/s", "vs best", "peak GiB", "headroom"};
  std::string line;
  for (std::size_t i = 0; i < head.size(); ++i) line += pad(head[i], w[i], i < 2);
  out += line + "\n" + std::string(line.size(), '-') + "\n";
  for (const auto& c : r.candidates) {
    std::string row = pad(c.ranked() ? std::to_string(c.rank) : "-", w[0], true) + pad(c.name(), w[1], true) +
                      pad(std::to_string(c.schedule.effective_batch()), w[2]);
    if (c.ranked()) {
      row += pad(fixed_text(c.column.median_ms, 1), w[3]);
      row += pad(fixed_text(c.column.spread_lo_ms, 1) + ".." + fixed_text(c.column.spread_hi_ms, 1), w[4]);
      row += pad(fixed_text(c.ms_per_example, 2), w[5]) + pad(fixed_text(c.examples_per_s, 1), w[6]);
      row += pad(fixed_text(c.ratio_to_best, 2) + "x", w[7]) + pad(detail::gib_cell(c.peak_reserved_bytes), w[8]);
      row += pad(detail::headroom_cell(c.headroom), w[9]);
    } else {
      std::string note = c.note.empty() ? std::string(to_string(c.status)) : c.note;
      if (note.size() > 110) note = note.substr(0, 107) + "...";
      row += "  " + note;
    }
    out += row + "\n";
  }
  out += "median: median step ms; " + detail::sweep_spread_note(r) +
         "; peak: reserved by the allocator over the measured steps\n";
  out += "\n" + detail::recommendation_line(r.recommendation) + "\n";
  if (!r.recommendation.explanation.empty()) out += r.recommendation.explanation;
  return out;
}

/// The sweep as an HTML <section> for html_report()'s `sections` (escaped here; no script).
inline std::string html_sweep_section(const sweep_result& r) {
  namespace h = detail::html;
  std::string o = "<section id=\"sweep\">\n<h2>Schedule sweep</h2>\n";
  o += "<p class=\"note\">Effective batch " + h::escape(detail::sweep_batches_text(r)) + ": " +
       h::escape(detail::sweep_plan_text(r)) + ". " + h::escape(detail::sweep_fit_text(r)) + ".</p>\n";
  o += "<table class=\"data\" id=\"sweep-table\">\n<caption>Candidates ranked by time per example; " +
       h::escape(detail::sweep_spread_note(r)) + "</caption>\n";
  h::header_row(o, {"schedule", "rank", "effective batch", "median step ms", "spread ms", "ms per example",
                    "examples/s", "vs best", "peak reserved GiB", "headroom"});
  o += "<tbody>\n";
  for (const auto& c : r.candidates) {
    const bool recommended = c.name() == r.recommendation.schedule;
    o += std::string("<tr") + (recommended ? " class=\"fastest\"" : "") + "><td>" + h::escape(c.name()) +
         (recommended ? " (recommended)" : "") + "</td>";
    o += h::num_cell(c.ranked() ? std::to_string(c.rank) : std::string("&ndash;"));
    o += h::num_cell(std::to_string(c.schedule.effective_batch()));
    if (c.ranked()) {
      o += h::num_cell(h::ms(c.column.median_ms));
      o += h::num_cell(h::ms(c.column.spread_lo_ms) + "&ndash;" + h::ms(c.column.spread_hi_ms));
      o += h::num_cell(h::fixed(c.ms_per_example, 2)) + h::num_cell(h::fixed(c.examples_per_s, 1));
      o += h::num_cell(h::fixed(c.ratio_to_best, 2) + "&times;");
      o += h::num_cell(c.peak_reserved_bytes < 0 ? "&ndash;" : h::escape(detail::gib_cell(c.peak_reserved_bytes)));
      o += h::num_cell(c.headroom < 0 ? "&ndash;" : h::escape(detail::headroom_cell(c.headroom)));
    } else {
      const bool oom = c.status == sweep_status::out_of_memory;
      o += std::string("<td colspan=\"7\"") + (oom ? " class=\"warn\"" : "") + ">" +
           h::escape(c.note.empty() ? std::string(to_string(c.status)) : c.note) + "</td>";
    }
    o += "</tr>\n";
  }
  o += "</tbody></table>\n";
  o += "<p class=\"explanation\">" + h::escape(detail::recommendation_line(r.recommendation)) + "</p>\n";
  if (!r.recommendation.explanation.empty())
    o += "<p class=\"explanation\">" + h::escape(r.recommendation.explanation) + "</p>\n";
  return o + "</section>\n";
}

/// The sweep object into a writer: the plan, every candidate (its column as in the comparison
/// object when ranked), and the recommendation.
inline void write_sweep_json(detail::json_writer& w, const sweep_result& r) {
  const auto u = [](std::size_t n) { return static_cast<std::uint64_t>(n); };
  w.begin_object().member("repeats", u(r.repeats)).member("steps", u(r.steps)).member("warmup_steps", u(r.warmup));
  w.member("probe_steps", u(r.probe_steps)).member("largest_fitting_micro_batch", r.largest_fitting_micro_batch);
  w.member("device_memory_bytes", r.device_memory_bytes);
  w.key("candidates").begin_array();
  for (const auto& c : r.candidates) {
    w.begin_object().member("schedule", c.name()).member("micro_batch", c.schedule.micro_batch);
    w.member("accumulation", c.schedule.accumulation).member("effective_batch", c.schedule.effective_batch());
    w.member("status", to_string(c.status)).member("rank", u(c.rank));
    if (!c.note.empty()) w.member("note", c.note);
    if (c.ranked()) {
      w.member("ms_per_example", c.ms_per_example);
      w.key("spread_ms_per_example")
          .begin_array()
          .value(c.spread_lo_ms_per_example)
          .value(c.spread_hi_ms_per_example)
          .end_array();
      w.member("examples_per_s", c.examples_per_s).member("ratio_to_best", c.ratio_to_best);
      w.member("peak_reserved_bytes", c.peak_reserved_bytes).member("peak_allocated_bytes", c.peak_allocated_bytes);
      if (c.headroom >= 0)
        w.member("headroom", c.headroom);
      else
        w.key("headroom").null();
      w.key("column");
      detail::write_compared_run(w, c.column);
    }
    w.end_object();
  }
  w.end_array();
  const auto& rec = r.recommendation;
  w.key("recommendation").begin_object();
  if (rec.schedule.empty())
    w.key("schedule").null();
  else
    w.member("schedule", rec.schedule);
  w.member("confidence", to_string(rec.confidence));
  w.key("tied").begin_array();
  for (const auto& t : rec.tied) w.value(t);
  w.end_array();
  if (!rec.compared_with.empty()) w.member("compared_with", rec.compared_with);
  w.member("reason", rec.reason).member("explanation", rec.explanation).end_object();
  w.end_object();
}

/// The sweep object as a JSON text.
inline std::string sweep_json(const sweep_result& r) {
  std::string out;
  detail::json_writer w(out);
  write_sweep_json(w, r);
  out += '\n';
  return out;
}

TRACEML_END_NAMESPACE
