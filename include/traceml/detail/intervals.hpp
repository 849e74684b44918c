// traceml: the one interval-union helper. Phase windows, GPU busy time and the residual all ask
// "how much of [lo, hi) do these intervals cover?"; they all ask it here.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

using interval = std::pair<std::int64_t, std::int64_t>;  ///< [begin, end) in ns

/// Sorts `iv`. Records come as a few runs already in time order (a stream's records, then the
/// markers, then the previous round's tail): those runs are merged, O(n log runs), and only real
/// disorder pays a full sort.
inline void sort_intervals(std::vector<interval>& iv) {
  constexpr std::size_t most_runs = 16;
  std::vector<std::size_t> starts{0};  // where each run begins
  for (std::size_t i = 1; i < iv.size() && starts.size() <= most_runs; ++i)
    if (iv[i] < iv[i - 1]) starts.push_back(i);
  if (starts.size() > most_runs) {
    std::sort(iv.begin(), iv.end());
    return;
  }
  starts.push_back(iv.size());
  while (starts.size() > 2) {  // merge neighbouring runs pairwise until one is left
    std::vector<std::size_t> merged{0};
    for (std::size_t r = 0; r + 2 < starts.size(); r += 2) {
      std::inplace_merge(iv.begin() + static_cast<std::ptrdiff_t>(starts[r]),
                         iv.begin() + static_cast<std::ptrdiff_t>(starts[r + 1]),
                         iv.begin() + static_cast<std::ptrdiff_t>(starts[r + 2]));
      merged.push_back(starts[r + 2]);
    }
    if (merged.back() != iv.size()) merged.push_back(iv.size());
    starts.swap(merged);
  }
}

/// Sorted, disjoint, non-empty intervals covering exactly what `iv` covers.
inline std::vector<interval> merge_intervals(std::vector<interval> iv) {
  sort_intervals(iv);
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

/// A merged interval list (merge_intervals) with the running sum of its lengths: how much of any
/// [lo, hi) it covers in O(log n) whatever the overlaps, where covered_in() walks them. For the
/// many queries of one list (sampled_busy_ns: every sample of every window of a step).
class coverage {
 public:
  explicit coverage(const std::vector<interval>& merged) : iv_(merged), before_(merged.size() + 1, 0) {
    for (std::size_t i = 0; i < iv_.size(); ++i) before_[i + 1] = before_[i] + (iv_[i].second - iv_[i].first);
  }
  /// Length of [lo, hi) covered (0 when hi <= lo): the same as covered_in(merged, lo, hi).
  std::int64_t in(std::int64_t lo, std::int64_t hi) const noexcept { return hi <= lo ? 0 : up_to(hi) - up_to(lo); }

  /// Length covered before t.
  std::int64_t up_to(std::int64_t t) const noexcept {
    // The intervals that begin before t: all of them count whole but the last, which may end after t.
    const auto n = static_cast<std::size_t>(
        std::partition_point(iv_.begin(), iv_.end(), [t](const interval& p) { return p.first < t; }) - iv_.begin());
    if (n == 0) return 0;
    return before_[n - 1] + (std::min(t, iv_[n - 1].second) - iv_[n - 1].first);
  }

 private:
  const std::vector<interval>& iv_;   // the caller's, which outlives this
  std::vector<std::int64_t> before_;  // before_[i]: the length of the first i intervals
};

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
inline double sampled_busy_ns(const coverage& merged, std::int64_t lo, std::int64_t hi, std::int64_t interval,
                              int phases = 16) {
  if (hi <= lo || interval <= 0 || phases <= 0) return 0;
  double total = 0;
  for (int k = 0; k < phases; ++k) {
    std::int64_t s = lo - interval + (interval * k) / phases + 1;
    std::int64_t before_s = merged.up_to(s);  // each sample's end is the next one's start
    for (; s < hi; s += interval) {
      const std::int64_t before_end = merged.up_to(s + interval);
      const std::int64_t overlap = std::min(hi, s + interval) - std::max(lo, s);
      if (overlap > 0)
        total +=
            static_cast<double>(overlap) * static_cast<double>(before_end - before_s) / static_cast<double>(interval);
      before_s = before_end;
    }
  }
  return std::min(total / phases, static_cast<double>(hi - lo));
}
inline double sampled_busy_ns(const std::vector<interval>& merged, std::int64_t lo, std::int64_t hi,
                              std::int64_t interval, int phases = 16) {
  return sampled_busy_ns(coverage(merged), lo, hi, interval, phases);
}

}  // namespace detail
TRACEML_END_NAMESPACE
