// traceml: the terminal summary table, formatted from run_summary (the same numbers as the JSON).
// Every figure comes from the summary as it is; the footer says which steps each column rests on.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/format.hpp"
#include "traceml/sinks/figure_notes.hpp"
#include "traceml/sinks/verdict_words.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
/// `s` made safe to print on a terminal: where names from user code or from a file (run and phase
/// names) become terminal text, they pass through here. Control characters (C0, DEL, and U+0080..
/// U+009F, with which a terminal begins escape sequences) and bytes that are not UTF-8 are written as
/// \xNN or \u00NN: an ESC shows as the text \x1b, and a NUL cannot end the text early. Valid UTF-8
/// passes as it is; with `keep_newlines`, so do line breaks (text of several lines, not a name).
inline std::string printable(std::string_view s, bool keep_newlines = false) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  const auto escaped = [&](const char* prefix, unsigned char b) {
    out += prefix;
    out += hex[b >> 4];
    out += hex[b & 15];
  };
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char b = byte(i);
    if (b < 0x80) {
      if ((b < 0x20 && !(keep_newlines && b == '\n')) || b == 0x7f)
        escaped("\\x", b);
      else
        out += static_cast<char>(b);
      ++i;
      continue;
    }
    // The length of a well-formed UTF-8 sequence starting here (RFC 3629: no overlong forms, no
    // surrogates, nothing past U+10FFFF); 0 when it is not one.
    const std::size_t n = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (byte(i + k) & 0xc0) == 0x80;
    if (ok && n > 2) {
      const unsigned char c = byte(i + 1);
      ok = !(b == 0xe0 && c < 0xa0) && !(b == 0xed && c > 0x9f) && !(b == 0xf0 && c < 0x90) && !(b == 0xf4 && c > 0x8f);
    }
    if (!ok) {
      escaped("\\x", b);
      ++i;
    } else if (b == 0xc2 && byte(i + 1) < 0xa0) {  // U+0080..U+009F: the C1 controls
      escaped("\\u00", byte(i + 1));
      i += 2;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

/// Which GPU columns the table has: "gpu ms" when GPU time was measured on any step, the kernel
/// columns when any step was recorded, "hidden %" when some phase's work ran beside another's.
struct table_columns {
  bool gpu_ms = false;
  bool kernels = false;
  bool hidden = false;

  explicit table_columns(const run_summary& s) : hidden(any_phase_hidden(s)) {
    gpu_ms = s.step_gpu_ms.has_value();
    kernels = s.step_kernels.has_value();
    for (const auto& p : s.phases) {
      gpu_ms = gpu_ms || p.gpu_ms.has_value();
      kernels = kernels || p.kernels.has_value();
    }
  }
};

/// The wall-time cells of one row: mean, median, p10, p90, min, max, std, share of the step (times
/// below 1 ms in microseconds: ms_text).
inline std::string wall_cells(const summary_stats& w, double share) {
  return pad(ms_text(w.mean, 3), 11) + pad(ms_text(w.median, 3), 11) + pad(ms_text(w.p10, 3), 11) +
         pad(ms_text(w.p90, 3), 11) + pad(ms_text(w.min, 3), 11) + pad(ms_text(w.max, 3), 11) +
         pad(ms_text(w.stddev, 3), 10) + pad(fixed_text(share * 100, 1) + "%", 8);
}

/// The GPU cells of one row ("-" where this row was not measured, so later columns stay aligned; the
/// step's hidden cell too: work beside work is a phase's figure).
inline std::string gpu_cells(const table_columns& c, const std::optional<summary_stats>& gpu_ms,
                             const std::optional<kernel_summary>& k, bool step = false) {
  std::string out;
  if (c.gpu_ms) out += pad(gpu_ms ? ms_text(gpu_ms->mean, 3) : "-", 11);
  if (!c.kernels) return out;
  if (!k) return out + pad("-", 11) + pad("-", 8) + pad("-", 8) + pad("-", 14) + (c.hidden ? pad("-", 10) : "");
  out += pad(ms_text(k->kernel_ms.mean, 3), 11) + pad(fixed_text(k->busy_share * 100, 1), 8) +
         pad(fixed_text(k->idle_share * 100, 1), 8) + pad(count_text(k->kernels_per_step), 14);
  if (!c.hidden) return out;
  return out + pad(step ? "-" : fixed_text(k->hidden_share * 100, 1), 10);
}

/// The phase column of a row: nested phases indented and marked.
inline std::string phase_label(const phase_summary& p) {
  return pad(p.top_level ? printable(p.name) : "  " + printable(p.name) + " (nested)", 22, true);
}

/// The hardware-counter block's columns: the agreement pair only when some sampled step was also
/// recorded (otherwise they would be a column of dashes), and beside it the records as the counters
/// would count them when the run was given the engine's launch time (without it that column reads
/// as the records do, except in windows of a few samples).
struct counter_columns {
  std::size_t agreement_steps = 0;
  double interval_us = 0, launch_us = 0;

  explicit counter_columns(const run_summary& s)
      : agreement_steps(counters_and_records_steps(s)),
        interval_us(s.counted_interval_us),
        launch_us(s.launch_engine_us) {}
  bool agreement() const noexcept { return agreement_steps > 0; }
  bool as_counted() const noexcept { return agreement() && interval_us > 0 && launch_us > 0; }
};

/// The cells of one row of the counter block ("-" for a counter this GPU does not sample, and in the
/// agreement pair for a phase that ran on no recorded step).
inline std::string counter_cells(const counter_columns& c, const counter_summary& k) {
  std::string out = pad(ms_text(k.busy_ms.mean, 3), 11) + pad(share_percent_text(k.busy_share), 8) +
                    pad(share_percent_text(k.sm_active_share), 8) + pad(share_percent_text(k.tensor_share), 10) +
                    pad(share_percent_text(k.dram_share), 8);
  if (!c.agreement()) return out;
  const bool both = k.recorded_steps > 0;
  out += pad(both ? share_percent_text(k.recorded_counter_busy_share) : "-", 17) +
         pad(both ? share_percent_text(k.recorded_kernel_busy_share) : "-", 16);
  if (c.as_counted()) out += pad(both ? share_percent_text(k.recorded_counted_share) : "-", 19);
  return out;
}

/// One compact line of the idle block: the idle time by kind, then the launch statistics and copies.
inline std::string idle_split_cells(const kernel_summary& k) {
  return pad(ms_text(k.idle_ms.mean, 3), 11) + pad(ms_text(k.idle_host_ms, 3), 11) +
         pad(ms_text(k.idle_kernel_gap_ms, 3), 13) + pad(ms_text(k.idle_other_ms, 3), 11) +
         pad(count_text(k.kernels_per_step), 14) +
         pad(k.kernels_per_step > 0 ? fixed_text(k.median_kernel_us, 1) : "-", 12) +
         pad(k.kernels_per_step > 0 ? fixed_text(k.short_kernel_share * 100, 1) : "-", 9) +
         pad(k.window_ms.mean > 0 ? fixed_text(k.copy_share * 100, 1) : "-", 8);
}

/// The GPU idle block under the main table (recorded steps): per phase with kernel records, then the
/// step, where the idle time went (host, kernel gaps, other work beside it; they add up to idle ms)
/// and how the phase launches (launches per step, the median kernel, the share of short ones).
inline std::string idle_split_block(const run_summary& s) {
  const std::string header = pad("GPU idle by kind", 22, true) + pad("idle ms", 11) + pad("host ms", 11) +
                             pad("k. gaps ms", 13) + pad("other ms", 11) + pad("launches/step", 14) +
                             pad("median us", 12) + pad("short %", 9) + pad("copy %", 8);
  const std::string rule(header.size(), '-');
  std::string out = header + "\n" + rule + "\n";
  for (const auto& p : s.phases)
    if (p.kernels) out += phase_label(p) + idle_split_cells(*p.kernels) + "\n";
  if (s.step_kernels) out += rule + "\n" + pad("step", 22, true) + idle_split_cells(*s.step_kernels) + "\n";
  return out + "mean per step over " + steps_of(kernel_steps(s), s.step_ms.count) + " (recorded, CUPTI); " +
         idle_split_note() + "\n";
}

/// The steps the sampled figures rest on, the agreement columns' steps, and the samples' reach:
/// "busy ms, busy/SM/tensor/DRAM % of the sampled GPU window: 9 of 10 steps (sampled, hardware
/// counters); rec. counters/kernels %: GPU busy from counters and from kernel records on the same 1
/// recorded step; samples covered 100.0% of the step's GPU window".
inline std::string counter_footer(const run_summary& s, const counter_columns& c) {
  std::string out =
      "busy ms, busy/SM/tensor/DRAM % of the sampled GPU window: " + steps_of(counter_steps(s), s.step_ms.count) +
      " (sampled, hardware counters)";
  if (c.agreement())
    out += "; rec. counters/kernels %: GPU busy from counters and from kernel records on the same " +
           std::to_string(c.agreement_steps) + (c.agreement_steps == 1 ? " recorded step" : " recorded steps");
  if (c.as_counted())
    out += "; rec. as counted %: the step's records as the counters count (" + fixed_text(c.interval_us, 0) +
           " us samples, " + fixed_text(c.launch_us, 2) + " us of engine time per launch)";
  if (s.step_counters)
    out += "; samples covered " + share_percent_text(s.step_counters->coverage) + "% of the step's GPU window";
  const std::string coarse = coarse_counter_note(s);
  if (!coarse.empty()) out += "; " + coarse;
  return out + "\n";
}

/// The hardware-counter block under the main table: one row per sampled phase, then the step. Its
/// own block rather than more columns, since its figures rest on another sample set (and the main
/// table is wide already).
inline std::string counter_block(const run_summary& s) {
  const counter_columns cols(s);
  std::string header = pad("hardware counters", 22, true) + pad("busy ms", 11) + pad("busy %", 8) + pad("SM %", 8) +
                       pad("tensor %", 10) + pad("DRAM %", 8);
  if (cols.agreement()) header += pad("rec. counters %", 17) + pad("rec. kernels %", 16);
  if (cols.as_counted()) header += pad("rec. as counted %", 19);
  const std::string rule(header.size(), '-');
  std::string out = header + "\n" + rule + "\n";
  for (const auto& p : s.phases)
    if (p.counters) out += phase_label(p) + counter_cells(cols, *p.counters) + "\n";
  if (s.step_counters) out += rule + "\n" + pad("step", 22, true) + counter_cells(cols, *s.step_counters) + "\n";
  return out + counter_footer(s, cols);
}

/// The run's time outside its steps, under the steps' table: each phase recorded while no step was
/// open (its occurrences, total, mean and longest), then the gaps between consecutive steps and, of
/// them, the ones that hold an epoch mark. Empty when the run spent no time outside its steps.
inline std::string outside_steps_block(const run_summary& s) {
  const auto& o = s.outside_steps;
  if (o.empty()) return "";
  const std::string header =
      pad("outside steps", 22, true) + pad("count", 8) + pad("total ms", 12) + pad("mean ms", 12) + pad("max ms", 12);
  const std::string rule(header.size(), '-');
  std::string out = header + "\n" + rule + "\n";
  const auto row = [&](const std::string& label, std::uint64_t n, double total, double max_ms) {
    return pad(label, 22, true) + pad(std::to_string(n), 8) + pad(ms_text(total, 3), 12) +
           pad(ms_text(n ? total / static_cast<double>(n) : 0, 3), 12) + pad(ms_text(max_ms, 3), 12) + "\n";
  };
  for (const auto& p : o.phases)
    out += row(p.top_level ? printable(p.name) : "  " + printable(p.name) + " (nested)", p.count, p.total_ms, p.max_ms);
  if (o.names_left_out) out += "(" + std::to_string(o.names_left_out) + " occurrences of further names not listed)\n";
  if (o.gaps.count) {
    out += rule + "\n" + row("between steps", o.gaps.count, o.gaps.total_ms, o.gaps.largest_ms);
    const auto& e = o.epoch_gaps;
    if (e.count) out += row("  at an epoch's end", e.count, e.total_ms, e.largest_ms);
  }
  out += "between steps: " + share_percent_text(o.gap_share) + "% of the " + fixed_text(o.steps_span_ms, 1) +
         " ms from the first step's start to the last step's end";
  if (o.gaps.count) out += " (largest gap after step " + std::to_string(o.gaps.largest_after_step) + ")";
  out += "; epoch marks: " + std::to_string(o.epoch_marks) + "\n";
  return out;
}

/// What each column rests on: "wall: 10 steps; gpu ms: 10 of 10 steps (CUDA events); kernel ms,
/// busy/idle %, kernels/step: 1 of 10 steps (recorded, CUPTI); recording cost +45.8% per ...".
inline std::string table_footer(const run_summary& s, const table_columns& c) {
  const std::size_t measured = s.step_ms.count;
  std::string out = "wall: " + steps_of(measured, 0);
  if (c.gpu_ms)
    out += std::string("; gpu ms: ") + steps_of(gpu_time_steps(s), measured) + " (" + gpu_time_source(s) + ")";
  if (c.kernels)
    out += std::string("; kernel ms, busy/idle % of the GPU window, kernels/step") + (c.hidden ? ", hidden %" : "") +
           ": " + steps_of(kernel_steps(s), measured) + " (recorded, CUPTI)";
  if (c.hidden) out += "; hidden %: of a phase's own GPU time, the share other work ran beside it (another stream)";
  const std::string cost = recording_cost_note(s.recording);
  if (!cost.empty()) out += "; " + cost;
  return out + "\n";
}
}  // namespace detail

