// traceml: the run summary built one step at a time, in memory that does not grow with the run.
//
// The profiler hands every finished step to a run_accumulator; at the end (or at any time) its
// summary() is the run_summary of summary.hpp. Every figure is a running_stats (stats.hpp: exact
// quantiles up to 10,000 steps, a DDSketch beyond), computed once, over the one sample set it rests
// on -- measured, GPU-timed, recorded or baseline steps (summary.hpp says which is which) -- with the
// count of those steps. summarize_run() is the same for a vector of steps.
//
//   traceml::run_accumulator acc(/*warmup=*/5);
//   for (const auto& st : steps) acc.add(st);
//   traceml::run_summary s = acc.summary();
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "traceml/analysis/quantile_sketch.hpp"
#include "traceml/analysis/stats.hpp"
#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/phase_key.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {

/// Kernel-record figures of one phase (or the step) over the recorded steps, as they stream in.
class kernel_accumulator {
 public:
  /// One recorded step: the phase's wall time there, its facts (micro-batches summed), its micro-batch
  /// occurrences, its kernels and their durations. A recorded step without the phase is add(0, {}, 0, {}).
  void add(double wall_ms, const gpu_facts& f, double entries, const std::vector<kernel_stat>& kernels,
           const std::vector<std::int64_t>& durations_ns = {}) {
    const std::int64_t window = std::max<std::int64_t>(f.window_ns, 0);
    ++steps_;
    wall_.add(wall_ms);
    window_.add(ms(window));
    kernel_.add(ms(f.kernel_ns));
    busy_.add(ms(f.busy_ns));
    idle_.add(ms(f.idle_ns));
    launches_ += static_cast<double>(f.kernel_count);
    entries_ += entries;
    kernel_total_ += static_cast<double>(f.kernel_ns);
    busy_total_ += static_cast<double>(f.busy_ns);
    idle_total_ += static_cast<double>(f.idle_ns);
    window_total_ += static_cast<double>(window);
    own_total_ += static_cast<double>(f.own_ns);
    hidden_total_ += static_cast<double>(f.hidden_ns);
    idle_host_total_ += static_cast<double>(f.idle_host_ns);
    idle_gap_total_ += static_cast<double>(f.idle_kernel_gap_ns);
    idle_other_total_ += static_cast<double>(f.idle_other_ns);
    copy_total_ += static_cast<double>(f.copy_busy_ns);
    short_total_ += static_cast<double>(f.short_kernel_count);
    for (const auto d : durations_ns) kernel_durations_.add(static_cast<double>(d));
    merge_kernels(kernels_, kernels);  // every name kept: a kernel 11th on every step can be 1st of the run
  }

  kernel_summary summary() const {
    kernel_summary k;
    k.steps = static_cast<std::size_t>(steps_);
    k.wall_ms = wall_.summary();
    k.window_ms = window_.summary();
    k.kernel_ms = kernel_.summary();
    k.busy_ms = busy_.summary();
    k.idle_ms = idle_.summary();
    if (window_total_ > 0) {
      k.busy_share = std::clamp(busy_total_ / window_total_, 0.0, 1.0);
      k.idle_share = std::clamp(idle_total_ / window_total_, 0.0, 1.0);
    }
    const double n = static_cast<double>(std::max<std::uint64_t>(steps_, 1));
    k.kernels_per_step = launches_ / n;
    k.kernels_per_microbatch = entries_ > 0 ? launches_ / entries_ : 0;
    k.mean_kernel_us = launches_ > 0 ? kernel_total_ / launches_ / 1e3 : 0;
    k.hidden_share = own_total_ > 0 ? std::clamp(hidden_total_ / own_total_, 0.0, 1.0) : 0;
    k.idle_host_ms = idle_host_total_ / 1e6 / n;
    k.idle_kernel_gap_ms = idle_gap_total_ / 1e6 / n;
    k.idle_other_ms = idle_other_total_ / 1e6 / n;
    k.copy_ms = copy_total_ / 1e6 / n;
    if (window_total_ > 0) k.copy_share = std::clamp(copy_total_ / window_total_, 0.0, 1.0);
    k.median_kernel_us = kernel_durations_.count() ? kernel_durations_.quantile(0.5) / 1e3 : 0;
    k.short_kernel_share = launches_ > 0 ? std::clamp(short_total_ / launches_, 0.0, 1.0) : 0;
    k.top_kernels = top_kernel_figures(
        kernels_, static_cast<std::size_t>(steps_));  // truncated only now, after every step was merged
    return k;
  }

