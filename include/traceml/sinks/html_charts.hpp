// traceml HTML report, part 2: the inline SVG charts (step time per step, stacked bars of the mean
// step and of the GPU window, the hardware counters' shares per phase). Lengths follow the numbers:
// value * plot size / axis max.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/sinks/html_basics.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {
namespace html {

// Geometry of the charts, in SVG user units (pixels at 100% zoom).
inline constexpr double chart_width = 800;
inline constexpr double bar_height = 24;
inline constexpr double bar_gap = 12;
/// Width of the bars' value scale in the breakdown and GPU charts (the label column comes before it).
inline constexpr double bar_plot_width = 600;

/// A point of the step-time chart: one step, or (long runs) a bucket of consecutive steps.
inline double bucket_x(const step_bucket& b) { return b.first_step + (static_cast<double>(b.steps) - 1) / 2; }

inline std::string bucket_title(const run_result& r, const step_bucket& b, bool warm) {
  std::string t = escape(r.name);
  if (b.steps == 1)
    t += " step " + std::to_string(b.first_step) + ": " + ms(b.mean_ms) + " ms";
  else
    t += " steps " + std::to_string(b.first_step) + "-" +
         std::to_string(b.first_step + static_cast<std::int32_t>(b.steps) - 1) + ": mean " + ms(b.mean_ms) + " ms (" +
         ms(b.min_ms) + "-" + ms(b.max_ms) + ")";
  return t + (warm ? " (warm-up)" : "");
}

/// One run's line, median and dots in the step-time chart; `x` and `y` map step index and ms. The
/// points are the summary's timeline: every step of a short run, equal buckets of a long one.
template <class X, class Y>
void step_time_run(std::string& o, const run_result& r, std::size_t ri, std::size_t n_max, bool markers, const X& x,
                   const Y& y) {
  const std::string color = run_color(ri);
  const auto& tl = r.summary.timeline;
  o += "<g class=\"run\" data-run=\"" + std::to_string(ri) + "\">";
  if (tl.size() > 1) {
    o += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" points=\"";
    for (std::size_t i = 0; i < tl.size(); ++i)
      o += (i ? " " : "") + px(x(bucket_x(tl[i]))) + "," + px(y(tl[i].mean_ms));
    o += "\"/>";
  }
  const auto& s = r.summary;
  if (s.step_ms.count > 0) {
    o += "<line class=\"median\" stroke=\"" + color + "\" stroke-dasharray=\"" + run_dash(ri) + "\" x1=\"" +
         px(x(static_cast<double>(std::min(s.warmup_steps, n_max - 1)))) + "\" y1=\"" + px(y(s.step_ms.median)) +
         "\" x2=\"" + px(x(static_cast<double>(s.steps - 1))) + "\" y2=\"" + px(y(s.step_ms.median)) + "\"><title>" +
         escape(r.name) + ": median " + ms(s.step_ms.median) + " ms</title></line>";
  }
  if (markers || tl.size() == 1) {
    for (const auto& b : tl) {
      const bool warm = static_cast<std::size_t>(b.first_step) < s.warmup_steps;
      o += "\n<circle cx=\"" + px(x(bucket_x(b))) + "\" cy=\"" + px(y(b.mean_ms)) + "\" r=\"2.5\" stroke=\"" + color +
           "\" fill=\"" + (warm ? std::string("#ffffff") : color) + "\"><title>" + bucket_title(r, b, warm) +
           "</title></circle>";
    }
  }
  o += "</g>\n";
}

/// Where to put labels for values drawn at `ys` (SVG y, any order) so that no two overlap: each as
/// close to its value as it can be while at least `gap` below the label above it, and none below
/// `hi` (when they fit between `lo` and `hi`). Labels keep their values' order, so a label never
/// crosses another's line. Greedy: down from the top, then back up from the bottom edge.
inline std::vector<double> spread_labels(const std::vector<double>& ys, double gap, double lo, double hi) {
  std::vector<std::size_t> order(ys.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ys[a] < ys[b]; });
  std::vector<double> pos(ys.size());
  double prev = lo - gap;
  for (std::size_t i : order) prev = pos[i] = std::max(std::clamp(ys[i], lo, hi), prev + gap);
  double next = hi + gap;
  for (auto it = order.rbegin(); it != order.rend(); ++it) next = pos[*it] = std::min(pos[*it], next - gap);
  return pos;
}

