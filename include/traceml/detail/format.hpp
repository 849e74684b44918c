// traceml: numbers as text, the same way everywhere: the one locale-proof number formatter and the
// helpers built on it (counts, shares, signed percentages, padded columns). No words and no figures
// here: the analysis tier (analysis/) formats numbers it quotes with these, the sinks add the words.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// `v` with `decimals` digits after a '.', whatever the C locale's decimal separator; no "-0.0".
/// Non-finite values give "-" (the HTML report shows an en dash instead).
inline std::string fixed_text(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s(buf);
  bool nonzero = false;
  for (char& c : s) {
    if (c >= '1' && c <= '9')
      nonzero = true;
    else if (c != '-' && c != '0')
      c = '.';
  }
  if (!nonzero && !s.empty() && s[0] == '-') s.erase(0, 1);
  return s;
}

/// A time in milliseconds as the tables print it: with `decimals` digits, or below 1 ms in
/// microseconds with the unit ("40.0us"), so that a short phase or step does not read "0.0". Zero
/// stays in milliseconds; non-finite values give "-".
inline std::string ms_text(double ms, int decimals) {
  if (std::isfinite(ms) && ms != 0 && std::fabs(ms) < 1) return fixed_text(ms * 1000, 1) + "us";
  return fixed_text(ms, decimals);
}

/// A count, or a count per step or per micro-batch: an integer prints as one ("720", never
/// "720.0"); a mean that is not whole keeps `decimals` digits ("2.5"), so it is not passed off as
/// exact. Non-finite values give "-".
inline std::string count_text(double v, int decimals = 1) {
  if (!std::isfinite(v)) return "-";
  const double whole = std::round(v);
  if (std::fabs(v - whole) <= 1e-9 * std::max(1.0, std::fabs(v))) return fixed_text(whole, 0);
  return fixed_text(v, decimals);
}

/// A share as a percentage with `decimals` digits and no sign: "51.6". Kept within [0, 100], so that
/// a share a sampled window rounded a hair past its whole never reads as more than all of it; "-"
/// for a negative share, the summary's "not measured" (a counter this GPU does not sample).
inline std::string share_percent_text(double share, int decimals = 1) {
  if (!(share >= 0)) return "-";
  return fixed_text(std::min(share, 1.0) * 100, decimals);
}

/// A fraction as a signed percentage: "+45.8%", "-3.0%".
inline std::string signed_percent(double fraction) {
  return (fraction >= 0 ? "+" : "") + fixed_text(fraction * 100, 1) + "%";
}

/// `s` padded with spaces to `width` columns: on the left (right-aligned, for numbers) unless `left`.
inline std::string pad(std::string s, std::size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

}  // namespace detail
TRACEML_END_NAMESPACE
