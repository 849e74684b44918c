// traceml: hardware-counter activity of every phase on every step -- a GPU source that adds CUPTI
// PM sampling (pm_sampler.hpp) to another source (CUDA events, or CUPTI kernel records on a few
// steps).
//
// How a sample finds its phase: the inner source times every step and phase with CUDA events; at
// each step's begin, right behind the step's first event on the same stream, this source stamps the
// GPU's clock (gpu_clock.hpp). The step's events then place every phase on the GPU's clock (stamp +
// time from the step's first event to the phase's), the clock PM samples carry; each phase gets the
// overlap-weighted mean of the samples over its window (pm_samples.hpp). A step is held back until
// the samples reach past its end (they arrive a decode period late), at most `max_hold_ms`.
//
// Cost on the training thread: one stamp kernel launch per step the inner source times (~2-3 us;
// event_sampling.hpp chooses those steps). The sampler's decoding
// runs on its own thread. When PM sampling is unavailable (privileges, unsupported GPU, counters
// taken by another tool) the inner source runs alone and status() says why, once.
//
// make_best_gpu_source() adds this source on top of the one it makes (gpu_source_options::
// hardware_counters); by hand, wrap a source that has no counters of its own, since the process has
// one sampler (wrapping make_best_gpu_source()'s result would add a second):
//
//   auto inner = std::make_unique<traceml::cuda_events_source>(events_opts);
//   profiler.set_gpu_source(std::make_unique<traceml::pm_sampling_source>(std::move(inner), pm_opts));
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/cuda_runtime.hpp"
#include "traceml/gpu/cuda_stream.hpp"
#include "traceml/gpu/gpu_clock.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/gpu/pm_placement.hpp"
#include "traceml/gpu/pm_sampler.hpp"
#include "traceml/gpu/pm_samples.hpp"

TRACEML_BEGIN_NAMESPACE

struct pm_sampling_options {
  pm_sampler_options sampler;
  stream_provider current_stream;  ///< where steps begin (the inner source's stream); empty: default stream
  int max_hold_ms = 2000;          ///< a step waits at most this long for samples past its end
  /// The graphics engine's time per kernel launch outside the kernel's record (measured by
  /// benchmarks/pm_sampling_probe, part 5: about 1.5 us on an H200), for the records as the counters
  /// count them on recorded steps (gpu_facts::counted_busy_ns; those are modelled whenever counters run).
  std::int64_t launch_engine_ns = 0;
};

namespace detail {
/// One source at a time takes the process's sampler: each would otherwise see only part of the samples.
inline std::atomic<bool>& pm_sampler_claimed() {
  static std::atomic<bool> claimed{false};
  return claimed;
}
}  // namespace detail

/// The calibration burst: 2 ms, and at least 4 samples at longer intervals (4 ms at the default 1 ms),
/// so that the burst is a run of busy samples and not one sample's edge.
inline constexpr std::int64_t clock_calibration_burst_ns(std::int64_t interval_ns) {
  return interval_ns * 4 > 2000000 ? interval_ns * 4 : 2000000;
}

/// Where the samples' clock stands against the GPU's, measured: the device synchronized and quiet,
/// one burst of work (gpu_clock::busy_burst) between quiet gaps, the samples decoded at once and
/// aligned with it (align_clocks). Samples decoded meanwhile are consumed. `known_offset_ns` and
/// `reach_ns` (> 0): only samples within reach of the burst on the clock the known offset gives are
/// used (a later measurement, when other work ran before). Not on a hot path: ~5 ms.
inline clock_alignment measure_clock_alignment(pm_sampler& sampler, gpu_clock& clock, std::int64_t interval_ns,
                                               std::int64_t known_offset_ns = 0, std::int64_t reach_ns = 0) {
  detail::rt::cudaDeviceSynchronize();
  detail::rt::cudaGetLastError();
  // Quiet long enough that samples of earlier work have been written and decoded before the burst,
  // and the burst's own after it.
  const auto quiet = std::chrono::nanoseconds(std::max<std::int64_t>(20 * interval_ns, 10000000));
  std::this_thread::sleep_for(quiet);
  sampler.flush();
  sampler.take();
  clock_alignment a;
  std::int64_t begin = -1, end = -1;
  if (!clock.busy_burst(nullptr, clock_calibration_burst_ns(interval_ns), begin, end)) {
    a.why = "the calibration burst could not run" + (clock.why().empty() ? std::string() : ": " + clock.why());
    return a;
  }
  std::this_thread::sleep_for(quiet);
  sampler.flush();
  std::vector<pm_sample> seen = sampler.take();
  if (reach_ns > 0) {
    std::vector<pm_sample> near;
    for (const auto& x : seen)
      if (x.end_ns + known_offset_ns >= begin - reach_ns && x.begin_ns + known_offset_ns <= end + reach_ns)
        near.push_back(x);
    seen.swap(near);
  }
  return align_clocks(seen, begin, end);
}

