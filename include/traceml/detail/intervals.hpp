// traceml: the one interval-union helper. Phase windows, GPU busy time and the residual all ask
// "how much of [lo, hi) do these intervals cover?"; they all ask it here.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

using interval = std::pair<std::int64_t, std::int64_t>;  ///< [begin, end) in ns

/// Sorted, disjoint, non-empty intervals covering exactly what `iv` covers.
inline std::vector<interval> merge_intervals(std::vector<interval> iv) {
  std::sort(iv.begin(), iv.end());
  std::vector<interval> out;
  for (const auto& p : iv) {
    if (p.second <= p.first) continue;
    if (out.empty() || p.first > out.back().second)
      out.push_back(p);
    else
      out.back().second = std::max(out.back().second, p.second);
  }
  return out;
}

/// Length of [lo, hi) covered by a merged interval list (merge_intervals). O(log n + overlaps).
inline std::int64_t covered_in(const std::vector<interval>& merged, std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return 0;
  auto it = std::upper_bound(merged.begin(), merged.end(), interval{lo, std::numeric_limits<std::int64_t>::max()});
  if (it != merged.begin()) --it;
  std::int64_t covered = 0;
  for (; it != merged.end() && it->first < hi; ++it) {
    const std::int64_t b = std::max(lo, it->first), e = std::min(hi, it->second);
    if (e > b) covered += e - b;
  }
  return covered;
}

/// Length of the union of `iv`, each interval clipped to [lo, hi) (whole union by default).
inline std::int64_t union_length(std::vector<interval> iv, std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                                 std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
  for (auto& p : iv) {
    p.first = std::max(p.first, lo);
    p.second = std::min(p.second, hi);
  }
  std::int64_t total = 0;
  for (const auto& p : merge_intervals(std::move(iv))) total += p.second - p.first;
  return total;
}

/// How busy [lo, hi) reads to a sampler that averages `merged` over back-to-back samples of length
/// `interval` and weighs each by its overlap with [lo, hi) (pm_samples.hpp): busy time just outside
/// the window leaks in through the samples that straddle its edges, and short gaps inside blur. The
/// grid's phase is not known, so this is the mean over `phases` evenly spaced ones. Returns busy ns
/// (at most hi - lo).
inline double sampled_busy_ns(const std::vector<interval>& merged, std::int64_t lo, std::int64_t hi,
                              std::int64_t interval, int phases = 16) {
  if (hi <= lo || interval <= 0 || phases <= 0) return 0;
  double total = 0;
  for (int k = 0; k < phases; ++k) {
    for (std::int64_t s = lo - interval + (interval * k) / phases + 1; s < hi; s += interval) {
      const std::int64_t overlap = std::min(hi, s + interval) - std::max(lo, s);
      if (overlap <= 0) continue;
      total += static_cast<double>(overlap) * static_cast<double>(covered_in(merged, s, s + interval)) /
               static_cast<double>(interval);
    }
  }
  return std::min(total / phases, static_cast<double>(hi - lo));
}

}  // namespace detail
TRACEML_END_NAMESPACE