/// The median labels at the right of the step-time chart: one per run, in its colour, at its
/// median's height, nudged apart where medians are close (a leader line then joins label and line).
template <class Y>
void median_labels(std::string& o, const std::vector<run_result>& runs, double plot_right, double top, double bottom,
                   const Y& y) {
  std::vector<std::size_t> which;
  std::vector<double> ys;
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    if (runs[ri].summary.step_ms.count == 0 || runs[ri].summary.timeline.empty()) continue;
    which.push_back(ri);
    ys.push_back(y(runs[ri].summary.step_ms.median));
  }
  const double gap = 13;  // an 11 px label and a little air
  const auto pos = spread_labels(ys, gap, top + gap / 2, bottom);
  for (std::size_t i = 0; i < which.size(); ++i) {
    const auto& r = runs[which[i]];
    const std::string color = run_color(which[i]);
    if (std::fabs(pos[i] - ys[i]) > 0.5)
      o += "<line class=\"leader\" stroke=\"" + color + "\" x1=\"" + px(plot_right) + "\" y1=\"" + px(ys[i]) +
           "\" x2=\"" + px(plot_right + 5) + "\" y2=\"" + px(pos[i]) + "\"/>";
    o += "<text class=\"median-label\" data-run=\"" + std::to_string(which[i]) + "\" style=\"fill:" + color +
         "\" x=\"" + px(plot_right + 7) + "\" y=\"" + px(pos[i] + 4) + "\">" +
         escape(shorten(r.name, 14) + " median " + ms(r.summary.step_ms.median) + " ms") + "</text>\n";
  }
}

/// Step time along the run, one line per run (every step, or equal buckets of a long run); warm-up
/// steps shaded and drawn hollow, each run's median over the measured steps dashed. The y axis fits
/// the measured steps: a slow first step would otherwise squash the rest into a flat line, so
/// warm-up points above it sit on its top edge (their tooltips keep the real value).
inline void step_time_chart(std::string& o, const std::vector<run_result>& runs) {
  std::size_t n_max = 0, warm_max = 0, points_max = 0;
  double hi = 0, hi_all = 0;
  for (const auto& r : runs) {
    n_max = std::max(n_max, r.summary.steps);
    warm_max = std::max(warm_max, std::min(r.summary.warmup_steps, r.summary.steps));
    points_max = std::max(points_max, r.summary.timeline.size());
    for (const auto& b : r.summary.timeline) {
      hi_all = std::max(hi_all, b.mean_ms);
      if (static_cast<std::size_t>(b.first_step) >= r.summary.warmup_steps) hi = std::max(hi, b.mean_ms);
    }
  }
  if (n_max == 0 || points_max == 0) {
    o += "<p class=\"muted\">No steps recorded.</p>\n";
    return;
  }
  if (!(hi > 0)) hi = hi_all;
  // The right margin holds the median labels ("<run> median 123.4 ms", about 6.5 px a character).
  const double height = 300, left = 64, right = 170, top = 16, bottom = 46;
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

  const bool markers = points_max <= 150;  // beyond that, dots would merge into a smear
  for (std::size_t ri = 0; ri < runs.size(); ++ri)
    if (!runs[ri].summary.timeline.empty()) step_time_run(o, runs[ri], ri, n_max, markers, x, y);
  median_labels(o, runs, left + pw, top, top + ph, y);
  o += "</svg>\n<ul class=\"legend\">";
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    o += "<li>";
    swatch(o, run_color(ri));
    o += escape(runs[ri].name) + "</li>";
  }
  o += "<li class=\"muted\">hollow dots and shaded band: warm-up steps, excluded from the statistics; dashed: each "
       "run's median over its measured steps (its own dash pattern, labelled at the right)";
  if (points_max < n_max) o += "; long runs: each point is the mean of equal buckets of consecutive steps";
  if (hi_all > ya.max) o += "; points above the axis (up to " + ms(hi_all) + " ms) sit on its top edge";
  o += "</li>";
  o += "</ul>\n";
}