/// Milliseconds as the table prints them: three decimals, below 1 ms in microseconds ("40.0us");
/// JSON keeps full precision.
inline std::string format_ms(double ms) { return detail::ms_text(ms, 3); }

/// The table: one row per phase (nested phases indented), then residual and step. Mean columns add
/// up: the top-level phases' means plus the residual's mean equal the step's mean. GPU columns are
/// per phase and per step as the summary computed them; busy % + idle % = 100 of the GPU window.
/// With hardware counters, a second block under it gives each phase's sampled busy, SM active,
/// tensor and DRAM shares, with its own footer saying which steps they rest on.
/// The profiler's own cost at the run's edges, one line: "profiler start-up 48.8 ms, finish 112.4 ms
/// (writing the outputs included)"; empty when not measured (a summary read from a file has no finish time).
inline std::string profiler_edges_line(const run_summary& s) {
  if (s.startup_ms < 0) return "";
  std::string out = "profiler start-up " + detail::fixed_text(s.startup_ms, 1) + " ms";
  if (s.finish_ms >= 0) out += ", finish " + detail::fixed_text(s.finish_ms, 1) + " ms (writing the outputs included)";
  return out;
}

/// The run's verdicts under the table, one per line with its evidence, then what to try:
/// "verdict host_bound: forward: the GPU is idle 82% ... (6 steps with kernel records)\n  try: ...".
inline std::string verdict_lines(const std::vector<verdict>& vs) {
  std::string out;
  for (const auto& v : vs)
    out += std::string("verdict ") + to_string(v.code) + ": " + detail::printable(verdict_evidence(v)) +
           "\n  try: " + verdict_advice(v) + "\n";
  return out;
}

