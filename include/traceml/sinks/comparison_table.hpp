// traceml: the side-by-side table of a comparison (compare.hpp), one column per run and one line
// per measure (easier to read with long run names). Formats the compared runs as they are; the
// footer says which steps each block rests on, since the sample sets differ.
#pragma once
#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "traceml/analysis/compare.hpp"
#include "traceml/config.hpp"
#include "traceml/sinks/figure_notes.hpp"
#include "traceml/sinks/report_table.hpp"

TRACEML_BEGIN_NAMESPACE

/// A line a caller adds to the table (the accumulation experiment's MFU): one cell per column.
struct comparison_line {
  std::string label;
  std::vector<std::string> cells;
};

namespace detail {
/// Top-level phase names of all columns, in order of first appearance.
inline std::vector<std::string> compared_phase_names(const std::vector<compared_run>& runs) {
  std::vector<std::string> names;
  for (const auto& r : runs)
    for (const auto& p : r.phases)
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
  return names;
}

inline std::string optional_ms(const std::optional<double>& v) { return v ? ms_text(*v, 1) : "-"; }

/// The table's rows under a header of run names: the label column as wide as the longest label (at
/// least 36), each run's column as wide as its name (at least 14).
inline std::string comparison_rows_text(const std::vector<compared_run>& runs,
                                        const std::vector<std::pair<std::string, std::vector<std::string>>>& rows) {
  std::size_t label_w = 36;
  for (const auto& r : rows) label_w = std::max(label_w, r.first.size() + 1);
  std::size_t col_w = 14;
  for (const auto& r : runs) col_w = std::max(col_w, detail::printable(r.name).size() + 2);
  // Wide cells (a spread of two four-digit times) widen every column: cells never run together.
  for (const auto& r : rows)
    for (const auto& c : r.second) col_w = std::max(col_w, c.size() + 2);
  const auto cell = [&](const std::string& s) { return detail::pad(s, col_w); };
  std::string out = std::string(label_w, ' ');
  for (const auto& r : runs) out += cell(detail::printable(r.name));
  out += "\n" + std::string(label_w + col_w * runs.size(), '-') + "\n";
  for (const auto& [label, cells] : rows) {
    out += detail::pad(label, label_w - 1, true) + " ";
    for (const auto& c : cells) out += cell(c);
    out += "\n";
  }
  return out;
}

/// The footer: which steps each block of the table rests on, per run.
inline std::string comparison_footer(const std::vector<compared_run>& runs, bool kernels, bool counters) {
  const auto counts = [&](const std::function<std::size_t(const compared_run&)>& get) {
    std::string c;
    for (const auto& r : runs) c += (c.empty() ? "" : ", ") + detail::printable(r.name) + " " + std::to_string(get(r));
    return c;
  };
  std::string out = "wall: " + counts([](const compared_run& r) { return r.measured_steps; }) + " measured steps";
  if (std::any_of(runs.begin(), runs.end(), [](const compared_run& r) { return r.gpu_steps > 0; }))
    out += "; GPU ms: " + counts([](const compared_run& r) { return r.gpu_steps; }) + " steps";
  if (kernels)
    out += "; kernel figures: " + counts([](const compared_run& r) { return r.recorded_steps; }) +
           " recorded steps (CUPTI), per recorded step";
  if (counters)
    out += "; hardware counters: " + counts([](const compared_run& r) { return r.sampled_steps; }) + " sampled steps";
  return out + "\n";
}
}  // namespace detail

