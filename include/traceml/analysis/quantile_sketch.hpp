// traceml: quantiles of an unbounded stream in bounded memory, with a stated relative error.
//
// A DDSketch (Masson, Rim and Lee, "DDSketch: a fast and fully-mergeable quantile sketch with
// relative-error guarantees", VLDB 2019): values fall into logarithmic buckets whose bounds grow by
// gamma = (1 + a) / (1 - a), so the bucket's representative value is within a relative error `a` of
// every value in it, and a quantile read from the buckets is within `a` of the true one. Memory grows
// with log(max / min), not with the number of values: step times from 1 us to 1000 s at a = 0.5% need
// at most ~2,100 buckets. Two sketches with the same `a` merge exactly (bucket counts add up).
//
//   traceml::quantile_sketch s(0.005);
//   for (double v : values) s.add(v);
//   double p90 = s.quantile(0.9);     // within 0.5% of the exact p90 (same rank rule as summarize())
#pragma once
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

class quantile_sketch {
 public:
  /// `relative_error` in (0, 1): the bound on |estimate - exact| / exact of every quantile.
  explicit quantile_sketch(double relative_error = 0.005) noexcept
      : error_(relative_error > 0 && relative_error < 1 ? relative_error : 0.005),
        log_gamma_(std::log((1 + error_) / (1 - error_))) {}

  /// Adds `v` `n` times. Values whose magnitude is below 1e-9 count as zero. Cost: one log().
  void add(double v, std::uint64_t n = 1) {
    if (n == 0 || std::isnan(v)) return;
    count_ += n;
    if (std::fabs(v) < min_magnitude)
      zeros_ += n;
    else
      (v > 0 ? positive_ : negative_).add(index(std::fabs(v)), n);
  }

  /// Adds every value of `o` (same relative error required; otherwise false and nothing changes).
  bool merge(const quantile_sketch& o) {
    if (o.error_ != error_) return false;
    count_ += o.count_;
    zeros_ += o.zeros_;
    positive_.merge(o.positive_);
    negative_.merge(o.negative_);
    return true;
  }

  std::uint64_t count() const noexcept { return count_; }
  double relative_error() const noexcept { return error_; }
  /// Buckets in use (what the memory grows with).
  std::size_t buckets() const noexcept { return positive_.counts.size() + negative_.counts.size(); }

  /// The q-quantile (0..1) under the rule of stats.hpp's quantile_sorted: linear interpolation
  /// between the values at the two closest ranks, each estimated within the relative error.
  double quantile(double q) const {
    if (count_ == 0) return 0;
    q = q < 0 ? 0 : q > 1 ? 1 : q;
    const double pos = q * static_cast<double>(count_ - 1);
    const auto lo = static_cast<std::uint64_t>(std::floor(pos));
    const std::uint64_t hi = lo + 1 < count_ ? lo + 1 : lo;
    const double a = value_at_rank(lo), b = value_at_rank(hi);
    return a + (pos - static_cast<double>(lo)) * (b - a);
  }

 private:
  static constexpr double min_magnitude = 1e-9;

  /// Bucket counts for consecutive indices starting at `first`, grown at either end as needed.
  struct store {
    std::int32_t first = 0;
    std::deque<std::uint64_t> counts;

    void add(std::int32_t i, std::uint64_t n) {
      if (counts.empty()) first = i;
      while (i < first) {
        counts.push_front(0);
        --first;
      }
      while (i >= first + static_cast<std::int32_t>(counts.size())) counts.push_back(0);
      counts[static_cast<std::size_t>(i - first)] += n;
    }
    void merge(const store& o) {
      for (std::size_t k = 0; k < o.counts.size(); ++k)
        if (o.counts[k]) add(o.first + static_cast<std::int32_t>(k), o.counts[k]);
    }
    std::uint64_t total() const {
      std::uint64_t t = 0;
      for (auto c : counts) t += c;
      return t;
    }
  };

  std::int32_t index(double magnitude) const noexcept {
    return static_cast<std::int32_t>(std::ceil(std::log(magnitude) / log_gamma_));
  }
  /// The representative of bucket i: within the relative error of every value in (gamma^(i-1), gamma^i].
  double value(std::int32_t i) const noexcept {
    const double gamma = std::exp(log_gamma_);
    return 2.0 * std::exp(log_gamma_ * i) / (gamma + 1.0);
  }

  /// The value at 0-based rank r in ascending order: negatives (largest magnitude first), zeros, positives.
  double value_at_rank(std::uint64_t r) const {
    const std::uint64_t neg = negative_.total();
    if (r < neg) {
      std::uint64_t seen = 0;
      for (std::size_t k = negative_.counts.size(); k-- > 0;) {
        seen += negative_.counts[k];
        if (seen > r) return -value(negative_.first + static_cast<std::int32_t>(k));
      }
    }
    r -= neg;
    if (r < zeros_) return 0;
    r -= zeros_;
    std::uint64_t seen = 0;
    for (std::size_t k = 0; k < positive_.counts.size(); ++k) {
      seen += positive_.counts[k];
      if (seen > r) return value(positive_.first + static_cast<std::int32_t>(k));
    }
    return positive_.counts.empty() ? 0
                                    : value(positive_.first + static_cast<std::int32_t>(positive_.counts.size()) - 1);
  }

  double error_;
  double log_gamma_;
  std::uint64_t count_ = 0;
  std::uint64_t zeros_ = 0;
  store positive_, negative_;
};

TRACEML_END_NAMESPACE