 private:
  std::uint64_t steps_ = 0;
  running_stats wall_, window_, kernel_, busy_, idle_;
  double launches_ = 0, entries_ = 0, kernel_total_ = 0, busy_total_ = 0, idle_total_ = 0, window_total_ = 0;
  double own_total_ = 0, hidden_total_ = 0;
  double idle_host_total_ = 0, idle_gap_total_ = 0, idle_other_total_ = 0, copy_total_ = 0, short_total_ = 0;
  quantile_sketch kernel_durations_{sketch_relative_error};  // bounded: log-spaced buckets, not the values
  std::vector<kernel_stat> kernels_;
};

/// Hardware-counter figures of one phase (or the step) over the sampled steps, as they stream in.
class counter_accumulator {
 public:
  /// One sampled step: the phase's facts there (micro-batches summed; empty when it did not run) and
  /// whether the step also had kernel records. A phase that ran but whose window no sample reached
  /// (no GPU window) is not added: it would read as idle. Returns the busy time added (ms), or
  /// nullopt when the step was not added.
  std::optional<double> add(const gpu_facts& f, bool ran, bool recorded) {
    const counter_facts& c = f.counters;
    if (ran && !c.measured()) return std::nullopt;
    const std::int64_t window = !ran ? 0 : f.span_ns >= 0 ? std::max(f.span_ns, c.covered_ns) : c.covered_ns;
    const double share = ran ? std::max(busy_share(c), 0.0) : 0.0;
    const double busy = share * static_cast<double>(window);
    ++steps_;
    window_.add(ms(window));
    busy_.add(busy / 1e6);
    idle_.add((static_cast<double>(window) - busy) / 1e6);
    total_ += c;
    window_total_ += static_cast<double>(window);
    if (recorded && ran && f.window_ns > 0) {
      recorded_counters_ += c;
      recorded_kernel_busy_ += static_cast<double>(f.busy_ns);
      recorded_window_ += static_cast<double>(f.window_ns);
      ++recorded_steps_;
      if (f.counted_busy_ns >= 0) {
        recorded_counted_ += static_cast<double>(f.counted_busy_ns);
        ++counted_steps_;
      }
    }
    return busy / 1e6;
  }
  std::uint64_t steps() const noexcept { return steps_; }

  counter_summary summary() const {
    counter_summary k;
    k.steps = static_cast<std::size_t>(steps_);
    k.window_ms = window_.summary();
    k.busy_ms = busy_.summary();
    k.idle_ms = idle_.summary();
    k.busy_share = std::max(busy_share(total_), 0.0);
    k.sm_active_share = std::max(sm_active_share(total_), 0.0);
    k.tensor_share = tensor_share(total_);
    k.dram_share = dram_share(total_);
    k.coverage = window_total_ > 0 ? std::clamp(static_cast<double>(total_.covered_ns) / window_total_, 0.0, 1.0) : 0;
    k.samples_per_step = steps_ ? static_cast<double>(total_.samples) / static_cast<double>(steps_) : 0;
    k.recorded_steps = static_cast<std::size_t>(recorded_steps_);
    if (recorded_counters_.measured()) k.recorded_counter_busy_share = busy_share(recorded_counters_);
    if (recorded_window_ > 0)
      k.recorded_kernel_busy_share = std::clamp(recorded_kernel_busy_ / recorded_window_, 0.0, 1.0);
    // Only over the very same steps as the other two: every recorded step was modelled.
    if (recorded_window_ > 0 && counted_steps_ == recorded_steps_)
      k.recorded_counted_share = std::clamp(recorded_counted_ / recorded_window_, 0.0, 1.0);
    return k;
  }

