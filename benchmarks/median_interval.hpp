// A distribution-free confidence interval for a median, the benchmarks' way of saying how sure a
// ratio of paired rounds is (qwen3_overhead, pm_sampling_probe).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace traceml_bench {

struct interval {
  double lo = 0, hi = 0, coverage = 0;
};

/// The k-th smallest and k-th largest of n values, k the largest index whose two-sided coverage
/// stays >= 95% (else k = 1, the range). Returns {lo, hi, coverage}.
inline interval median_interval(std::vector<double> v) {
  interval ci;
  const std::size_t n = v.size();
  if (n == 0) return ci;
  std::sort(v.begin(), v.end());
  // P(Binomial(n, 1/2) <= j), accumulated.
  std::vector<double> cdf(n + 1);
  double p = std::pow(0.5, static_cast<double>(n)), acc = 0;
  for (std::size_t j = 0; j <= n; ++j) {
    acc += p;
    cdf[j] = acc;
    p = p * static_cast<double>(n - j) / static_cast<double>(j + 1);
  }
  std::size_t k = 1;                                         // 1-based order statistic
  while (k + 1 <= n / 2 && 1.0 - 2.0 * cdf[k] >= 0.95) ++k;  // coverage of [x_(k+1), x_(n-k)]
  ci.lo = v[k - 1];
  ci.hi = v[n - k];
  ci.coverage = 1.0 - 2.0 * cdf[k - 1];
  return ci;
}

}  // namespace traceml_bench
