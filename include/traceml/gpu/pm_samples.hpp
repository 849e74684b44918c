// traceml: hardware-counter samples (CUPTI PM sampling) and what they say about a window of GPU
// time -- a phase of one micro-batch, or a whole step. Plain data and pure functions, no CUDA: the
// mapping is tested on the CPU with synthetic samples (tests/core/test_pm_samples.cpp).
//
// A sample covers an interval of the GPU's clock ([begin_ns, end_ns), 100 us by default) and carries
// shares of that interval: the graphics/compute engine busy (any work at all), the SMs active
// (averaged over SMs: a small grid keeps a few busy and the rest idle), the tensor pipes active and
// DRAM throughput against its peak. A window's figure is the overlap-weighted mean of the samples
// that cover it: a sample half inside the window counts half. The figures are kept as
// nanosecond-weighted sums (`counter_facts`), so that phases and steps add up exactly and a share
// is always a sum divided by the time it was measured over: never above 100%.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// One decoded PM sample. Shares are in [0, 1]; a negative share: that counter was not sampled.
struct pm_sample {
  std::int64_t begin_ns = 0;  ///< on the GPU's clock (%globaltimer, ns)
  std::int64_t end_ns = 0;
  double gpu_busy = -1;         ///< graphics/compute engine active cycles / elapsed cycles
  double sm_active = -1;        ///< SM active cycles averaged over SMs / elapsed cycles
  double tensor_active = -1;    ///< tensor pipes active (average over SMs), share of peak
  double dram_throughput = -1;  ///< DRAM throughput, share of peak
};

/// Where each metric sits in a sample's evaluated values, and what turns a value into a share.
struct sample_layout {
  std::size_t busy = 0, elapsed = 1, sm = 2;  ///< gr__cycles_active.avg, gr__cycles_elapsed.max, sm__cycles_active.avg
  int tensor = -1, dram = -1;                 ///< their positions; -1: not sampled
  double tensor_scale = 0.01;                 ///< value x scale = share (a percentage: 0.01)
  double dram_scale = 0.01;
  std::int64_t interval_ns = 100000;  ///< the interval asked for
};

/// A sample from CUPTI's evaluated values (pure: tested on the CPU), or nullopt when it says nothing
/// about a window: the session's first (it reaches back to when sampling was enabled and is an
/// outlier by CUPTI's own advice), one much longer than the interval, or a value that is not a number.
inline std::optional<pm_sample> sample_from_values(std::uint64_t begin, std::uint64_t end, const std::vector<double>& v,
                                                   const sample_layout& l, bool first) {
  const auto at = [&](long i) {
    return i >= 0 && static_cast<std::size_t>(i) < v.size() ? v[static_cast<std::size_t>(i)] : 0.0;
  };
  if (first || end <= begin || end - begin > static_cast<std::uint64_t>(4 * l.interval_ns) ||
      !std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); }) ||
      std::max({l.busy, l.elapsed, l.sm}) >= v.size())
    return std::nullopt;
  pm_sample s;
  s.begin_ns = static_cast<std::int64_t>(begin);
  s.end_ns = static_cast<std::int64_t>(end);
  const double elapsed = v[l.elapsed];
  // No elapsed cycles: the engine's clock was gated for the whole sample, i.e. it was idle.
  s.gpu_busy = elapsed > 0 ? std::clamp(v[l.busy] / elapsed, 0.0, 1.0) : 0.0;
  s.sm_active = elapsed > 0 ? std::clamp(v[l.sm] / elapsed, 0.0, 1.0) : 0.0;
  if (l.tensor >= 0) s.tensor_active = std::clamp(at(l.tensor) * l.tensor_scale, 0.0, 1.0);
  if (l.dram >= 0) s.dram_throughput = std::clamp(at(l.dram) * l.dram_scale, 0.0, 1.0);
  return s;
}

/// What the samples say about one window. Times in ns; `*_ns` are share x overlap sums, so that
/// busy_ns / covered_ns is the window's busy share.
struct counter_facts {
  std::int64_t covered_ns = 0;  ///< window time covered by samples (0: the window was not sampled)
  std::uint32_t samples = 0;    ///< samples that overlap the window
  double busy_ns = 0;
  double sm_active_ns = 0;
  double tensor_ns = 0;  ///< tensor_covered_ns: part of covered_ns with a tensor counter
  double dram_ns = 0;
  std::int64_t tensor_covered_ns = 0;
  std::int64_t dram_covered_ns = 0;