 private:
  std::uint64_t steps_ = 0, recorded_steps_ = 0, counted_steps_ = 0;
  running_stats window_, busy_, idle_;
  counter_facts total_, recorded_counters_;
  double window_total_ = 0, recorded_kernel_busy_ = 0, recorded_window_ = 0, recorded_counted_ = 0;
};

/// How many steps of each sample set have been folded so far: a phase that appears late gets zeros
/// for the steps of each set it missed, so that "absent" counts as 0 ms everywhere.
struct set_counts {
  std::uint64_t measured = 0, timed = 0, baseline = 0, baseline_timed = 0, recorded = 0;
  std::uint64_t sampled = 0, baseline_sampled = 0;  ///< hardware counters over the step window
};

/// One phase's statistics as steps stream in.
struct phase_accumulator {
  phase_summary head;  // kind, name, top_level
  set_counts seen;
  running_stats wall, gpu;
  double baseline_wall = 0, baseline_gpu = 0;  // sums over the baseline steps
  std::uint64_t baseline_gpu_steps = 0;
  double all_wall = 0, all_gpu = 0;  // sums over every measured step (when all were recorded)
  std::uint64_t all_gpu_steps = 0;
  kernel_accumulator kernels;
  bool ran_recorded = false;
  counter_accumulator counters;
  bool ran_sampled = false;
  counter_facts baseline_counters, all_counters;  // summed over the sampled baseline / every sampled step
  std::uint64_t baseline_counter_steps = 0, all_counter_steps = 0;

  /// Zeros for every step folded before this phase was known.
  void backfill(const set_counts& now) {
    wall.add(0, now.measured - seen.measured);
    gpu.add(0, now.timed - seen.timed);
    baseline_gpu_steps += now.baseline_timed - seen.baseline_timed;
    all_gpu_steps += now.timed - seen.timed;
    for (auto n = seen.recorded; n < now.recorded; ++n) kernels.add(0, gpu_facts{}, 0, {});
    // The agreement figures use only steps on which the phase ran: the recorded ones it missed need no zeros.
    for (auto n = seen.sampled; n < now.sampled; ++n) counters.add(gpu_facts{}, false, false);
    baseline_counter_steps += now.baseline_sampled - seen.baseline_sampled;
    all_counter_steps += now.sampled - seen.sampled;
    seen = now;
  }
};

/// The phase's GPU facts on one step, its micro-batches summed; `any` false when it has no entry.
struct phase_on_step {
  gpu_facts facts;
  bool any = false, span_known = true;
  double entries = 0;
  std::vector<kernel_stat> kernels;
  std::vector<std::int64_t> durations_ns;
};

inline phase_on_step gpu_of_phase(const step_gpu_report& g, phase_kind kind, const std::string& name) {
  phase_on_step out;
  out.facts.window_ns = 0;
  for (const auto& e : g.phases) {
    if (e.kind != kind || name != e.name) continue;
    out.any = true;
    out.span_known = out.span_known && e.facts.span_ns >= 0;
    out.facts += e.facts;
    if (e.microbatch >= 0) out.entries += 1;
    merge_kernels(out.kernels, e.kernels);
    out.durations_ns.insert(out.durations_ns.end(), e.kernel_durations_ns.begin(), e.kernel_durations_ns.end());
  }
  return out;
}

}  // namespace detail

/// Builds a run_summary one step at a time, in memory that does not grow with the run: every figure
/// is a running_stats (exact quantiles up to exact_quantile_limit steps, a sketch beyond). Steps are
/// added in order; the first 2 x warm-up steps wait until the run is long enough to know how many of
/// them are warm-up (never more than half the run). Every derived figure is computed here, once, over
/// the steps it rests on; sinks only format.
class run_accumulator {
 public:
  explicit run_accumulator(std::size_t requested_warmup = 0, double tokens_per_step = 0, double samples_per_step = 0)
      : warmup_(requested_warmup), tokens_(tokens_per_step), samples_(samples_per_step) {}

