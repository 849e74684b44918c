// traceml: a self-contained HTML report for one run or a comparison of several (schedules 1x4, 2x2,
// 4x1 of one experiment). One file: inline CSS and inline SVG charts drawn here, no script, no font,
// no network, so it opens offline, can be mailed or attached to CI, and stays readable in ten years.
// Produced from run_result like the table and the JSON summary, so it shows the same numbers.
//
//   traceml::write_html_report("report.html", {run_1x4, run_2x2, run_4x1}, "Qwen3 accumulation");
//
// Output is a pure function of its input (no clock, no randomness, fixed iteration order): the same
// runs give the same bytes, so reports can be diffed and checked in.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/output_file.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/summary.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
namespace html {

/// Text made safe for HTML element content and quoted attribute values. Kernel names are full of
/// `<`, `>` and `&` (templates, operators); control characters (never meant to be shown) become spaces.
inline std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ((c < 0x20 && ch != '\t' && ch != '\n') || c == 0x7f) ? ' ' : ch;
    }
  }
  return out;
}

/// `v` with `decimals` digits after a '.', whatever the C locale's decimal separator (SVG
/// coordinates with a ',' would not parse). "&ndash;" for NaN and infinities; no "-0.00".
inline std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "&ndash;";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s(buf);
  bool nonzero = false;
  for (char& c : s) {
    if (c >= '1' && c <= '9') nonzero = true;
    else if (c != '-' && c != '0') c = '.';
  }
  if (!nonzero && !s.empty() && s[0] == '-') s.erase(0, 1);
  return s;
}

/// A coordinate or length in an SVG attribute: two decimals, never NaN.
inline std::string px(double v) { return fixed(std::isfinite(v) ? v : 0.0, 2); }

/// Milliseconds with about four significant digits: 1234.5, 123.4, 12.35, 1.234, 0.123.
inline std::string ms(double v) {
  const double a = std::fabs(v);
  return fixed(v, a >= 100 ? 1 : a >= 10 ? 2 : 3);
}

/// A fraction as a percentage with one decimal.
inline std::string pct(double fraction) { return fixed(fraction * 100, 1) + "%"; }