inline std::string format_table(const run_result& run) {
  using detail::pad;
  const auto& s = run.summary;
  const detail::table_columns cols(s);
  std::string out;
  out += "traceml: " + detail::printable(run.name) + "  (" + std::to_string(s.measured_steps()) + " steps measured, " +
         std::to_string(s.warmup_steps) + " warm-up excluded)\n";
  std::string header = pad("phase", 22, true) + pad("mean ms", 11) + pad("median", 11) + pad("p10", 11) +
                       pad("p90", 11) + pad("min", 11) + pad("max", 11) + pad("std", 10) + pad("share", 8);
  if (cols.gpu_ms) header += pad("gpu ms", 11);
  if (cols.kernels) header += pad("kernel ms", 11) + pad("busy %", 8) + pad("idle %", 8) + pad("kernels/step", 14);
  if (cols.hidden) header += pad("hidden %", 10);
  const std::string rule(header.size(), '-');
  out += header + "\n" + rule + "\n";
  for (const auto& p : s.phases)
    out += detail::phase_label(p) + detail::wall_cells(p.wall_ms, p.share) +
           detail::gpu_cells(cols, p.gpu_ms, p.kernels) + "\n";
  out += pad("(residual)", 22, true) + detail::wall_cells(s.residual_ms, residual_share(s)) + "\n";
  out += rule + "\n";
  out += pad("step", 22, true) + detail::wall_cells(s.step_ms, 1) +
         detail::gpu_cells(cols, s.step_gpu_ms, s.step_kernels, true) + "\n";
  if (cols.gpu_ms || cols.kernels) out += detail::table_footer(s, cols);
  if (detail::counter_steps(s) > 0) out += "\n" + detail::counter_block(s);
  if (const std::string outside = detail::outside_steps_block(s); !outside.empty()) out += "\n" + outside;
  if (detail::kernel_steps(s) > 0) out += "\n" + detail::idle_split_block(s);
  if (s.tokens_per_s > 0) out += "throughput: " + detail::fixed_text(s.tokens_per_s, 1) + " tokens/s\n";
  if (s.samples_per_s > 0) out += "throughput: " + detail::fixed_text(s.samples_per_s, 2) + " samples/s\n";
  if (s.peak_allocated_bytes >= 0)
    out += "gpu memory: peak allocated " +
           detail::fixed_text(static_cast<double>(s.peak_allocated_bytes) / (1 << 30), 2) + " GiB, peak reserved " +
           detail::fixed_text(static_cast<double>(s.peak_reserved_bytes) / (1 << 30), 2) + " GiB\n";
  if (!s.gpu_status.empty()) out += "gpu: " + s.gpu_status + "\n";
  out += verdict_lines(judge_run(s));
  if (const std::string lost = detail::ring_full_note(s); !lost.empty()) out += "warning: " + lost + "\n";
  if (s.capped_records)
    out += "warning: " + std::to_string(s.capped_records) +
           " CPU records of other threads left out at step ends (over max_other_thread_records)\n";
  if (s.overlapping_steps)
    out += "warning: " + std::to_string(s.overlapping_steps) + " steps ignored (began while another step was open)\n";
  if (s.dropped_gpu_records) out += "warning: " + std::to_string(s.dropped_gpu_records) + " GPU records dropped\n";
  return out;
}

TRACEML_END_NAMESPACE