  /// One finished step (any order of phases; steps in order).
  void add(const step_result& st) {
    register_phases(st);
    ++steps_;
    total_wall_ms_ += st.wall_ms;
    add_to_timeline(st);
    if (st.gpu) dropped_gpu_ += st.gpu->dropped_records;
    lossy_steps_ += st.lost_phases > 0;
    if (steps_ <= 2 * warmup_) {  // warm-up or not: decided once the run has 2 x warm-up steps
      head_.push_back(st);
      if (steps_ == 2 * warmup_) flush_head(warmup_);
      return;
    }
    fold(st, /*measured=*/true);
  }

  std::size_t steps() const noexcept { return static_cast<std::size_t>(steps_); }

  /// The summary of the steps added so far.
  run_summary summary() const {
    if (!head_.empty()) {  // a short run: its warm-up is half of it
      run_accumulator copy = *this;
      copy.flush_head(effective_warmup(warmup_, static_cast<std::size_t>(steps_)));
      return copy.summary();
    }
    run_summary s;
    s.steps = static_cast<std::size_t>(steps_);
    s.warmup_steps = static_cast<std::size_t>(warmup_steps_);
    s.total_wall_ms = total_wall_ms_;
    s.step_ms = step_.summary();
    s.residual_ms = residual_.summary();
    if (s.step_ms.mean > 0) {
      s.tokens_per_s = tokens_ * 1e3 / s.step_ms.mean;
      s.samples_per_s = samples_ * 1e3 / s.step_ms.mean;
    }
    if (step_gpu_.count()) s.step_gpu_ms = step_gpu_.summary();
    if (count_.recorded) s.step_kernels = step_kernels_.summary();
    if (step_counters_.steps()) s.step_counters = step_counters_.summary();
    summarize_sets(s);
    for (const auto& pa : phases_) s.phases.push_back(phase_result(pa));
    s.peak_allocated_bytes = peak_allocated_;
    s.peak_reserved_bytes = peak_reserved_;
    s.unattributed_kernels = unattributed_;
    s.dropped_gpu_records = dropped_gpu_;
    s.steps_with_lost_phases = lossy_steps_;
    s.measured_steps_with_lost_phases = measured_lossy_steps_;
    s.timeline = timeline_;
    return s;
  }

 private:
  static bool recorded(const step_result& st) { return st.gpu && st.gpu->kernels_measured; }
  static bool sampled(const step_result& st) { return st.gpu && st.gpu->total.counters.measured(); }

  /// Phase order: first appearance over all steps, warm-up included, so that the table keeps the
  /// loop's order even when a phase first appears late.
  void register_phases(const step_result& st) {
    for (const auto& p : st.phases) {
      auto it = index_.find(phase_key{p.kind, p.name});
      if (it == index_.end()) {
        phase_accumulator pa;
        pa.head.kind = p.kind;
        pa.head.name = p.name;
        pa.head.top_level = p.top_level;
        pa.backfill(count_);
        index_.emplace(phase_key{p.kind, p.name}, phases_.size());
        phases_.push_back(std::move(pa));
      } else {
        phases_[it->second].head.top_level = phases_[it->second].head.top_level && p.top_level;
      }
    }
  }

  /// Appends to the last bucket until it holds bucket_steps_ steps; at timeline_points buckets,
  /// neighbours merge and buckets hold twice as many steps.
  void add_to_timeline(const step_result& st) {
    if (timeline_.empty() || timeline_.back().steps >= bucket_steps_) {
      if (timeline_.size() == timeline_points) {
        for (std::size_t i = 0; i < timeline_points / 2; ++i)
          timeline_[i] = merged(timeline_[2 * i], timeline_[2 * i + 1]);
        timeline_.resize(timeline_points / 2);
        bucket_steps_ *= 2;
      }
      if (timeline_.empty() || timeline_.back().steps >= bucket_steps_)
        timeline_.push_back(step_bucket{st.step, 0, 0, st.wall_ms, st.wall_ms});
    }
    auto& b = timeline_.back();
    b.mean_ms += (st.wall_ms - b.mean_ms) / static_cast<double>(++b.steps);
    // The baseline's rule (fold()), on every step: the timeline covers warm-up too.
    const bool records_on = recorded(st) || (st.gpu && st.gpu->schedule.phase == schedule_phase::warmup);
    if (!records_on && !timeline_after_records_)
      b.untraced_mean_ms += (st.wall_ms - b.untraced_mean_ms) / static_cast<double>(++b.untraced_steps);
    timeline_after_records_ = records_on;
    if (st.gpu && st.gpu->peak_allocated_bytes >= 0) {
      const auto bytes = static_cast<double>(st.gpu->peak_allocated_bytes);
      const double before = b.memory_steps == 0 ? bytes : b.allocated_bytes;
      b.allocated_bytes = before + (bytes - before) / (b.memory_steps + 1.0);
      ++b.memory_steps;
    }
    b.min_ms = std::min(b.min_ms, st.wall_ms);
    b.max_ms = std::max(b.max_ms, st.wall_ms);
  }