/// An axis label: up to three decimals, trailing zeros dropped (0, 2.5, 10).
inline std::string tick_label(double v) {
  std::string s = fixed(v, 3);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

/// At most `max_bytes` of `s`, cut on a UTF-8 character boundary, with an ellipsis when cut.
inline std::string shorten(const std::string& s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  std::size_t cut = max_bytes > 1 ? max_bytes - 1 : 0;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\xE2\x80\xA6";
}

/// A linear axis from 0: `max` is the smallest multiple of a 1-2-2.5-5 step that reaches `hi`, so
/// tick labels are round numbers. Charts scale lengths as value * plot size / max.
struct axis {
  double max = 1;
  double step = 0.2;
};

inline axis nice_axis(double hi, int target_ticks = 5) {
  if (!(hi > 0) || !std::isfinite(hi)) return {};
  const double raw = hi / target_ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * mag;
  // The small tolerance keeps an exact multiple (100 with step 20) from growing a spare tick.
  return {std::ceil(hi / step - 1e-9) * step, step};
}

inline constexpr const char* residual_color = "#b0b0b0";
inline constexpr const char* idle_color = "#e4e4e4";

/// Colours for runs (lines, swatches): distinct and readable on white.
inline const char* run_color(std::size_t i) {
  static constexpr const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                           "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};
  return colors[i % (sizeof colors / sizeof colors[0])];
}

/// One colour per phase, the same in every chart and every run: the built-in kinds keep theirs from
/// report to report (forward is always blue), user phases take the next free one.
class phase_palette {
 public:
  explicit phase_palette(const std::vector<run_result>& runs) {
    for (const auto& r : runs)
      for (const auto& p : r.summary.phases) add(p.kind, p.name);
  }
  std::string color(phase_kind kind, const std::string& name) const {
    for (const auto& e : entries_)
      if (e.kind == kind && e.name == name) return e.color;
    return residual_color;
  }

 private:
  struct entry {
    phase_kind kind;
    std::string name;
    std::string color;
  };
  static const char* kind_color(phase_kind k) {
    switch (k) {
      case phase_kind::dataloader: return "#9467bd";
      case phase_kind::forward: return "#1f77b4";
      case phase_kind::backward: return "#ff7f0e";
      case phase_kind::optimizer: return "#2ca02c";
      case phase_kind::communication: return "#d62728";
      default: return nullptr;
    }
  }
  void add(phase_kind kind, const std::string& name) {
    for (const auto& e : entries_)
      if (e.kind == kind && e.name == name) return;
    const char* c = kind_color(kind);
    // A second phase of a built-in kind (two differently named forwards) must not share its colour.
    for (const auto& e : entries_)
      if (c && e.kind == kind) c = nullptr;
    if (!c) {
      static constexpr const char* user_colors[] = {"#17becf", "#bcbd22", "#e377c2", "#8c564b",
                                                    "#7f9fd0", "#e0a050", "#6fbf73", "#b39ddb"};
      c = user_colors[user_++ % (sizeof user_colors / sizeof user_colors[0])];
    }
    entries_.push_back({kind, name, c});
  }
  std::vector<entry> entries_;
  std::size_t user_ = 0;
};

/// Whether the run's per-phase kernel, busy and idle numbers were measured. CUDA-event timing
/// fills the same fields with zeros that mean "not measured" (step_gpu_report::kernels_measured).
inline bool kernels_measured(const run_result& run) {
  bool any_report = false;
  for (const auto& st : run.steps) {
    if (!st.gpu) continue;
    any_report = true;
    if (st.gpu->kernels_measured) return true;
  }
  // Without steps (a summary built elsewhere), trust the summary.
  if (any_report) return false;
  for (const auto& p : run.summary.phases)
    if (p.kernel_ms) return true;
  return false;
}

/// Whether the GPU source reported anything inside this phase's windows; a phase it never saw (a
/// nested user phase, say) has all-zero columns that would only add empty rows.
inline bool has_gpu_facts(const phase_summary& p) {
  return p.kernel_ms && (p.busy_ms->mean > 0 || p.idle_ms->mean > 0 || p.kernels_per_step > 0);
}

inline std::size_t measured_steps(const run_summary& s) { return s.steps - std::min(s.warmup_steps, s.steps); }

// ---- small builders ---------------------------------------------------------------------------

inline void swatch(std::string& o, const std::string& color) {
  o += "<span class=\"swatch\" style=\"background:" + color + "\"></span>";
}

inline void kv_row(std::string& o, const std::string& key_html, const std::string& value_html) {
  o += "<tr><th scope=\"row\">" + key_html + "</th><td>" + value_html + "</td></tr>\n";
}

inline void header_row(std::string& o, const std::vector<std::string>& cells) {
  o += "<thead><tr>";
  for (std::size_t i = 0; i < cells.size(); ++i) o += (i == 0 ? "<th>" : "<th class=\"num\">") + cells[i] + "</th>";
  o += "</tr></thead>\n";
}

inline std::string num_cell(const std::string& text_html) { return "<td class=\"num\">" + text_html + "</td>"; }

/// A <text> element; `content` is escaped here.
inline void svg_text(std::string& o, double x, double y, const std::string& content, const char* anchor = "start",
                     const char* cls = nullptr) {
  o += "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\"";
  if (anchor[0] != 's') o += std::string(" text-anchor=\"") + anchor + "\"";
  if (cls) o += std::string(" class=\"") + cls + "\"";
  o += ">" + escape(content) + "</text>";
}

inline void svg_line(std::string& o, double x1, double y1, double x2, double y2, const char* cls) {
  o += "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2) + "\" class=\"" +
       cls + "\"/>";
}

/// Horizontal value axis along the bottom of a bar chart: ticks, grid lines, labels, unit.
inline void value_axis(std::string& o, const axis& a, double left, double width, double top, double bottom,
                       const std::string& unit) {
  const int ticks = static_cast<int>(std::lround(a.max / a.step));
  for (int i = 0; i <= ticks; ++i) {
    const double v = a.step * i;
    const double x = left + width * v / a.max;
    svg_line(o, x, top, x, bottom, i == 0 ? "axis" : "grid");
    svg_text(o, x, bottom + 14, tick_label(v), "middle", "tick");
  }
  svg_text(o, left + width, bottom + 30, unit, "end", "unit");
}

/// Width in pixels reserved for row labels: a guess from the longest label (no font metrics here).
inline double label_width(const std::vector<std::string>& labels) {
  std::size_t longest = 0;
  for (const auto& l : labels) longest = std::max(longest, std::min<std::size_t>(l.size(), 28));
  return std::clamp(static_cast<double>(longest) * 7.0 + 16.0, 72.0, 220.0);
}

// ---- charts -------------------------------------------------------------------------------------

// Geometry of the charts, in SVG user units (pixels at 100% zoom).
inline constexpr double chart_width = 800;
inline constexpr double bar_height = 24;
inline constexpr double bar_gap = 12;
/// Width of the bars' value scale in the breakdown and GPU charts (the label column comes before it).
inline constexpr double bar_plot_width = 600;

/// Step time of every step, one line per run; warm-up steps shaded and drawn hollow, each run's
/// median over the measured steps dashed. The y axis fits the measured steps: a slow first step
/// would otherwise squash the rest into a flat line, so warm-up points above it sit on its top
/// edge (their tooltips keep the real value).
inline void step_time_chart(std::string& o, const std::vector<run_result>& runs) {
  std::size_t n_max = 0, warm_max = 0;
  double hi = 0, hi_all = 0;
  for (const auto& r : runs) {
    n_max = std::max(n_max, r.steps.size());
    warm_max = std::max(warm_max, std::min(r.summary.warmup_steps, r.steps.size()));
    for (std::size_t i = 0; i < r.steps.size(); ++i) {
      hi_all = std::max(hi_all, r.steps[i].wall_ms);
      if (i >= r.summary.warmup_steps) hi = std::max(hi, r.steps[i].wall_ms);
    }
  }
  if (n_max == 0) {
    o += "<p class=\"muted\">No steps recorded.</p>\n";
    return;
  }
  if (!(hi > 0)) hi = hi_all;
  const double height = 300, left = 64, right = 16, top = 16, bottom = 46;
  const double pw = chart_width - left - right, ph = height - top - bottom;
  const axis ya = nice_axis(hi);
  const auto x = [&](double i) { return left + (n_max > 1 ? pw * i / static_cast<double>(n_max - 1) : pw / 2); };
  const auto y = [&](double v) { return top + ph - ph * std::clamp(v, 0.0, ya.max) / ya.max; };

  o += "<svg class=\"chart\" id=\"step-time-chart\" viewBox=\"0 0 " + px(chart_width) + " " + px(height) +
       "\" width=\"" + px(chart_width) + "\" height=\"" + px(height) +
       "\" role=\"img\" aria-label=\"Step time per step\">\n";
  if (warm_max > 0) {
    const double x1 = n_max > 1 ? std::min(left + pw, x(static_cast<double>(warm_max) - 0.5)) : left + pw;
    o += "<rect class=\"warmup\" x=\"" + px(left) + "\" y=\"" + px(top) + "\" width=\"" + px(x1 - left) +
         "\" height=\"" + px(ph) + "\"><title>warm-up: excluded from the statistics</title></rect>";
    svg_text(o, left + 4, top + ph - 6, "warm-up", "start", "note");  // clipped warm-up points sit at the top
    o += "\n";
  }
  const int yticks = static_cast<int>(std::lround(ya.max / ya.step));
  for (int i = 0; i <= yticks; ++i) {
    const double v = ya.step * i;
    svg_line(o, left, y(v), left + pw, y(v), i == 0 ? "axis" : "grid");
    svg_text(o, left - 6, y(v) + 4, tick_label(v), "end", "tick");
  }
  o += "<text class=\"unit\" text-anchor=\"middle\" transform=\"translate(14 " + px(top + ph / 2) +
       ") rotate(-90)\">step time (ms)</text>\n";
  // Step indices: integer ticks, about eight of them.
  const axis xa = nice_axis(static_cast<double>(n_max > 1 ? n_max - 1 : 1), 8);
  const double xstep = std::max(1.0, std::round(xa.step));
  for (double i = 0; i <= static_cast<double>(n_max - 1) + 1e-9; i += xstep) {
    svg_line(o, x(i), top + ph, x(i), top + ph + 4, "axis");
    svg_text(o, x(i), top + ph + 16, tick_label(i), "middle", "tick");
  }
  svg_text(o, left + pw, height - 6, "step", "end", "unit");
  o += "\n";

  const bool markers = n_max <= 150;  // beyond that, dots would merge into a smear
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    const auto& r = runs[ri];
    if (r.steps.empty()) continue;
    const std::string color = run_color(ri);
    o += "<g class=\"run\" data-run=\"" + std::to_string(ri) + "\">";
    if (r.steps.size() > 1) {
      o += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" points=\"";
      for (std::size_t i = 0; i < r.steps.size(); ++i)
        o += (i ? " " : "") + px(x(static_cast<double>(i))) + "," + px(y(r.steps[i].wall_ms));
      o += "\"/>";
    }
    const auto& s = r.summary;
    if (s.step_ms.count > 0) {
      o += "<line class=\"median\" stroke=\"" + color + "\" x1=\"" + px(x(static_cast<double>(std::min(s.warmup_steps, n_max - 1)))) +
           "\" y1=\"" + px(y(s.step_ms.median)) + "\" x2=\"" + px(x(static_cast<double>(r.steps.size() - 1))) +
           "\" y2=\"" + px(y(s.step_ms.median)) + "\"><title>" + escape(r.name) + ": median " + ms(s.step_ms.median) +
           " ms</title></line>";
    }
    if (markers || r.steps.size() == 1) {
      for (std::size_t i = 0; i < r.steps.size(); ++i) {
        const bool warm = i < s.warmup_steps;
        o += "\n<circle cx=\"" + px(x(static_cast<double>(i))) + "\" cy=\"" + px(y(r.steps[i].wall_ms)) +
             "\" r=\"2.5\" stroke=\"" + color + "\" fill=\"" + (warm ? std::string("#ffffff") : color) + "\"><title>" +
             escape(r.name) + " step " + std::to_string(r.steps[i].step) + ": " + ms(r.steps[i].wall_ms) + " ms" +
             (warm ? " (warm-up)" : "") + "</title></circle>";
      }
    }
    o += "</g>\n";
  }
  o += "</svg>\n<ul class=\"legend\">";
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    o += "<li>";
    swatch(o, run_color(ri));
    o += escape(runs[ri].name) + "</li>";
  }
  o += "<li class=\"muted\">hollow dots and shaded band: warm-up steps, excluded from the statistics; dashed: median";
  if (hi_all > ya.max) o += "; points above the axis (up to " + ms(hi_all) + " ms) sit on its top edge";
  o += "</li>";
  o += "</ul>\n";
}