/// The table; `extra` lines go just before the ratio to the fastest column.
inline std::string format_comparison_table(const std::vector<compared_run>& runs,
                                           const std::vector<comparison_line>& extra = {}) {
  using detail::fixed_text;
  // Rows are collected first: the label column is as wide as the longest label (at least 36).
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  const auto row = [&](const std::string& label, const std::vector<std::string>& cells) {
    rows.emplace_back(label, cells);
  };
  const auto line = [&](const std::string& label, const std::function<std::string(const compared_run&)>& value) {
    std::vector<std::string> cells;
    for (const auto& r : runs) cells.push_back(r.measured_steps ? value(r) : "no steps");
    row(label, cells);
  };
  const auto any = [&](const std::function<bool(const compared_run&)>& pred) {
    return std::any_of(runs.begin(), runs.end(), pred);
  };
  const auto phases = detail::compared_phase_names(runs);
  const auto phase_line = [&](const std::string& label, const std::string& phase,
                              const std::function<std::optional<double>(const compared_phase&)>& get) {
    line(label + detail::printable(phase), [&](const compared_run& r) {
      const auto* p = r.find(phase);
      return p ? detail::optional_ms(get(*p)) : std::string("-");
    });
  };
  const auto has_phase_value = [&](const std::string& phase,
                                   const std::function<std::optional<double>(const compared_phase&)>& get) {
    return any([&](const compared_run& r) {
      const auto* p = r.find(phase);
      return p && get(*p).has_value();
    });
  };

  line("total s (all steps)", [](const compared_run& r) { return fixed_text(r.total_s, 1); });
  line("steps/s", [](const compared_run& r) { return fixed_text(r.steps_per_s, 2); });
  // Times below 1 ms in microseconds ("40.0us"), not "0.0" (ms_text).
  line("median step ms", [](const compared_run& r) { return detail::ms_text(r.median_ms, 1); });
  line(any([](const compared_run& r) { return r.repeats > 1; }) ? "  spread (p10..p90, or repeat medians) ms"
                                                                : "  spread p10..p90 ms",
       [](const compared_run& r) {
         return detail::ms_text(r.spread_lo_ms, 1) + ".." + detail::ms_text(r.spread_hi_ms, 1);
       });
  const auto wall = [](const compared_phase& p) { return std::optional<double>(p.wall_ms); };
  const auto gpu = [](const compared_phase& p) { return p.gpu_ms; };
  const auto kernel = [](const compared_phase& p) { return p.kernel_ms; };
  for (const auto& p : phases) phase_line("wall ms: ", p, wall);
  line("wall ms: (outside phases)", [](const compared_run& r) { return detail::ms_text(r.residual_ms, 1); });
  for (const auto& p : phases)
    if (has_phase_value(p, gpu)) phase_line("GPU ms: ", p, gpu);
  const bool kernels = any([](const compared_run& r) { return r.kernels(); });
  if (kernels) {
    for (const auto& p : phases)
      if (has_phase_value(p, kernel)) phase_line("GPU kernel ms: ", p, kernel);
    line("kernels per micro-batch (fwd+bwd)",
         [](const compared_run& r) { return fixed_text(r.kernels_per_microbatch, 0); });
    line("kernels per step", [](const compared_run& r) { return fixed_text(r.kernels_per_step, 0); });
    line("GPU idle % in fwd+bwd GPU windows", [](const compared_run& r) { return fixed_text(r.fb_idle_pct, 1); });
    line("recording cost per recorded step", [](const compared_run& r) {
      return r.recording_cost ? detail::signed_percent(*r.recording_cost) : std::string("-");
    });
  }
  const bool counters = any([](const compared_run& r) { return r.counters(); });
  if (counters) {
    const auto pct = [](double v) { return v < 0 ? std::string("-") : fixed_text(v, 1); };
    line("GPU busy % in fwd+bwd (hardware counters)",
         [&](const compared_run& r) { return pct(r.fb_counter_busy_pct); });
    line("SM active % in fwd+bwd (hardware counters)", [&](const compared_run& r) { return pct(r.fb_sm_active_pct); });
  }
  if (any([](const compared_run& r) { return r.peak_allocated_bytes >= 0; }))
    line("peak allocated GiB", [](const compared_run& r) {
      return r.peak_allocated_bytes < 0 ? std::string("-")
                                        : fixed_text(static_cast<double>(r.peak_allocated_bytes) / (1 << 30), 2);
    });
  if (any([](const compared_run& r) { return r.tokens_per_s > 0; }))
    line("tokens/s", [](const compared_run& r) { return fixed_text(r.tokens_per_s, 0); });
  for (const auto& e : extra) row(e.label, e.cells);
  line("median step / fastest median", [](const compared_run& r) { return fixed_text(r.ratio_to_fastest, 2) + "x"; });

  return detail::comparison_rows_text(runs, rows) + detail::comparison_footer(runs, kernels, counters);
}

TRACEML_END_NAMESPACE