  static step_bucket merged(const step_bucket& a, const step_bucket& b) {
    step_bucket m = a;
    m.steps = a.steps + b.steps;
    m.mean_ms = (a.mean_ms * a.steps + b.mean_ms * b.steps) / static_cast<double>(m.steps);
    m.min_ms = std::min(a.min_ms, b.min_ms);
    m.max_ms = std::max(a.max_ms, b.max_ms);
    m.untraced_steps = a.untraced_steps + b.untraced_steps;
    if (m.untraced_steps > 0)
      m.untraced_mean_ms = (a.untraced_mean_ms * a.untraced_steps + b.untraced_mean_ms * b.untraced_steps) /
                           static_cast<double>(m.untraced_steps);
    m.memory_steps = a.memory_steps + b.memory_steps;
    if (m.memory_steps > 0)
      m.allocated_bytes =
          (std::max(a.allocated_bytes, 0.0) * a.memory_steps + std::max(b.allocated_bytes, 0.0) * b.memory_steps) /
          static_cast<double>(m.memory_steps);
    return m;
  }

  void flush_head(std::uint64_t warmup) {
    warmup_steps_ = warmup;
    for (std::size_t i = 0; i < head_.size(); ++i) fold(head_[i], i >= warmup);
    head_.clear();
  }

  /// One step into the sample sets: measured (after warm-up), recorded (kernel records), baseline
  /// (measured, records off, and not right after a step with records on). A schedule's warm-up
  /// step had records on without reporting kernels: neither recorded nor baseline, so that the
  /// recording cost never pairs a recorded step with one that paid CUPTI's cost too.
  void fold(const step_result& st, bool measured) {
    const bool rec = recorded(st), after = previous_records_on_;
    const bool discarded = st.gpu && st.gpu->schedule.phase == schedule_phase::warmup;
    previous_records_on_ = rec || discarded;
    if (!measured) return;
    const bool timed = st.gpu && st.gpu->total.span_ns >= 0;
    const bool base = !rec && !discarded && !after;
    step_.add(st.wall_ms);
    residual_.add(st.residual_ms);
    measured_lossy_steps_ += st.lost_phases > 0;
    if (timed) step_gpu_.add(ms(st.gpu->total.span_ns));
    if (st.gpu) {
      peak_allocated_ = std::max(peak_allocated_, st.gpu->peak_allocated_bytes);
      peak_reserved_ = std::max(peak_reserved_, st.gpu->peak_reserved_bytes);
      unattributed_ += st.gpu->unattributed_kernels;
    }
    if (rec) {
      recorded_step_.add(st.wall_ms);
      std::vector<kernel_stat> all;
      std::vector<std::int64_t> durations = st.gpu->unattributed_kernel_durations_ns;
      for (const auto& p : st.gpu->phases) {
        merge_kernels(all, p.kernels);
        durations.insert(durations.end(), p.kernel_durations_ns.begin(), p.kernel_durations_ns.end());
      }
      step_kernels_.add(st.wall_ms, st.gpu->total, 0, all, durations);
    }
    const bool sam = sampled(st);
    if (sam) step_counters_.add(st.gpu->total, true, rec);
    if (base) {
      baseline_step_.add(st.wall_ms);
      baseline_residual_ += st.residual_ms;
      recent_untraced_[recent_count_++ % recent_untraced_.size()] = st.wall_ms;
    }
    if (rec && recent_count_ > 0) recorded_ratio_.add(st.wall_ms / recent_untraced_median());
    // Also every measured step, for the baseline of a run whose every step was recorded.
    all_residual_ += st.residual_ms;
    for (auto& pa : phases_) fold_phase(pa, st, timed, base, rec, sam);
    ++count_.measured;
    count_.timed += timed;
    count_.baseline += base;
    count_.baseline_timed += base && timed;
    count_.recorded += rec;
    count_.sampled += sam;
    count_.baseline_sampled += base && sam;
  }