/// One segment of a horizontal stacked bar.
struct bar_segment {
  std::string label;    ///< shown in the legend and tooltip (not escaped yet)
  std::string color;
  std::string cls;      ///< "seg", "busy", "idle"
  double value = 0;     ///< ms
};

/// One bar: a row label and its segments, left to right.
struct bar_row {
  std::string label;
  std::string sublabel;
  std::string right;    ///< text after the bar
  std::vector<bar_segment> segments;
  double marker = -1;   ///< a reference value drawn as a tick across the bar (-1: none)
  std::string data;     ///< extra attributes for the segments (e.g. data-run="0")
};

/// Horizontal stacked bars on one shared ms scale (so bars of different runs compare by length).
/// Segment widths are value * bar_plot_width / axis max; values print inside segments wide enough.
inline void bar_chart(std::string& o, const std::string& id, const std::string& aria, const std::vector<bar_row>& rows,
                      const axis& a) {
  std::vector<std::string> labels;
  for (const auto& r : rows) labels.push_back(r.label + " " + r.sublabel);
  const double left = label_width(labels) + 8, top = 8, bottom_space = 40;
  const double width = left + bar_plot_width + 150;
  const double height = top + static_cast<double>(rows.size()) * (bar_height + bar_gap) + bottom_space;
  const double plot_bottom = top + static_cast<double>(rows.size()) * (bar_height + bar_gap) - bar_gap / 2;
  o += "<svg class=\"chart\" id=\"" + id + "\" viewBox=\"0 0 " + px(width) + " " + px(height) + "\" width=\"" +
       px(width) + "\" height=\"" + px(height) + "\" role=\"img\" aria-label=\"" + escape(aria) + "\">\n";
  value_axis(o, a, left, bar_plot_width, top - 4, plot_bottom, "ms");
  o += "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const double y = top + static_cast<double>(i) * (bar_height + bar_gap);
    const double mid = y + bar_height / 2 + 4;
    if (row.sublabel.empty()) {
      svg_text(o, left - 8, mid, shorten(row.label, 28), "end", "label");
    } else {
      svg_text(o, left - 8, mid - 6, shorten(row.label, 28), "end", "label");
      svg_text(o, left - 8, mid + 7, shorten(row.sublabel, 28), "end", "sublabel");
    }
    double cur = left;
    for (const auto& seg : row.segments) {
      const double w = std::max(0.0, seg.value) * bar_plot_width / a.max;
      o += "\n<rect class=\"" + seg.cls + "\" " + row.data + " data-phase=\"" + escape(seg.label) + "\" x=\"" + px(cur) +
           "\" y=\"" + px(y) + "\" width=\"" + px(w) + "\" height=\"" + px(bar_height) + "\" fill=\"" + seg.color +
           "\"><title>" + escape(row.label) + (row.sublabel.empty() ? "" : " \xC2\xB7 " + escape(row.sublabel)) + ": " +
           escape(seg.label) + " " + ms(seg.value) + " ms</title></rect>";
      // A value is printed only where it fits (about 7 px per character).
      const std::string v = ms(seg.value);
      // White on the phase colours, dark on the light grey of idle time and the residual.
      const bool light = seg.color == idle_color || seg.color == residual_color;
      if (w >= static_cast<double>(v.size()) * 7 + 8) svg_text(o, cur + w / 2, mid, v, "middle", light ? "inbar-dark" : "inbar");
      cur += w;
    }
    if (row.marker >= 0) {
      const double mx = left + row.marker * bar_plot_width / a.max;
      svg_line(o, mx, y - 3, mx, y + bar_height + 3, "marker");
    }
    svg_text(o, cur + 6, mid, row.right, "start", "total");
    o += "\n";
  }
  o += "</svg>\n";
}

