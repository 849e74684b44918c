// traceml: descriptive statistics over steps: summarize() for a sample in memory, running_stats for
// a stream of any length in bounded memory (exact while short, a quantile sketch beyond).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "traceml/analysis/quantile_sketch.hpp"
#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// Summary of a sample (per-step values, usually milliseconds).
struct summary_stats {
  std::size_t count = 0;
  double median = 0, mean = 0, min = 0, max = 0;
  double p10 = 0, p90 = 0;
  double stddev = 0;  ///< sample standard deviation (n - 1 in the denominator); 0 for n < 2
  /// How median, p10 and p90 were computed: 0 = exactly, from every value; otherwise from a quantile
  /// sketch whose estimates are within this relative error. Count, mean, min, max and stddev are exact.
  double quantile_error = 0;
};

/// The q-quantile (0..1) of an ascending sample, interpolating linearly between closest ranks
/// (the same rule as numpy.percentile's default). Requires a non-empty sample.
inline double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

/// Median, mean, extremes, p10/p90 and sample standard deviation of `values`.
inline summary_stats summarize(std::vector<double> values) {
  summary_stats s;
  s.count = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  s.min = values.front();
  s.max = values.back();
  s.median = quantile_sorted(values, 0.5);
  s.p10 = quantile_sorted(values, 0.1);
  s.p90 = quantile_sorted(values, 0.9);
  if (values.size() > 1) {
    double ss = 0;
    for (double v : values) ss += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(ss / static_cast<double>(values.size() - 1));
  }
  return s;
}

/// Runs up to this many values keep every value (exact quantiles); longer ones use the sketch.
inline constexpr std::size_t exact_quantile_limit = 10000;
/// The sketch's relative error on quantiles beyond exact_quantile_limit values.
inline constexpr double sketch_relative_error = 0.005;

/// summarize() for a stream: count, mean, variance (Welford), min and max exactly; quantiles exact
/// while at most `exact_limit` values came in, then from a quantile_sketch (memory no longer grows).
/// Cost per add: a few floating-point operations and one log().
class running_stats {
 public:
  explicit running_stats(std::size_t exact_limit = exact_quantile_limit, double relative_error = sketch_relative_error)
      : limit_(exact_limit), sketch_(relative_error) {}

  /// Adds `v` `n` times (n > 1: e.g. the zeros of steps on which a phase was absent).
  void add(double v, std::uint64_t n = 1) {
    if (n == 0) return;
    // Welford's update, for n equal values at once (Chan et al.'s pairwise form).
    const double before = static_cast<double>(count_), added = static_cast<double>(n);
    count_ += n;
    const double d = v - mean_;
    mean_ += d * added / static_cast<double>(count_);
    m2_ += d * d * before * added / static_cast<double>(count_);
    if (exact_)
      for (std::uint64_t k = 0; k < n && values_.size() <= limit_; ++k) values_.push_back(v);
    min_ = std::min(min_, v);
    max_ = std::max(max_, v);
    sketch_.add(v, n);
    if (exact_ && count_ > limit_) {
      exact_ = false;
      values_.clear();
      values_.shrink_to_fit();
    }
  }

  std::uint64_t count() const noexcept { return count_; }
  double mean() const noexcept { return mean_; }
  bool exact() const noexcept { return exact_; }

  summary_stats summary() const {
    if (exact_) return summarize(values_);
    summary_stats s;
    s.count = static_cast<std::size_t>(count_);
    s.mean = mean_;
    s.min = min_;
    s.max = max_;
    s.stddev = count_ > 1 ? std::sqrt(m2_ / static_cast<double>(count_ - 1)) : 0;
    // Sketch estimates are clamped to the exact extremes they can only approach.
    const auto q = [&](double p) { return std::clamp(sketch_.quantile(p), min_, max_); };
    s.median = q(0.5);
    s.p10 = q(0.1);
    s.p90 = q(0.9);
    s.quantile_error = sketch_.relative_error();
    return s;
  }

 private:
  std::size_t limit_;
  std::uint64_t count_ = 0;
  double mean_ = 0, m2_ = 0;
  double min_ = std::numeric_limits<double>::infinity(), max_ = -std::numeric_limits<double>::infinity();
  bool exact_ = true;
  std::vector<double> values_;
  quantile_sketch sketch_;
};

/// Warm-up steps actually excluded from a run of `steps` steps: the requested number, but never
/// more than half the run, so short runs still have measured steps.
constexpr std::size_t effective_warmup(std::size_t requested, std::size_t steps) noexcept {
  return requested < steps / 2 ? requested : steps / 2;
}

TRACEML_END_NAMESPACE