class pm_sampling_source : public gpu_source {
 public:
  pm_sampling_source(std::unique_ptr<gpu_source> inner, pm_sampling_options o = {})
      : inner_(std::move(inner)), opt_(std::move(o)) {
    name_ = std::string(inner_ ? inner_->name() : "none") + "+pm";
    if (!inner_) {
      why_ = "hardware counters off: no GPU time source to place them (no CUDA events)";
      return;
    }
    pm_sampler& shared = process_pm_sampler(opt_.sampler);
    bool expected = false;
    if (!shared.running()) {
      why_ = shared.why();
    } else if (!detail::pm_sampler_claimed().compare_exchange_strong(expected, true)) {
      why_ = "hardware counters off: another profiler of this process is using them";
    } else {
      sampler_ = &shared;
      shared.set_decode_budget(opt_.sampler.decode_budget, opt_.sampler.decode_window_ms);
      base_stats_ = shared.stats();
      taken_ns_ = now_ns();
      if (!shared.resume()) {
        why_ = shared.decode_failure();
        release();
      } else if (!calibrate()) {
        release();
      }
    }
    if (!why_.empty()) report_once("pm-sampling", why_ + "; running without hardware counters");
  }
  ~pm_sampling_source() override { release(); }

  /// Whether hardware counters are being sampled for this source.
  bool sampling() const noexcept { return sampler_ != nullptr; }
  /// What the sampler did since this source took it.
  pm_sampler_stats sampler_stats() const {
    if (!sampler_) return {};
    pm_sampler_stats s = sampler_->stats();
    s.samples -= base_stats_.samples;
    s.decode_passes -= base_stats_.decode_passes;
    s.overflows -= base_stats_.overflows;
    s.irregular -= base_stats_.irregular;
    s.gaps -= base_stats_.gaps;
    s.decode_cpu_ns -= base_stats_.decode_cpu_ns;
    return s;
  }
  const std::string& why() const noexcept { return why_; }
  gpu_source* inner() const noexcept { return inner_.get(); }

  const char* name() const noexcept override { return name_.c_str(); }
  records_as_counted counter_view() const noexcept override {
    if (!sampling()) return {};
    return records_as_counted{sampler_->interval_ns(), opt_.launch_engine_ns};
  }
  bool wants_scope_hooks() const noexcept override { return (inner_ && inner_->wants_scope_hooks()) || sampling(); }
  std::shared_ptr<const kernel_name_table> kernel_names() const noexcept override {
    return inner_ ? inner_->kernel_names() : nullptr;
  }

