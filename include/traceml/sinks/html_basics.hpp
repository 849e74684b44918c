// traceml HTML report, part 1: text and numbers made safe for HTML and SVG, axes, colours, and the
// small element builders the charts and tables share. See html_report.hpp for the document.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/sinks/figure_notes.hpp"

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
inline std::string fixed(double v, int decimals) { return std::isfinite(v) ? fixed_text(v, decimals) : "&ndash;"; }

/// A coordinate or length in an SVG attribute: two decimals, never NaN.
inline std::string px(double v) { return fixed(std::isfinite(v) ? v : 0.0, 2); }

/// Milliseconds with about four significant digits: 1234.5, 123.4, 12.35, 1.234, 0.123.
inline std::string ms(double v) {
  const double a = std::fabs(v);
  return fixed(v, a >= 100 ? 1 : a >= 10 ? 2 : 3);
}

/// A fraction as a percentage with one decimal.
inline std::string pct(double fraction) { return fixed(fraction * 100, 1) + "%"; }

/// A share as a percentage with one decimal, never above 100% (share_percent_text); "&ndash;" for a
/// counter that was not measured (a negative share).
inline std::string share_pct(double share) { return share >= 0 ? share_percent_text(share) + "%" : "&ndash;"; }

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

/// Colours for runs (lines, swatches, median labels). None is a phase colour (phase_palette, the
/// residual and idle greys), so that a run is never mistaken for a phase in a chart with both; dark
/// tones of Paul Tol's colour-blind-safe "muted" scheme plus ochre, teal, near-black and rust, every
/// one at least 4.9:1 against white (readable as text, not only as a line).
inline constexpr const char* run_colors[] = {"#332288", "#882255", "#117733", "#996600",
                                             "#aa4499", "#005f5f", "#1a1a1a", "#8a3b00"};
inline constexpr std::size_t run_color_count = sizeof run_colors / sizeof run_colors[0];

inline const char* run_color(std::size_t i) { return run_colors[i % run_color_count]; }

/// A dash pattern per run (stroke-dasharray) for the step-time chart's median lines: lines that lie
/// close together, or whose colours a reader cannot tell apart, still differ by their pattern.
inline const char* run_dash(std::size_t i) {
  static constexpr const char* dashes[] = {"8 4", "2 3", "10 3 2 3", "4 4", "12 3 2 3 2 3", "1 3", "6 2 2 2", "16 4"};
  return dashes[i % (sizeof dashes / sizeof dashes[0])];
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

  /// Every colour a phase can get (the built-in kinds' first, then the user phases'), for tests that
  /// keep run colours apart from them.
  static std::vector<std::string> all_colors() {
    std::vector<std::string> out;
    for (phase_kind k : {phase_kind::dataloader, phase_kind::forward, phase_kind::backward, phase_kind::optimizer,
                         phase_kind::communication})
      out.emplace_back(kind_color(k));
    for (const char* c : user_colors) out.emplace_back(c);
    return out;
  }

 private:
  struct entry {
    phase_kind kind;
    std::string name;
    std::string color;
  };
  static constexpr const char* user_colors[] = {"#17becf", "#bcbd22", "#e377c2", "#8c564b",
                                                "#7f9fd0", "#e0a050", "#6fbf73", "#b39ddb"};
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
    if (!c) c = user_colors[user_++ % (sizeof user_colors / sizeof user_colors[0])];
    entries_.push_back({kind, name, c});
  }
  std::vector<entry> entries_;
  std::size_t user_ = 0;
};

/// Whether any step of the run was recorded (kernel records after warm-up): only then does the
/// summary carry kernel, busy and idle figures. GPU time alone (CUDA events) does not count.
inline bool kernels_measured(const run_result& run) {
  const auto& s = run.summary;
  return s.step_kernels.has_value() ||
         std::any_of(s.phases.begin(), s.phases.end(), [](const phase_summary& p) { return p.kernels.has_value(); });
}

/// Whether the recorded steps saw anything inside this phase's windows; a phase the GPU source never
/// saw (a nested user phase, say) would only add empty rows.
inline bool has_gpu_facts(const phase_summary& p) {
  return p.kernels && (p.kernels->busy_ms.mean > 0 || p.kernels->idle_ms.mean > 0 || p.kernels->kernels_per_step > 0);
}

/// "over 1 recorded step of 10": the sample set of a run's kernel figures.
inline std::string recorded_steps_note(const run_summary& s) {
  const std::size_t n = kernel_steps(s);
  return "over " + std::to_string(n) + (n == 1 ? " recorded step" : " recorded steps") + " of " +
         std::to_string(s.step_ms.count);
}

/// Whether any step of the run had hardware-counter samples (after warm-up): only then does the
/// summary carry sampled busy, SM active, tensor and DRAM shares.
inline bool counters_measured(const run_result& run) { return counter_steps(run.summary) > 0; }

/// "over 9 sampled steps of 10": the sample set of a run's hardware-counter figures.
inline std::string sampled_steps_note(const run_summary& s) {
  const std::size_t n = counter_steps(s);
  return "over " + std::to_string(n) + (n == 1 ? " sampled step" : " sampled steps") + " of " +
         std::to_string(s.step_ms.count);
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
  o += "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2) + "\" class=\"" + cls +
       "\"/>";
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

}  // namespace html
}  // namespace detail
TRACEML_END_NAMESPACE