/// One segment of a horizontal stacked bar.
struct bar_segment {
  std::string label;  ///< shown in the legend and tooltip (not escaped yet)
  std::string color;
  std::string cls;   ///< "seg", "busy", "idle"
  double value = 0;  ///< ms
};

/// One bar: a row label and its segments, left to right.
struct bar_row {
  std::string label;
  std::string sublabel;
  std::string right;  ///< text after the bar
  std::vector<bar_segment> segments;
  double marker = -1;  ///< a reference value drawn as a tick across the bar (-1: none)
  std::string data;    ///< extra attributes for the segments (e.g. data-run="0")
};

/// Horizontal stacked bars on one shared ms scale (so bars of different runs compare by length).
/// Segment widths are value * bar_plot_width / axis max; values print inside segments wide enough.
inline void bar_chart(std::string& o, const std::string& id, const std::string& aria, const std::vector<bar_row>& rows,
                      const axis& a) {
  std::vector<std::string> labels;
  std::size_t right_chars = 0;
  for (const auto& r : rows) {
    labels.push_back(r.label + " " + r.sublabel);
    right_chars = std::max(right_chars, r.right.size());
  }
  const double left = label_width(labels) + 8, top = 8, bottom_space = 40;
  // Room after the plot for the text after the longest bar (about 7 px per character).
  const double width = left + bar_plot_width + std::max(150.0, static_cast<double>(right_chars) * 7.0 + 16);
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
      o += "\n<rect class=\"" + seg.cls + "\" " + row.data + " data-phase=\"" + escape(seg.label) + "\" x=\"" +
           px(cur) + "\" y=\"" + px(y) + "\" width=\"" + px(w) + "\" height=\"" + px(bar_height) + "\" fill=\"" +
           seg.color + "\"><title>" + escape(row.label) +
           (row.sublabel.empty() ? "" : " \xC2\xB7 " + escape(row.sublabel)) + ": " + escape(seg.label) + " " +
           ms(seg.value) + " ms</title></rect>";
      // A value is printed only where it fits (about 7 px per character).
      const std::string v = ms(seg.value);
      // White on the phase colours, dark on the light grey of idle time and the residual.
      const bool light = seg.color == idle_color || seg.color == residual_color;
      if (w >= static_cast<double>(v.size()) * 7 + 8)
        svg_text(o, cur + w / 2, mid, v, "middle", light ? "inbar-dark" : "inbar");
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
      if (std::none_of(items.begin(), items.end(),
                       [&](const auto& it) { return it.first == p.name && it.second == color; }))
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

/// Per phase and run, over the run's recorded steps: mean GPU busy and idle time per step inside
/// the phase's GPU window (they add up to the window's mean), the busy share of the window, and
/// kernels per step; each bar says how many steps it rests on.
inline void gpu_chart(std::string& o, const std::vector<run_result>& runs, const phase_palette& pal) {
  // Phases in order of first appearance over all runs, each with every run that measured it, so
  // the schedules of one phase sit next to each other.
  std::vector<std::pair<phase_kind, std::string>> keys;
  for (const auto& r : runs)
    for (const auto& p : r.summary.phases)
      if (has_gpu_facts(p) && std::none_of(keys.begin(), keys.end(),
                                           [&](const auto& k) { return k.first == p.kind && k.second == p.name; }))
        keys.emplace_back(p.kind, p.name);
  std::vector<bar_row> rows;
  double hi = 0;
  for (const auto& [kind, name] : keys)
    for (std::size_t ri = 0; ri < runs.size(); ++ri) {
      for (const auto& p : runs[ri].summary.phases) {
        if (p.kind != kind || p.name != name || !has_gpu_facts(p)) continue;
        const kernel_summary& k = *p.kernels;
        bar_row row;
        row.label = p.name;
        if (runs.size() > 1) row.sublabel = runs[ri].name;
        row.data = "data-run=\"" + std::to_string(ri) + "\"";
        row.segments.push_back({"GPU busy", pal.color(p.kind, p.name), "busy", k.busy_ms.mean});
        row.segments.push_back({"GPU idle", idle_color, "idle", k.idle_ms.mean});
        row.right = (k.window_ms.mean > 0 ? pct(k.busy_share) + " busy, " : std::string()) +
                    count_text(k.kernels_per_step) + " kernels/step (" +
                    steps_of(k.steps, runs[ri].summary.step_ms.count) + ")";
        hi = std::max(hi, k.window_ms.mean);
        rows.push_back(std::move(row));
      }
    }
  bar_chart(o, "gpu-busy-idle", "GPU busy and idle time within each phase's GPU window", rows, nice_axis(hi));
  legend(o, {{"GPU busy (the phase's colour)", "#555555"}, {"GPU idle", idle_color}});
}

/// One of the hardware-counter shares the activity chart draws per phase, top to bottom. Each is a
/// lighter tone of the phase's colour (fill-opacity), so that a group of four reads as one phase.
struct counter_metric {
  const char* key;     ///< data-metric of its bars
  const char* label;   ///< beside each bar and in tooltips
  const char* legend;  ///< what the share means
  double opacity;
  const char* swatch;  ///< the legend's grey in that tone
};

inline constexpr counter_metric counter_metrics[] = {
    {"busy", "GPU busy", "GPU busy: the GPU ran any work", 1.0, "#555555"},
    {"sm", "SM active", "SM active: SMs with work, averaged over the SMs (below busy when work fills few SMs)", 0.8,
     "#777777"},
    {"tensor", "tensor", "tensor: tensor pipes active, share of their peak", 0.6, "#999999"},
    {"dram", "DRAM", "DRAM: memory throughput, share of its peak", 0.4, "#bbbbbb"}};
inline constexpr std::size_t counter_metric_count = sizeof counter_metrics / sizeof counter_metrics[0];

/// The share of metric `m` (counter_metrics' order); negative when that counter was not sampled.
inline double counter_share(const counter_summary& k, std::size_t m) {
  switch (m) {
    case 0: return k.busy_share;
    case 1: return k.sm_active_share;
    case 2: return k.tensor_share;
    default: return k.dram_share;
  }
}

/// One group of the activity chart: a phase (or the whole step) of one run.
struct counter_group {
  std::string label;     ///< the phase (not escaped yet)
  std::string sublabel;  ///< the run, when several are compared
  std::string steps;     ///< "9 of 10 steps": what the group rests on
  std::string color;
  std::string data;  ///< extra attributes for the bars (data-run="0")
  const counter_summary* k = nullptr;
};

// Geometry of the activity chart: four thin bars per group.
inline constexpr double counter_bar_height = 9;
inline constexpr double counter_bar_pitch = 12;
inline constexpr double counter_group_height =
    counter_bar_pitch * counter_metric_count - (counter_bar_pitch - counter_bar_height);
inline constexpr double counter_group_gap = 14;

/// A group's labels at the left (phase, run, steps) and its four bars from `left`, starting at `y`.
/// A bar is share * bar_plot_width long (the axis is 0..100%), its value printed after it.
inline void counter_group_bars(std::string& o, const counter_group& g, double left, double label_right, double y) {
  const std::vector<std::string> lines = g.sublabel.empty() ? std::vector<std::string>{g.label, g.steps}
                                                            : std::vector<std::string>{g.label, g.sublabel, g.steps};
  const double first = y + counter_group_height / 2 - 13.0 * static_cast<double>(lines.size() - 1) / 2 + 4;
  for (std::size_t i = 0; i < lines.size(); ++i)
    svg_text(o, label_right, first + 13.0 * static_cast<double>(i), shorten(lines[i], 28), "end",
             i == 0 ? "label" : "sublabel");
  const std::string who = escape(g.label) + (g.sublabel.empty() ? "" : " \xC2\xB7 " + escape(g.sublabel));
  for (std::size_t m = 0; m < counter_metric_count; ++m) {
    const counter_metric& cm = counter_metrics[m];
    const double share = counter_share(*g.k, m), top = y + counter_bar_pitch * static_cast<double>(m);
    const double mid = top + counter_bar_height / 2 + 4;
    svg_text(o, left - 6, mid, cm.label, "end", "sublabel");
    if (!(share >= 0)) {  // this GPU does not sample that counter: no bar, and no 0% that looks measured
      svg_text(o, left + 6, mid, "not sampled", "start", "note");
      o += "\n";
      continue;
    }
    const double w = std::clamp(share, 0.0, 1.0) * bar_plot_width;
    o += "\n<rect class=\"counter\" " + g.data + " data-phase=\"" + escape(g.label) + "\" data-metric=\"" + cm.key +
         "\" x=\"" + px(left) + "\" y=\"" + px(top) + "\" width=\"" + px(w) + "\" height=\"" + px(counter_bar_height) +
         "\" fill=\"" + g.color + "\" fill-opacity=\"" + fixed(cm.opacity, 1) + "\"><title>" + who + ": " + cm.label +
         " " + share_pct(share) + " of the sampled GPU window, over " + escape(g.steps) + "</title></rect>";
    svg_text(o, left + w + 6, mid, share_percent_text(share) + "%", "start", "value");
    o += "\n";
  }
}

/// Per top-level phase and run, then the whole step: the hardware counters' GPU busy, SM active,
/// tensor and DRAM shares of the phase's sampled GPU window, on a 0..100% scale; each group says
/// how many sampled steps it rests on. Phases in order of first appearance over all runs, each with
/// every run that sampled it, so the schedules of one phase sit next to each other.
inline void counter_chart(std::string& o, const std::vector<run_result>& runs, const phase_palette& pal) {
  std::vector<std::pair<phase_kind, std::string>> keys;
  for (const auto& r : runs)
    for (const auto& p : r.summary.phases)
      if (p.top_level && p.counters && std::none_of(keys.begin(), keys.end(), [&](const auto& k) {
            return k.first == p.kind && k.second == p.name;
          }))
        keys.emplace_back(p.kind, p.name);
  std::vector<counter_group> groups;
  const auto group = [&](std::size_t ri, const std::string& label, const std::string& color, const counter_summary& k) {
    groups.push_back({label, runs.size() > 1 ? runs[ri].name : std::string(),
                      steps_of(k.steps, runs[ri].summary.step_ms.count), color,
                      "data-run=\"" + std::to_string(ri) + "\"", &k});
  };
  for (const auto& [kind, name] : keys)
    for (std::size_t ri = 0; ri < runs.size(); ++ri)
      for (const auto& p : runs[ri].summary.phases)
        if (p.kind == kind && p.name == name && p.top_level && p.counters)
          group(ri, p.name, pal.color(p.kind, p.name), *p.counters);
  for (std::size_t ri = 0; ri < runs.size(); ++ri)
    if (runs[ri].summary.step_counters)  // the whole step, in the legend's greys
      group(ri, "step", counter_metrics[0].swatch, *runs[ri].summary.step_counters);

  std::vector<std::string> labels;
  for (const auto& g : groups)
    for (const std::string* l : {&g.label, &g.sublabel, &g.steps}) labels.push_back(*l);
  const double label_right = label_width(labels), left = label_right + 76, top = 8;  // then the metric labels
  const double pitch = counter_group_height + counter_group_gap;
  const double plot_bottom = top + static_cast<double>(groups.size()) * pitch - counter_group_gap / 2;
  const double width = left + bar_plot_width + 90, height = plot_bottom + 40;  // after a bar: "100.0%", "not sampled"
  o += "<svg class=\"chart\" id=\"gpu-activity\" viewBox=\"0 0 " + px(width) + " " + px(height) + "\" width=\"" +
       px(width) + "\" height=\"" + px(height) +
       "\" role=\"img\" aria-label=\"GPU busy, SM active, tensor and DRAM shares within each phase, from hardware "
       "counters\">\n";
  value_axis(o, nice_axis(100), left, bar_plot_width, top - 4, plot_bottom, "% of the sampled GPU window");
  o += "\n";
  for (std::size_t i = 0; i < groups.size(); ++i)
    counter_group_bars(o, groups[i], left, label_right, top + static_cast<double>(i) * pitch);
  o += "</svg>\n<ul class=\"legend\">";
  for (const auto& cm : counter_metrics) {
    o += "<li>";
    swatch(o, cm.swatch);
    o += escape(cm.legend) + "</li>";
  }
  o += "<li class=\"muted\">each phase in its own colour, lighter down its four bars</li></ul>\n";
}

}  // namespace html
}  // namespace detail
TRACEML_END_NAMESPACE