  void fold_phase(detail::phase_accumulator& pa, const step_result& st, bool timed, bool base, bool rec, bool sam) {
    const phase_time* p = st.find(pa.head.kind, pa.head.name);
    const double wall = p ? p->wall_ms : 0.0;
    detail::phase_on_step g;
    if (st.gpu) g = detail::gpu_of_phase(*st.gpu, pa.head.kind, pa.head.name);
    // GPU time on this step: its own when measured; 0 when absent from a step timed on the GPU.
    std::optional<double> gpu;
    if (g.any && g.span_known)
      gpu = ms(g.facts.span_ns);
    else if (!g.any && timed)
      gpu = 0.0;
    pa.wall.add(wall);
    if (gpu) pa.gpu.add(*gpu);
    if (base) {
      pa.baseline_wall += wall;
      if (gpu) {
        pa.baseline_gpu += *gpu;
        ++pa.baseline_gpu_steps;
      }
    }
    pa.all_wall += wall;
    if (gpu) {
      pa.all_gpu += *gpu;
      ++pa.all_gpu_steps;
    }
    if (rec) {
      pa.ran_recorded = pa.ran_recorded || g.any;
      pa.kernels.add(wall, g.facts, g.entries, g.kernels, g.durations_ns);
    }
    if (sam && pa.counters.add(g.facts, g.any, rec)) {
      pa.ran_sampled = pa.ran_sampled || g.any;
      pa.all_counters += g.facts.counters;
      ++pa.all_counter_steps;
      if (base) {
        pa.baseline_counters += g.facts.counters;
        ++pa.baseline_counter_steps;
      }
    }
    ++pa.seen.measured;
    pa.seen.timed += timed;
    pa.seen.baseline += base;
    pa.seen.baseline_timed += base && timed;
    pa.seen.recorded += rec;
    pa.seen.sampled += sam;
    pa.seen.baseline_sampled += base && sam;
  }

  /// The median of the last (up to 5) untraced steps: the local baseline a recorded step is paired with.
  double recent_untraced_median() const {
    const std::size_t n = std::min<std::size_t>(recent_count_, recent_untraced_.size());
    std::array<double, 5> v{};
    std::copy(recent_untraced_.begin(), recent_untraced_.begin() + static_cast<std::ptrdiff_t>(n), v.begin());
    std::sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }

  /// Baseline and recording cost. With every measured step recorded, the baseline is all of them.
  void summarize_sets(run_summary& s) const {
    s.recording.recorded_steps = static_cast<std::size_t>(count_.recorded);
    s.baseline.untraced = count_.baseline > 0 || count_.measured == 0;
    if (s.baseline.untraced) {
      s.baseline.steps = static_cast<std::size_t>(count_.baseline);
      s.baseline.step_ms = baseline_step_.mean();
      s.baseline.residual_ms = count_.baseline ? baseline_residual_ / static_cast<double>(count_.baseline) : 0;
    } else {
      s.baseline.steps = static_cast<std::size_t>(count_.measured);
      s.baseline.step_ms = step_.mean();
      s.baseline.residual_ms = all_residual_ / static_cast<double>(count_.measured);
    }
    if (s.baseline.steps > 0) {
      const summary_stats q = s.baseline.untraced ? baseline_step_.summary() : step_.summary();
      s.baseline.p10_ms = q.p10;
      s.baseline.median_ms = q.median;
      s.baseline.p90_ms = q.p90;
    }
    if (count_.recorded) {
      s.recording.recorded_step_ms = recorded_step_.summary().median;
      if (s.baseline.untraced && count_.baseline) s.recording.untraced_step_ms = baseline_step_.summary().median;
    }
    s.recording.paired_steps = static_cast<std::size_t>(recorded_ratio_.count());
    if (recorded_ratio_.count()) s.recording.cost = recorded_ratio_.summary().median - 1.0;
  }

