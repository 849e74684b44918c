// traceml: the words of the regression gate (analysis/regression_gate.hpp): one line per new run,
// its outcome first (what a CI log is searched for), then the figures it rests on: both medians, the
// change, the noise band and the steps it comes from, and the tolerance where it decided.
//
//   slower: new.json: median step 110.00 ms against 100.00 ms in base.json (+10.0%), beyond the 5%
//     tolerance and beyond the noise of the medians (+-0.7%, from 100 and 100 measured steps)
//
// "The noise of the medians" is the gate's band (1.96 standard errors of the medians' difference),
// which narrows as steps are added; the comparison's explanation speaks of the runs' noise, whether
// single steps' p10..p90 ranges overlap. Both are named, so that a reader does not take one for the
// other. `traceml compare --fail-if-slower` prints the line; the exit status follows the outcome.
#pragma once
#include <string>

#include "traceml/analysis/regression_gate.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/format.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
/// "5%" or "2.5%": a tolerance as it was given, without trailing zeros.
inline std::string gate_pct(double share) {
  std::string t = fixed_text(share * 100, 2);
  while (t.find('.') != std::string::npos && (t.back() == '0' || t.back() == '.')) {
    const bool dot = t.back() == '.';
    t.pop_back();
    if (dot) break;
  }
  return t + "%";
}
}  // namespace detail

/// One line (with its newline): the gate's outcome for the run of `next_file` against `base_file`.
inline std::string gate_line(const gate_result& g, const std::string& base_file, const std::string& next_file) {
  using detail::fixed_text;
  if (g.outcome == gate_outcome::no_steps)
    return std::string(to_string(g.outcome)) + ": " + next_file + " against " + base_file + ": " +
           (g.base_steps == 0 || g.base_median_ms <= 0 ? base_file : next_file) +
           " has no measured steps, so there is nothing to compare\n";
  const std::string change = (g.change >= 0 ? "+" : "") + fixed_text(g.change * 100, 1) + "%";
  const std::string noise = "the noise of the medians (+-" + fixed_text(g.noise * 100, 1) + "%, from " +
                            std::to_string(g.base_steps) + " and " + std::to_string(g.new_steps) + " measured steps)";
  std::string out = std::string(to_string(g.outcome)) + ": " + next_file + ": median step " +
                    fixed_text(g.new_median_ms, 2) + " ms against " + fixed_text(g.base_median_ms, 2) + " ms in " +
                    base_file + " (" + change + "), ";
  switch (g.outcome) {
    case gate_outcome::slower:
      out += "beyond the " + detail::gate_pct(g.tolerance) + " tolerance and beyond " + noise;
      break;
    case gate_outcome::faster: out += "beyond " + noise; break;
    case gate_outcome::within_noise: out += "inside " + noise; break;
    case gate_outcome::within_tolerance:
      out += "beyond " + noise + " but within the " + detail::gate_pct(g.tolerance) + " tolerance";
      break;
    case gate_outcome::no_steps: break;
  }
  return out + "\n";
}

TRACEML_END_NAMESPACE