  /// Hot: the inner source's work, then at a step's begin one clock stamp behind its first event,
  /// on the steps the inner source times (without their events, samples cannot be placed).
  void on_scope_begin(phase_kind kind, const char* name, std::int32_t step, std::int32_t mb) noexcept override {
    if (inner_ && inner_->wants_scope_hooks()) inner_->on_scope_begin(kind, name, step, mb);
    if (kind != phase_kind::step || !sampling() || !step_timed()) return;
    const int slot = clock_.stamp(detail::stream_of(opt_.current_stream));
    if (slot < 0) {
      if (!clock_.why().empty()) report_once("pm-clock", "hardware counters not placed on phases: " + clock_.why());
      return;
    }
    detail::lock_guard lock(mu_);
    stamps_[step] = slot;
  }
  bool step_timed() const noexcept override { return !inner_ || inner_->step_timed(); }
  void charge_processing(std::int64_t cpu_ns) noexcept override {
    if (inner_) inner_->charge_processing(cpu_ns);
  }
  void on_scope_end(const span_record& r) noexcept override {
    if (inner_ && inner_->wants_scope_hooks()) inner_->on_scope_end(r);
  }
  void step_closed(const span_record& step) noexcept override {
    if (inner_) inner_->step_closed(step);
  }
  void step_ended(std::int32_t step, const std::vector<span_record>& spans) override {
    if (inner_) inner_->step_ended(step, spans);
  }

  gpu_delivery collect(bool final) override {
    if (!inner_) return gpu_delivery{};
    gpu_delivery d = inner_->collect(final);
    if (!sampling()) return d;
    take_samples();
    const std::int64_t now = now_ns();
    for (auto& s : d.steps) held_.push_back(held_step{std::move(s), now});
    d.steps.clear();
    if (final) {
      // The inner source synchronized the device: the last samples reach the hardware buffer within
      // a few intervals. Wait for them to pass the last step's end, 100 ms at most.
      std::int64_t last_end = -1;
      for (auto& h : held_) {
        place(h.activity);
        last_end = std::max(last_end, detail::step_gpu_end(h.activity));
      }
      for (int i = 0; i < 50 && last_end >= 0 && samples_reach_ns(samples_) < last_end; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        sampler_->flush();
        take_samples();
      }
    }
    const std::int64_t reach = std::max(samples_reach_ns(samples_), decoded_reach_ns_);
    while (!held_.empty()) {
      held_step& h = held_.front();
      const placement where = place(h.activity);
      const std::int64_t end = detail::step_gpu_end(h.activity);
      // Reached by the samples, or past where they stopped for a gap of the decoding budget (none
      // comes for it: released now, without counters).
      const bool covered = end >= 0 && (reach >= end || (gap_from_ns_ >= 0 && end > gap_from_ns_));
      const bool too_old = now - h.arrived_ns > std::int64_t{opt_.max_hold_ms} * 1000000;
      // A step whose stamp has not been seen to run yet waits for it, as for its samples.
      const bool never = where == placement::no_stamp || (where == placement::placed && end < 0);
      if (!(final || covered || too_old || never)) break;
      if (where == placement::waiting) {
        give_up_stamp(h.activity.step);
        ++lost_.stamp_not_run;
      }
      if (where == placement::placed && end >= 0 && !covered) ++lost_.samples_late;
      // A step reached by decoding gets counters only where evaluated samples cover all of it: one
      // that falls in (or across the edge of) a gap between the budget's windows gets none.
      const bool whole = where == placement::placed && end >= 0 &&
                         samples_cover(samples_, h.activity.gpu_clock_ns, end, 2 * sampler_->interval_ns());
      if (covered && where == placement::placed && !whole)
        ++between_windows_;
      else
        detail::apply_samples(h.activity, samples_);
      released_end_ns_ = std::max(released_end_ns_, end);
      d.steps.push_back(std::move(h.activity));
      held_.pop_front();
    }
    trim_samples();
    if (final && !drift_measured_) measure_drift();
    return d;
  }

  /// The clock alignment measured at start, and how far it had moved by the end of the run (the
  /// final collect() measures it again; 0 until then).
  const clock_alignment& alignment() const noexcept { return alignment_; }
  std::int64_t drift_ns() const noexcept { return drift_ns_; }