  phase_summary phase_result(const detail::phase_accumulator& pa) const {
    detail::phase_accumulator a = pa;
    a.backfill(count_);  // a phase registered after the last fold (only in steps still waiting) has zeros
    phase_summary ps = a.head;
    ps.wall_ms = a.wall.summary();
    ps.share = step_.mean() > 0 ? ps.wall_ms.mean / step_.mean() : 0;
    if (a.gpu.count()) ps.gpu_ms = a.gpu.summary();
    const bool untraced = count_.baseline > 0;
    const double n = static_cast<double>(untraced ? count_.baseline : count_.measured);
    const double gpu_sum = untraced ? a.baseline_gpu : a.all_gpu;
    const std::uint64_t gpu_steps = untraced ? a.baseline_gpu_steps : a.all_gpu_steps;
    ps.baseline.wall_ms = n > 0 ? (untraced ? a.baseline_wall : a.all_wall) / n : 0;
    ps.baseline.gpu_ms = n > 0 && gpu_steps == static_cast<std::uint64_t>(n) ? gpu_sum / n : -1;
    // The samples' busy share over the sampled ones of those steps, of their mean GPU window.
    const counter_facts& counted = untraced ? a.baseline_counters : a.all_counters;
    ps.baseline.counter_steps = static_cast<std::size_t>(untraced ? a.baseline_counter_steps : a.all_counter_steps);
    if (ps.baseline.gpu_ms >= 0 && ps.baseline.counter_steps > 0)
      ps.baseline.counter_busy_ms = counted.measured() ? busy_share(counted) * ps.baseline.gpu_ms : 0.0;
    if (a.ran_recorded) ps.kernels = a.kernels.summary();  // zeros would read as "no kernels"
    if (a.ran_sampled) ps.counters = a.counters.summary();
    return ps;
  }

  using phase_accumulator = detail::phase_accumulator;
  static double ms(std::int64_t ns) noexcept { return detail::ms(ns); }

  std::uint64_t warmup_;
  double tokens_, samples_;
  std::uint64_t steps_ = 0, warmup_steps_ = 0;
  double total_wall_ms_ = 0;
  std::vector<step_result> head_;     // at most 2 x warm-up steps, until the warm-up is known
  bool previous_records_on_ = false;  // records were on in the step folded last
  detail::set_counts count_;
  running_stats step_, residual_, step_gpu_, recorded_step_, baseline_step_;
  running_stats recorded_ratio_;             // each recorded step / its local untraced baseline
  std::array<double, 5> recent_untraced_{};  // the last untraced steps' wall times (a ring)
  std::uint64_t recent_count_ = 0;
  double baseline_residual_ = 0, all_residual_ = 0;
  detail::kernel_accumulator step_kernels_;
  detail::counter_accumulator step_counters_;
  std::vector<phase_accumulator> phases_;
  std::unordered_map<phase_key, std::size_t, phase_key_hash> index_;
  std::int64_t peak_allocated_ = -1, peak_reserved_ = -1;
  std::uint64_t unattributed_ = 0, dropped_gpu_ = 0;
  std::uint64_t lossy_steps_ = 0, measured_lossy_steps_ = 0;  // steps that lost phases to a full ring
  bool timeline_after_records_ = false;  // the previous step had kernel records on (the timeline's baseline rule)
  std::vector<step_bucket> timeline_;
  std::uint32_t bucket_steps_ = 1;
};

/// Statistics over steps[warmup..]; tokens/samples per step give throughput (0 = unknown).
inline run_summary summarize_run(const std::vector<step_result>& steps, std::size_t requested_warmup,
                                 double tokens_per_step = 0, double samples_per_step = 0) {
  run_accumulator acc(requested_warmup, tokens_per_step, samples_per_step);
  for (const auto& st : steps) acc.add(st);
  return acc.summary();
}

TRACEML_END_NAMESPACE