  bool measured() const noexcept { return covered_ns > 0; }
  counter_facts& operator+=(const counter_facts& o) noexcept {
    covered_ns += o.covered_ns;
    samples += o.samples;
    busy_ns += o.busy_ns;
    sm_active_ns += o.sm_active_ns;
    tensor_ns += o.tensor_ns;
    dram_ns += o.dram_ns;
    tensor_covered_ns += o.tensor_covered_ns;
    dram_covered_ns += o.dram_covered_ns;
    return *this;
  }
};

/// Shares in [0, 1]; -1 when not measured.
inline double share_of(double part_ns, std::int64_t over_ns) noexcept {
  if (over_ns <= 0) return -1;
  return std::clamp(part_ns / static_cast<double>(over_ns), 0.0, 1.0);
}
inline double busy_share(const counter_facts& c) noexcept { return share_of(c.busy_ns, c.covered_ns); }
inline double sm_active_share(const counter_facts& c) noexcept { return share_of(c.sm_active_ns, c.covered_ns); }
inline double tensor_share(const counter_facts& c) noexcept { return share_of(c.tensor_ns, c.tensor_covered_ns); }
inline double dram_share(const counter_facts& c) noexcept { return share_of(c.dram_ns, c.dram_covered_ns); }

/// The first of `samples` (sorted by begin_ns) that may overlap a window from `begin_ns`: the last
/// one beginning at or before it (or the first of all).
inline std::vector<pm_sample>::const_iterator first_overlapping(const std::vector<pm_sample>& samples,
                                                                std::int64_t begin_ns) {
  auto it = std::upper_bound(samples.begin(), samples.end(), begin_ns,
                             [](std::int64_t t, const pm_sample& s) { return t < s.begin_ns; });
  return it == samples.begin() ? it : std::prev(it);
}

/// The facts of [begin_ns, end_ns) from `samples` sorted by begin_ns (non-overlapping, as the
/// hardware produces them). Samples with no gpu_busy value are skipped.
inline counter_facts measure_window(const std::vector<pm_sample>& samples, std::int64_t begin_ns, std::int64_t end_ns) {
  counter_facts f;
  if (end_ns <= begin_ns || samples.empty()) return f;
  auto it = first_overlapping(samples, begin_ns);
  for (; it != samples.end() && it->begin_ns < end_ns; ++it) {
    const std::int64_t lo = std::max(begin_ns, it->begin_ns), hi = std::min(end_ns, it->end_ns);
    if (hi <= lo || it->gpu_busy < 0) continue;
    const auto overlap = static_cast<double>(hi - lo);
    f.covered_ns += hi - lo;
    ++f.samples;
    f.busy_ns += std::clamp(it->gpu_busy, 0.0, 1.0) * overlap;
    f.sm_active_ns += std::clamp(std::max(it->sm_active, 0.0), 0.0, 1.0) * overlap;
    if (it->tensor_active >= 0) {
      f.tensor_ns += std::min(it->tensor_active, 1.0) * overlap;
      f.tensor_covered_ns += hi - lo;
    }
    if (it->dram_throughput >= 0) {
      f.dram_ns += std::min(it->dram_throughput, 1.0) * overlap;
      f.dram_covered_ns += hi - lo;
    }
  }
  return f;
}

/// Where the samples' clock stands against the GPU's: the result of a known burst of GPU work.
struct clock_alignment {
  bool ok = false;
  std::int64_t offset_ns = 0;  ///< add to a sample's times to put it on the GPU's clock
  double busy_ms = 0;          ///< busy time the samples saw around the burst
  double burst_ms = 0;         ///< the burst's own length (GPU clock)
  std::string why;             ///< when not ok
};

