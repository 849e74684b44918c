// qwen3/cli_checks.hpp: command-line values checked as text, before CLI11 converts them, so that a
// refusal says the accepted range in words and a conversion never bends a value into range
// ("-1" into an unsigned, "abc" answered with a 300-digit interval, "64.7" truncated).
//
//   app.add_option("--warmup", o.warmup, "...")->check(qwen3::whole_number(0, 1000000000));
//   // qwen3_accumulation --warmup -1
//   // --warmup: expected a whole number from 0 to 1000000000, got '-1'
//
// The option's name comes first in CLI11's message; the program then exits with status 2.
#pragma once
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "schedule.hpp"

namespace qwen3 {

/// A whole number in [lo, hi] written in decimal digits only (no sign, no fraction, no exponent).
inline CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi) {
  const std::string range = "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const std::string refusal = "expected " + range + ", got '" + text + "'";
        if (text.empty() || text.size() > 20) return refusal;
        std::uint64_t v = 0;
        for (const char c : text) {
          if (c < '0' || c > '9') return refusal;
          const auto digit = static_cast<std::uint64_t>(c - '0');
          if (v > (UINT64_MAX - digit) / 10) return refusal;
          v = v * 10 + digit;
        }
        return v < lo || v > hi ? refusal : std::string();
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

/// A finite decimal number in [lo, hi] (in (lo, hi] when `above_lo`), described by `words`.
inline CLI::Validator number_in(double lo, double hi, const std::string& words, bool above_lo = false) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const std::string refusal = "expected " + words + ", got '" + text + "'";
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) return refusal;
        return v < lo || v > hi || (above_lo && v == lo) ? refusal : std::string();
      },
      words);
}

/// A schedule list as parse_schedules() reads it ("1x4,2x2,4x1"), its own message on refusal.
inline CLI::Validator schedule_list() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          (void)parse_schedules(text);
          return {};
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      "MxA[,MxA...]");
}

}  // namespace qwen3
