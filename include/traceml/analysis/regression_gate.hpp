// traceml: is a new run slower than a base run, beyond a tolerance and beyond the runs' noise?
// (pure functions of two run summaries; `traceml compare --fail-if-slower` words and exits on it).
//
// Why both conditions: a CI job that fails whenever the median moved by more than PCT fails on a noisy
// machine for nothing, and one that fails whenever the difference is significant fails on a 0.1%
// change that nobody cares about. Slower means: the median step grew by more than `tolerance` of the
// base's, and the growth is more than `z` standard errors of the difference of the two medians.
//
// The standard error comes from each run's spread and step count. The spread is the robust one,
// (p90 - p10) / 2.563 (the standard deviation where steps are normal, and not inflated by a few
// outliers, a checkpoint or a first step), and a median's standard error is 1.2533 sigma / sqrt(n).
#pragma once
#include <cmath>
#include <cstddef>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

enum class gate_outcome { faster, slower, within_noise, within_tolerance, no_steps };

inline const char* to_string(gate_outcome g) noexcept {
  switch (g) {
    case gate_outcome::faster: return "faster";
    case gate_outcome::slower: return "slower";
    case gate_outcome::within_noise: return "within noise";
    case gate_outcome::within_tolerance: return "within tolerance";
    case gate_outcome::no_steps: return "no steps";
  }
  return "unknown";
}

struct gate_result {
  gate_outcome outcome = gate_outcome::no_steps;
  double base_median_ms = 0, new_median_ms = 0;
  std::size_t base_steps = 0, new_steps = 0;
  double change = 0;     ///< new median / base median - 1
  double noise = 0;      ///< z standard errors of the medians' difference, as a share of the base median
  double tolerance = 0;  ///< the share asked for
};

namespace detail {
/// A run's step-time spread, robust to a few outliers: (p90 - p10) / 2.563.
inline double robust_sigma(const summary_stats& s) { return s.p90 > s.p10 ? (s.p90 - s.p10) / 2.563 : 0.0; }
}  // namespace detail

/// `tolerance` as a share (0.05: 5%); `z` standard errors make a difference more than noise (1.96: a
/// 95% two-sided interval for the difference of the medians where the steps are normal).
inline gate_result regression_gate(const run_summary& base, const run_summary& next, double tolerance,
                                   double z = 1.96) {
  gate_result r;
  r.tolerance = tolerance;
  r.base_steps = base.step_ms.count;
  r.new_steps = next.step_ms.count;
  r.base_median_ms = base.step_ms.median;
  r.new_median_ms = next.step_ms.median;
  if (r.base_steps == 0 || r.new_steps == 0 || r.base_median_ms <= 0) return r;
  r.change = r.new_median_ms / r.base_median_ms - 1.0;
  const double sb = detail::robust_sigma(base.step_ms), sn = detail::robust_sigma(next.step_ms);
  const double se =
      1.2533 * std::sqrt(sb * sb / static_cast<double>(r.base_steps) + sn * sn / static_cast<double>(r.new_steps));
  r.noise = z * se / r.base_median_ms;
  const double diff = std::abs(r.change);
  if (diff <= r.noise)
    r.outcome = gate_outcome::within_noise;
  else if (r.change < 0)
    r.outcome = gate_outcome::faster;
  else if (r.change > tolerance)
    r.outcome = gate_outcome::slower;
  else
    r.outcome = gate_outcome::within_tolerance;
  return r;
}

TRACEML_END_NAMESPACE