inline void legend(std::string& o, const std::vector<std::pair<std::string, std::string>>& items) {
  o += "<ul class=\"legend\">";
  for (const auto& [label, color] : items) {
    o += "<li>";
    swatch(o, color);
    o += escape(label) + "</li>";
  }
  o += "</ul>\n";
}

/// Mean wall time of each top-level phase plus the residual, per run: the segments add up to the
/// mean step time (phases on other threads overlap the step and can make a bar longer; the mean
/// step time is then marked on the bar).
inline void breakdown_chart(std::string& o, const std::vector<run_result>& runs, const phase_palette& pal) {
  std::vector<bar_row> rows;
  std::vector<std::pair<std::string, std::string>> items;
  double hi = 0;
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    const auto& s = runs[ri].summary;
    bar_row row;
    row.label = runs[ri].name;
    row.data = "data-run=\"" + std::to_string(ri) + "\"";
    double sum = 0;
    for (const auto& p : s.phases) {
      if (!p.top_level) continue;
      const std::string color = pal.color(p.kind, p.name);
      row.segments.push_back({p.name, color, "seg", p.wall_ms.mean});
      sum += std::max(0.0, p.wall_ms.mean);
      if (std::none_of(items.begin(), items.end(), [&](const auto& it) { return it.first == p.name && it.second == color; }))
        items.emplace_back(p.name, color);
    }
    row.segments.push_back({"(residual)", residual_color, "seg", s.residual_ms.mean});
    sum += std::max(0.0, s.residual_ms.mean);
    row.right = "= " + ms(s.step_ms.mean) + " ms";
    if (std::fabs(sum - s.step_ms.mean) > 0.005 * s.step_ms.mean) row.marker = s.step_ms.mean;
    hi = std::max({hi, sum, s.step_ms.mean});
    rows.push_back(std::move(row));
  }
  items.emplace_back("(residual)", residual_color);
  bar_chart(o, "phase-breakdown", "Mean step time by phase", rows, nice_axis(hi));
  legend(o, items);
}