  std::string status() const override {
    const std::string inner = inner_ ? inner_->status() : std::string("no GPU time source");
    if (!sampling()) return inner + "; " + (why_.empty() ? std::string("hardware counters off") : why_);
    char aligned[96];
    std::snprintf(aligned, sizeof aligned, "clock aligned by a %.1f ms calibration burst", alignment_.burst_ms);
    std::string s = inner + "; " + sampler_->status() + " (on the steps the events time, every phase; " + aligned;
    if (drift_measured_) {
      char moved[64];
      std::snprintf(moved, sizeof moved, ", moved %+.1f us by the end", static_cast<double>(drift_ns_) / 1e3);
      s += moved;
    }
    // What the sampler did for this source: a reader can tell lost samples from idle time.
    const pm_sampler_stats st = sampler_stats();
    const double wall_s = static_cast<double>(now_ns() - taken_ns_) / 1e9;
    char counts[260];
    std::snprintf(counts, sizeof counts,
                  "; %llu samples (%.0f per s), %llu gaps between windows, %llu dropped as irregular, "
                  "%llu overflows, decoding %.2f%% of one core",
                  static_cast<unsigned long long>(st.samples),
                  wall_s > 0 ? static_cast<double>(st.samples) / wall_s : 0.0, static_cast<unsigned long long>(st.gaps),
                  static_cast<unsigned long long>(st.irregular), static_cast<unsigned long long>(st.overflows),
                  wall_s > 0 ? 100.0 * static_cast<double>(st.decode_cpu_ns) / 1e9 / wall_s : 0.0);
    s += ")";
    s += counts;
    if (const std::string chosen = sampler_->budget_status(); !chosen.empty()) s += "; " + chosen;
    if (between_windows_) {
      char gap[120];
      std::snprintf(gap, sizeof gap, "; %llu timed steps between the windows, without counters",
                    static_cast<unsigned long long>(between_windows_));
      s += gap;
    }
    if (const std::uint64_t lost = lost_.stamp_not_run + lost_.samples_late) {
      char why[200];
      std::snprintf(why, sizeof why,
                    "; %llu timed steps without full counters (%llu whose clock stamp was not seen to run, %llu "
                    "whose samples had not reached their end when they were released)",
                    static_cast<unsigned long long>(lost), static_cast<unsigned long long>(lost_.stamp_not_run),
                    static_cast<unsigned long long>(lost_.samples_late));
      s += why;
    }
    return s;
  }

 private:
  struct held_step {
    step_activity activity;
    std::int64_t arrived_ns = 0;
  };

  /// Gives the process's sampler back, paused until the next source takes it.
  void release() {
    if (!sampler_) return;
    sampler_->pause();
    sampler_ = nullptr;
    detail::pm_sampler_claimed().store(false);
  }

  bool calibrate() {
    // Up to three tries: once on the H200 the samples of a burst had not arrived (0.003 ms seen of
    // 2 ms) where the same measurement succeeded in every other process.
    for (int attempt = 0; attempt < 3; ++attempt) {
      alignment_ = measure_clock_alignment(*sampler_, clock_, sampler_->interval_ns());
      if (alignment_.ok) break;
    }
    if (!alignment_.ok)
      why_ = "hardware counters off: their clock could not be aligned with the GPU's (" + alignment_.why + ")";
    return alignment_.ok;
  }

  void measure_drift() {
    drift_measured_ = true;
    if (!alignment_.ok || !sampling()) return;
    // Steps were all placed already: the samples taken here serve the measurement alone.
    const clock_alignment again =
        measure_clock_alignment(*sampler_, clock_, sampler_->interval_ns(), alignment_.offset_ns,
                                2 * clock_calibration_burst_ns(sampler_->interval_ns()));
    if (again.ok)
      drift_ns_ = again.offset_ns - alignment_.offset_ns;
    else
      drift_measured_ = false;
  }

  enum class placement { placed, no_stamp, waiting };

  /// The step's GPU clock from its stamp. A step is delivered once its events completed, yet the
  /// stamp's write to host memory may not be visible yet: then the stamp is kept and the step waits
  /// (`waiting`) for a later collect(). `no_stamp`: none was taken (a step the events did not time,
  /// all slots in flight, capture).
  placement place(step_activity& a) {
    if (a.gpu_clock_ns >= 0) return placement::placed;
    int slot = -1;
    {
      detail::lock_guard lock(mu_);
      auto it = stamps_.find(a.step);
      if (it == stamps_.end()) return placement::no_stamp;
      slot = it->second;
    }
    std::int64_t t = -1;
    if (!clock_.read(slot, t)) return placement::waiting;
    a.gpu_clock_ns = t;
    detail::lock_guard lock(mu_);
    stamps_.erase(a.step);
    return placement::placed;
  }

