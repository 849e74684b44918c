// traceml: hardware-counter samples (CUPTI PM sampling) and what they say about a window of GPU
// time -- a phase of one micro-batch, or a whole step. Plain data and pure functions, no CUDA: the
// mapping is tested on the CPU with synthetic samples (tests/core/test_pm_samples.cpp).
//
// A sample covers an interval of the GPU's clock ([begin_ns, end_ns), typically 20 us) and carries
// shares of that interval: the graphics/compute engine busy (any work at all), the SMs active
// (averaged over SMs: a small grid keeps a few busy and the rest idle), the tensor pipes active and
// DRAM throughput against its peak. A window's figure is the overlap-weighted mean of the samples
// that cover it: a sample half inside the window counts half. The figures are kept as
// nanosecond-weighted sums (`counter_facts`), so that phases and steps add up exactly and a share
// is always a sum divided by the time it was measured over: never above 100%.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// One decoded PM sample. Shares are in [0, 1]; a negative share: that counter was not sampled.
struct pm_sample {
  std::int64_t begin_ns = 0;      ///< on the GPU's clock (%globaltimer, ns)
  std::int64_t end_ns = 0;
  double gpu_busy = -1;           ///< graphics/compute engine active cycles / elapsed cycles
  double sm_active = -1;          ///< SM active cycles averaged over SMs / elapsed cycles
  double tensor_active = -1;      ///< tensor pipes active (average over SMs), share of peak
  double dram_throughput = -1;    ///< DRAM throughput, share of peak
};

/// What the samples say about one window. Times in ns; `*_ns` are share x overlap sums, so that
/// busy_ns / covered_ns is the window's busy share.
struct counter_facts {
  std::int64_t covered_ns = 0;    ///< window time covered by samples (0: the window was not sampled)
  std::uint32_t samples = 0;      ///< samples that overlap the window
  double busy_ns = 0;
  double sm_active_ns = 0;
  double tensor_ns = 0;           ///< tensor_covered_ns: part of covered_ns with a tensor counter
  double dram_ns = 0;
  std::int64_t tensor_covered_ns = 0;
  std::int64_t dram_covered_ns = 0;

  bool measured() const noexcept { return covered_ns > 0; }
  counter_facts& operator+=(const counter_facts& o) noexcept {
    covered_ns += o.covered_ns; samples += o.samples;
    busy_ns += o.busy_ns; sm_active_ns += o.sm_active_ns;
    tensor_ns += o.tensor_ns; dram_ns += o.dram_ns;
    tensor_covered_ns += o.tensor_covered_ns; dram_covered_ns += o.dram_covered_ns;
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

/// The facts of [begin_ns, end_ns) from `samples` sorted by begin_ns (non-overlapping, as the
/// hardware produces them). Samples with no gpu_busy value are skipped.
inline counter_facts measure_window(const std::vector<pm_sample>& samples, std::int64_t begin_ns,
                                    std::int64_t end_ns) {
  counter_facts f;
  if (end_ns <= begin_ns || samples.empty()) return f;
  // The first sample that may overlap: the last one beginning at or before begin_ns.
  auto it = std::upper_bound(samples.begin(), samples.end(), begin_ns,
                             [](std::int64_t t, const pm_sample& s) { return t < s.begin_ns; });
  if (it != samples.begin()) --it;
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

/// How far the samples reach: the end of the last one (0 when none).
inline std::int64_t samples_reach_ns(const std::vector<pm_sample>& samples) noexcept {
  return samples.empty() ? 0 : samples.back().end_ns;
}

TRACEML_END_NAMESPACE