/// Per phase and run: mean GPU busy and idle time inside the phase's windows (they add up to the
/// phase's mean wall time), and kernels per step.
inline void gpu_chart(std::string& o, const std::vector<run_result>& runs, const phase_palette& pal) {
  // Phases in order of first appearance over all runs, each with every run that measured it, so
  // the schedules of one phase sit next to each other.
  std::vector<std::pair<phase_kind, std::string>> keys;
  for (const auto& r : runs)
    for (const auto& p : r.summary.phases)
      if (has_gpu_facts(p) && std::none_of(keys.begin(), keys.end(), [&](const auto& k) { return k.first == p.kind && k.second == p.name; }))
        keys.emplace_back(p.kind, p.name);
  std::vector<bar_row> rows;
  double hi = 0;
  for (const auto& [kind, name] : keys)
    for (std::size_t ri = 0; ri < runs.size(); ++ri) {
      if (!kernels_measured(runs[ri])) continue;
      for (const auto& p : runs[ri].summary.phases) {
        if (p.kind != kind || p.name != name || !has_gpu_facts(p)) continue;
        bar_row row;
        row.label = p.name;
        if (runs.size() > 1) row.sublabel = runs[ri].name;
        row.data = "data-run=\"" + std::to_string(ri) + "\"";
        row.segments.push_back({"GPU busy", pal.color(p.kind, p.name), "busy", p.busy_ms->mean});
        row.segments.push_back({"GPU idle", idle_color, "idle", p.idle_ms->mean});
        const double within = p.busy_ms->mean + p.idle_ms->mean;
        row.right = (within > 0 ? pct(p.busy_ms->mean / within) + " busy, " : std::string()) +
                    fixed(p.kernels_per_step, 0) + " kernels/step";
        hi = std::max({hi, within, p.wall_ms.mean});
        rows.push_back(std::move(row));
      }
    }
  bar_chart(o, "gpu-busy-idle", "GPU busy and idle time within each phase", rows, nice_axis(hi));
  legend(o, {{"GPU busy (the phase's colour)", "#555555"}, {"GPU idle", idle_color}});
}