  /// A step released without its stamp seen: the slot is not given back (a late write would land in
  /// the next step that takes it); the step goes without counters.
  void give_up_stamp(std::int32_t step) {
    detail::lock_guard lock(mu_);
    stamps_.erase(step);
  }

  void take_samples() {
    // The reach first: every sample decoded up to it is in what take() returns next.
    const pm_sampler_stats st = sampler_->stats();
    if (st.decoded_to_ns > 0) decoded_reach_ns_ = std::max(decoded_reach_ns_, st.decoded_to_ns + alignment_.offset_ns);
    gap_from_ns_ = st.gap_from_ns >= 0 ? st.gap_from_ns + alignment_.offset_ns : -1;
    auto fresh = sampler_->take();
    shift_samples(fresh, alignment_.offset_ns);
    samples_.insert(samples_.end(), fresh.begin(), fresh.end());
  }

  /// Samples before the earliest step not yet released are of no further use: that step is the
  /// oldest held one, or one the inner source has not delivered yet (its stamp may have run), or,
  /// when neither is known, one that begins after the last released step's end.
  void trim_samples() {
    std::int64_t keep_from = released_end_ns_;
    if (!held_.empty()) {
      if (held_.front().activity.gpu_clock_ns < 0) return;
      keep_from = held_.front().activity.gpu_clock_ns;
    }
    {
      const std::int64_t reach = samples_reach_ns(samples_);
      detail::lock_guard lock(mu_);
      for (auto it = stamps_.begin(); it != stamps_.end();) {
        std::int64_t t = -1;
        if (clock_.peek(it->second, t)) {
          // A step the inner source never delivered (dropped) would hold every sample after it.
          if (reach - t > std::int64_t{opt_.max_hold_ms} * 1000000 * 4) {
            clock_.release(it->second);
            it = stamps_.erase(it);
            continue;
          }
          keep_from = std::min(keep_from, t);
        }
        ++it;
      }
    }
    if (keep_from <= 0) return;
    keep_from -= 1000000;  // 1 ms of slack for the stamp's own delay
    std::size_t n = 0;
    while (n < samples_.size() && samples_[n].end_ns < keep_from) ++n;
    samples_.erase(samples_.begin(), samples_.begin() + static_cast<std::ptrdiff_t>(n));
  }

  std::unique_ptr<gpu_source> inner_;
  pm_sampling_options opt_;
  std::string name_, why_;
  pm_sampler* sampler_ = nullptr;  // the process's, while this source holds it
  pm_sampler_stats base_stats_;    // its counts when this source took it
  std::int64_t taken_ns_ = 0;      // and when
  gpu_clock clock_;
  detail::mutex mu_;                                                      // guards stamps_ (hooks vs collect)
  std::unordered_map<std::int32_t, int> stamps_ TRACEML_GUARDED_BY(mu_);  // step -> clock slot
  std::deque<held_step> held_;                                            // collect() only (one caller at a time)
  std::vector<pm_sample> samples_;                                        // sorted, on the GPU's clock; collect() only
  std::int64_t released_end_ns_ = -1;  // GPU-clock end of the last step released; collect() only
  std::int64_t decoded_reach_ns_ = 0;  // GPU-clock end of the last sample decoded
  std::int64_t gap_from_ns_ = -1;      // GPU clock: where the samples stopped for a budget's gap; -1 none
  std::uint64_t between_windows_ = 0;  // timed steps in the budget's gaps (no counters); collect() only
  clock_alignment alignment_;          // samples' clock -> GPU clock, measured at start
  std::int64_t drift_ns_ = 0;
  bool drift_measured_ = false;
  /// Steps released without counters, by cause (said in status()); collect() only.
  struct lost_steps {
    std::uint64_t stamp_not_run = 0, samples_late = 0;
  } lost_;
};

TRACEML_END_NAMESPACE
