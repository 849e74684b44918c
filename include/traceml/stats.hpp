// traceml: descriptive statistics over steps. Pure functions, no state.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// Summary of a sample (per-step values, usually milliseconds).
struct summary_stats {
  std::size_t count = 0;
  double median = 0, mean = 0, min = 0, max = 0;
  double p10 = 0, p90 = 0;
  double stddev = 0;  ///< sample standard deviation (n - 1 in the denominator); 0 for n < 2
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

/// Warm-up steps actually excluded from a run of `steps` steps: the requested number, but never
/// more than half the run, so short runs still have measured steps.
constexpr std::size_t effective_warmup(std::size_t requested, std::size_t steps) noexcept {
  return requested < steps / 2 ? requested : steps / 2;
}

TRACEML_END_NAMESPACE