// ---- tables -------------------------------------------------------------------------------------

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
  kv_row(o, "steps", std::to_string(measured_steps(s)) + " measured, " + std::to_string(s.warmup_steps) + " warm-up excluded");
  if (s.step_ms.count > 0) {
    kv_row(o, "step time median", ms(s.step_ms.median) + " ms");
    kv_row(o, "step time mean", ms(s.step_ms.mean) + " ms");
    kv_row(o, "step time p10 / p90", ms(s.step_ms.p10) + " / " + ms(s.step_ms.p90) + " ms");
  }
  if (s.tokens_per_s > 0) kv_row(o, "throughput", fixed(s.tokens_per_s, 1) + " tokens/s");
  if (s.samples_per_s > 0) kv_row(o, "throughput", fixed(s.samples_per_s, 2) + " samples/s");
  kv_row(o, "GPU", s.gpu_status.empty() ? std::string("no GPU source") : escape(s.gpu_status));
  if (s.step_kernel_ms && kernels_measured(r)) {
    kv_row(o, "GPU kernel time per step", ms(s.step_kernel_ms->mean) + " ms (mean)");
    if (s.step_ms.mean > 0) kv_row(o, "GPU busy", pct(s.step_busy_ms->mean / s.step_ms.mean) + " of the step");
  }
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  if (s.peak_allocated_bytes >= 0)
    kv_row(o, "peak GPU memory", fixed(static_cast<double>(s.peak_allocated_bytes) / gib, 2) + " GiB allocated, " +
                                     fixed(static_cast<double>(s.peak_reserved_bytes) / gib, 2) + " GiB reserved");
  if (s.dropped_records)
    kv_row(o, "<span class=\"warn\">warning</span>", std::to_string(s.dropped_records) + " CPU records dropped (ring full)");
  if (s.dropped_gpu_records)
    kv_row(o, "<span class=\"warn\">warning</span>", std::to_string(s.dropped_gpu_records) + " GPU records dropped");
  if (s.unattributed_kernels) kv_row(o, "unattributed kernels", std::to_string(s.unattributed_kernels));
  o += "</tbody></table>\n</section>\n";
}