/// Aligns the samples' clock with the GPU's from one burst of work that ran alone on the GPU from
/// `burst_begin_ns` to `burst_end_ns` (GPU clock) while the samples were taken. The busy time the
/// samples saw has a centre of mass; the burst's is its midpoint; the offset is their difference.
/// Whatever clock CUPTI stamps samples with (the GPU's, its own, or the activity API's timestamp
/// callback), the offset is then measured, not assumed. Not ok when the samples saw much more or
/// much less busy time than the burst (other work on the GPU, or counters that did not see it).
inline clock_alignment align_clocks(const std::vector<pm_sample>& samples, std::int64_t burst_begin_ns,
                                    std::int64_t burst_end_ns) {
  clock_alignment a;
  a.burst_ms = static_cast<double>(burst_end_ns - burst_begin_ns) / 1e6;
  // The burst is the run of consecutive busy samples that holds the most busy time: work that ran
  // before or after it (samples of it still in the pipeline, another process) is a run of its own,
  // and faint activity (a sample under 5% busy: a stamp, an edge) ends a run and moves the centre by
  // under a microsecond. Within the run, the busy time's centre of mass.
  double best = 0, best_moment = 0, busy = 0, moment = 0;
  for (std::size_t i = 0; i <= samples.size(); ++i) {
    const bool in_run = i < samples.size() && samples[i].gpu_busy >= 0.05 && samples[i].end_ns > samples[i].begin_ns;
    if (in_run) {
      const auto& s = samples[i];
      const double len = static_cast<double>(s.end_ns - s.begin_ns), b = std::min(s.gpu_busy, 1.0) * len;
      busy += b;
      moment += b * (static_cast<double>(s.begin_ns) + len / 2);
      continue;
    }
    if (busy > best) {
      best = busy;
      best_moment = moment;
    }
    busy = moment = 0;
  }
  a.busy_ms = best / 1e6;
  if (burst_end_ns <= burst_begin_ns) {
    a.why = "the calibration burst did not run";
    return a;
  }
  if (best <= 0) {
    a.why = "the samples saw no GPU activity during a " + std::to_string(a.burst_ms) + " ms calibration burst";
    return a;
  }
  // The partial samples at the burst's edges make the sum differ from the burst by up to two
  // intervals; beyond a quarter, something else ran with it, or the counters do not see such work.
  if (std::abs(a.busy_ms - a.burst_ms) > 0.25 * a.burst_ms) {
    a.why = "the samples saw " + std::to_string(a.busy_ms) + " ms of GPU activity during a " +
            std::to_string(a.burst_ms) + " ms calibration burst (other work on the GPU?)";
    return a;
  }
  const double centre = best_moment / best,
               midpoint = (static_cast<double>(burst_begin_ns) + static_cast<double>(burst_end_ns)) / 2;
  a.offset_ns = static_cast<std::int64_t>(std::llround(midpoint - centre));
  a.ok = true;
  return a;
}

/// The same samples on another clock: `offset_ns` added to every time.
inline void shift_samples(std::vector<pm_sample>& samples, std::int64_t offset_ns) noexcept {
  for (auto& s : samples) {
    s.begin_ns += offset_ns;
    s.end_ns += offset_ns;
  }
}

/// Whether `samples` (sorted, non-overlapping) cover [begin_ns, end_ns) without a hole longer than
/// `max_hole_ns`: the first overlapping one begins by begin_ns + max_hole_ns, the last ends by
/// end_ns - max_hole_ns, and each begins within max_hole_ns of the previous one's end. A window in a
/// gap between the decoding budget's windows (pm_decode_budget.hpp), or across its edge, is not.
inline bool samples_cover(const std::vector<pm_sample>& samples, std::int64_t begin_ns, std::int64_t end_ns,
                          std::int64_t max_hole_ns) {
  if (end_ns <= begin_ns) return false;
  auto it = first_overlapping(samples, begin_ns);
  std::int64_t reached = begin_ns;  // covered up to here
  for (; it != samples.end() && it->begin_ns < end_ns; ++it) {
    if (it->end_ns <= reached) continue;
    if (it->begin_ns - reached > max_hole_ns) return false;
    reached = it->end_ns;
  }
  return end_ns - reached <= max_hole_ns;
}

/// How far the samples reach: the end of the last one (0 when none).
inline std::int64_t samples_reach_ns(const std::vector<pm_sample>& samples) noexcept {
  return samples.empty() ? 0 : samples.back().end_ns;
}

TRACEML_END_NAMESPACE
