// qwen3/schedule.hpp: gradient-accumulation schedules, "MxA" = micro-batch M, accumulation A.
//
//   auto list = qwen3::parse_schedules("1x4,2x2,4x1");   // one effective batch (4), each schedule once
//   list[0].micro_batch == 1; list[0].accumulation == 4; list[0].name() == "1x4"
//
// No LibTorch here: the experiment's command line can use it before anything heavy is loaded.
// Limits: M and A are each at most 9 digits, and M x A at most max_examples_per_step; products
// with the sequence length are formed by tokens_per_step(), overflow-checked.
#pragma once
#include <cctype>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "checked.hpp"

namespace qwen3 {

/// The largest effective batch M x A accepted: 2^20 = 1,048,576 examples per optimizer step, far
/// beyond the batches this experiment compares (a few to a few thousand), so anything above is a
/// typing error; the bound also leaves M x A x seq_len inside 64 bits for any real sequence length.
inline constexpr std::int64_t max_examples_per_step = std::int64_t{1} << 20;

struct schedule {
  std::int64_t micro_batch = 1;   ///< examples per forward/backward
  std::int64_t accumulation = 1;  ///< forward/backward passes per optimizer step
  std::int64_t effective_batch() const { return micro_batch * accumulation; }
  std::string name() const { return std::to_string(micro_batch) + "x" + std::to_string(accumulation); }
  bool operator==(const schedule& o) const { return micro_batch == o.micro_batch && accumulation == o.accumulation; }
};

namespace detail {
inline std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

/// A positive decimal integer of at most 9 digits (larger batch sizes are typing errors here).
inline std::int64_t parse_count(const std::string& digits, const std::string& item, const char* what) {
  if (digits.empty())
    throw std::invalid_argument("schedule '" + item + "': missing " + what + " (expected MxA, e.g. 2x2)");
  for (char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      throw std::invalid_argument("schedule '" + item + "': " + what + " '" + digits +
                                  "' is not a positive integer (expected MxA, e.g. 2x2)");
  if (digits.size() > 9) throw std::invalid_argument("schedule '" + item + "': " + what + " is too large");
  const auto v = std::stoll(digits);
  if (v == 0) throw std::invalid_argument("schedule '" + item + "': " + what + " must be at least 1");
  return v;
}
}  // namespace detail

/// Parses one item "MxA" (surrounding spaces allowed; 'x' or 'X').
inline schedule parse_schedule(const std::string& text) {
  const auto item = detail::trim(text);
  if (item.empty()) throw std::invalid_argument("empty schedule item (expected MxA, e.g. 2x2)");
  const auto x = item.find_first_of("xX");
  if (x == std::string::npos)
    throw std::invalid_argument("schedule '" + item +
                                "': no 'x' between micro-batch and accumulation (expected MxA, e.g. 2x2)");
  if (item.find_first_of("xX", x + 1) != std::string::npos)
    throw std::invalid_argument("schedule '" + item + "': more than one 'x' (expected MxA, e.g. 2x2)");
  schedule s;
  s.micro_batch = detail::parse_count(item.substr(0, x), item, "micro-batch size");
  s.accumulation = detail::parse_count(item.substr(x + 1), item, "accumulation count");
  const auto examples = checked_mul(s.micro_batch, s.accumulation);
  if (!examples || *examples > max_examples_per_step)
    throw std::invalid_argument("schedule '" + item + "': micro-batch x accumulation is " +
                                (examples ? std::to_string(*examples) : std::string("beyond 64 bits")) +
                                " examples per optimizer step; the limit is " + std::to_string(max_examples_per_step) +
                                " (2^20)");
  return s;
}

/// Tokens of one optimizer step, M x A x seq_len, overflow-checked (std::invalid_argument naming
/// the schedule and the length).
inline std::int64_t tokens_per_step(const schedule& s, std::int64_t seq_len) {
  const auto examples = checked_mul(s.micro_batch, s.accumulation);
  const auto tokens = examples ? checked_mul(*examples, seq_len) : std::nullopt;
  if (!tokens)
    throw std::invalid_argument("schedule " + s.name() + " at sequence length " + std::to_string(seq_len) +
                                ": micro-batch x accumulation x sequence length overflows a 64-bit integer");
  return *tokens;
}

/// Parses a comma-separated list. Every schedule must have the same effective batch M*A: the
/// experiment compares ways of reaching one optimizer batch, and the data order relies on it. Each
/// schedule is given once ("1x4,01X4" is 1x4 twice): the experiment names its runs' files after it,
/// so a second would overwrite the first (its --repeats runs a list again, each repeat its own files).
inline std::vector<schedule> parse_schedules(const std::string& list) {
  std::vector<schedule> out;
  std::size_t start = 0;
  while (true) {
    const auto comma = list.find(',', start);
    const auto item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (detail::trim(item).empty())
      throw std::invalid_argument("schedule list '" + list + "' has an empty item (expected e.g. 1x4,2x2,4x1)");
    out.push_back(parse_schedule(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const auto& s : out)
    if (s.effective_batch() != out.front().effective_batch())
      throw std::invalid_argument("schedules do not share one effective batch: " + out.front().name() + " = " +
                                  std::to_string(out.front().effective_batch()) + " but " + s.name() + " = " +
                                  std::to_string(s.effective_batch()));
  for (std::size_t i = 0; i < out.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (out[j] == out[i]) throw std::invalid_argument("schedule " + out[i].name() + " is given twice");
  return out;
}

}  // namespace qwen3