/// Several runs side by side, with each run's mean step time over the fastest run's.
inline void comparison_table(std::string& o, const std::vector<run_result>& runs) {
  double fastest = 0;
  for (const auto& r : runs)
    if (r.summary.step_ms.count > 0 && r.summary.step_ms.mean > 0 && (fastest == 0 || r.summary.step_ms.mean < fastest))
      fastest = r.summary.step_ms.mean;
  o += "<table class=\"data\" id=\"comparison-table\">\n";
  header_row(o, {"run", "steps", "median ms", "mean ms", "p10 ms", "p90 ms", "std ms", "throughput",
                 "mean / fastest"});
  o += "<tbody>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& s = runs[i].summary;
    const bool has = s.step_ms.count > 0;
    const double ratio = has && fastest > 0 ? s.step_ms.mean / fastest : std::numeric_limits<double>::quiet_NaN();
    const bool is_fastest = has && s.step_ms.mean == fastest;
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

/// Median/mean/p10/p90/min/max/std and share of the step, per phase, then residual and step.
inline void phase_table(std::string& o, const run_result& r, const phase_palette& pal) {
  const auto& s = r.summary;
  o += "<table class=\"data phases\">\n";
  header_row(o, {"phase", "median ms", "mean ms", "p10 ms", "p90 ms", "min ms", "max ms", "std ms", "share"});
  o += "<tbody>\n";
  for (const auto& p : s.phases) {
    o += std::string("<tr") + (p.top_level ? "" : " class=\"nested\"") + "><td>";
    swatch(o, pal.color(p.kind, p.name));
    o += escape(p.name) + (p.top_level ? "" : " <span class=\"muted\">(nested)</span>") + "</td>";
    stats_cells(o, p.wall_ms, p.share);
    o += "</tr>\n";
  }
  o += "<tr><td>";
  swatch(o, residual_color);
  o += "(residual)</td>";
  stats_cells(o, s.residual_ms, s.step_ms.mean > 0 ? s.residual_ms.mean / s.step_ms.mean : 0);
  o += "</tr>\n</tbody>\n<tfoot><tr><td>step</td>";
  stats_cells(o, s.step_ms, 1);
  o += "</tr></tfoot>\n</table>\n";
}

/// GPU facts per phase, then each phase's top kernels.
inline void gpu_tables(std::string& o, const run_result& r) {
  const auto& s = r.summary;
  o += "<table class=\"data gpu\">\n";
  header_row(o, {"phase", "wall ms", "kernel ms", "busy ms", "idle ms", "busy share", "kernels/step",
                 "kernels/micro-batch"});
  o += "<tbody>\n";
  for (const auto& p : s.phases) {
    if (!has_gpu_facts(p)) continue;
    const double within = p.busy_ms->mean + p.idle_ms->mean;
    o += "<tr><td>" + escape(p.name) + "</td>" + num_cell(ms(p.wall_ms.mean)) + num_cell(ms(p.kernel_ms->mean)) +
         num_cell(ms(p.busy_ms->mean)) + num_cell(ms(p.idle_ms->mean)) +
         num_cell(within > 0 ? pct(p.busy_ms->mean / within) : "&ndash;") + num_cell(fixed(p.kernels_per_step, 1)) +
         num_cell(p.kernels_per_microbatch > 0 ? fixed(p.kernels_per_microbatch, 1) : "&ndash;") + "</tr>\n";
  }
  o += "</tbody></table>\n";
  for (const auto& p : s.phases) {
    if (!has_gpu_facts(p) || p.top_kernels.empty()) continue;
    o += "<h4>Top kernels in " + escape(p.name) + "</h4>\n<table class=\"data kernels\">\n";
    header_row(o, {"kernel", "count", "total ms", "mean &micro;s"});
    o += "<tbody>\n";
    for (const auto& k : p.top_kernels)
      o += "<tr><td class=\"kname\">" + escape(k.name) + "</td>" + num_cell(std::to_string(k.count)) +
           num_cell(ms(static_cast<double>(k.total_ns) / 1e6)) + num_cell(fixed(static_cast<double>(k.mean_ns()) / 1e3, 1)) +
           "</tr>\n";
    o += "</tbody></table>\n";
  }
}

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
.runs { display: flex; flex-wrap: wrap; gap: 16px; }
.card { border: 1px solid #dddddd; border-radius: 6px; padding: 12px 14px; flex: 1 1 320px; max-width: 560px; }
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
svg.chart line.axis { stroke: #888888; stroke-width: 1; }
svg.chart line.grid { stroke: #e6e6e6; stroke-width: 1; }
svg.chart line.median { stroke-width: 1; stroke-dasharray: 5 4; }
svg.chart line.marker { stroke: #1d1d1f; stroke-width: 2; }
svg.chart rect.warmup { fill: #f3f3f3; }
svg.chart rect.seg, svg.chart rect.busy, svg.chart rect.idle { stroke: #ffffff; stroke-width: 1; }
footer { margin-top: 40px; color: #6b6b6b; font-size: 12px; }
)css";

}  // namespace html
}  // namespace detail

/// The report document for one or more runs (several runs are compared side by side). Every name
/// and config value is HTML-escaped; the result needs nothing but a browser.
inline std::string html_report(const std::vector<run_result>& runs, const std::string& title = "traceml report") {
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

  const bool any_gpu = std::any_of(runs.begin(), runs.end(), [](const run_result& r) { return h::kernels_measured(r); });
  if (any_gpu) {
    o += "<section id=\"gpu\">\n<h2>GPU busy and idle within each phase</h2>\n";
    o += "<p class=\"note\">Mean time per step in which the GPU ran this phase's kernels or copies (busy) or nothing "
         "of ours (idle), inside the phase's wall time.</p>\n";
    h::gpu_chart(o, runs, pal);
    o += "</section>\n";
  }

  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    o += "<section class=\"details\" id=\"details-" + std::to_string(i) + "\">\n<h2>";
    h::swatch(o, h::run_color(i));
    o += "Phases of " + h::escape(r.name) + "</h2>\n";
    h::phase_table(o, r, pal);
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

/// Writes html_report(runs, title) to `path`; false (reported once) when it cannot.
inline bool write_html_report(const std::string& path, const std::vector<run_result>& runs,
                              const std::string& title = "traceml report") {
  return detail::write_whole_file(path, "HTML report", html_report(runs, title));
}

TRACEML_END_NAMESPACE
