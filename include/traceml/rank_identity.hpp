// traceml: which rank of a data-parallel run this process is. Every rank profiles itself; its
// outputs say which rank wrote them (the JSON summary's "rank" and "world_size", a "rank" on every
// per-step JSONL line, one Chrome-trace process per rank), so that the ranks' files can be merged
// (ranks.hpp, `traceml ranks`) and their traces laid side by side without colliding.
//
// Launchers say it in the environment: torchrun and most others set RANK and WORLD_SIZE.
//
//   traceml::profiler_options o;            // rank and world size from RANK / WORLD_SIZE, if set
//   o.rank = traceml::rank_identity{1, 4};  // or given
#pragma once
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

#include "traceml/config.hpp"
#include "traceml/detail/activation.hpp"
#include "traceml/detail/diagnostics.hpp"

TRACEML_BEGIN_NAMESPACE

struct rank_identity {
  int rank = -1;       ///< 0 .. world_size - 1; -1: not part of a distributed run
  int world_size = 0;  ///< ranks in the run; 0: not distributed
  bool distributed() const noexcept { return rank >= 0 && world_size > 0 && rank < world_size; }
};

namespace detail {
/// A whole non-negative decimal number below 2^31, or -1.
inline long parse_rank_number(const char* text) {
  if (!text || !*text) return -1;
  for (const char* c = text; *c; ++c)
    if (*c < '0' || *c > '9') return -1;
  errno = 0;
  const long v = std::strtol(text, nullptr, 10);
  return errno == ERANGE || v > 2147483647L ? -1 : v;
}
}  // namespace detail

/// RANK and WORLD_SIZE of the environment (as torchrun sets them); not distributed when neither is
/// set. Values that are not whole numbers with 0 <= RANK < WORLD_SIZE are said once and ignored:
/// a file labelled with the wrong rank would be merged as another rank's.
inline rank_identity rank_from_environment() {
  const char* rank = detail::environment_rank();
  const char* world = detail::environment_world_size();
  if (!rank && !world) return {};
  const long r = detail::parse_rank_number(rank), w = detail::parse_rank_number(world);
  if (r < 0 || w <= 0 || r >= w) {
    report_once("rank-environment", std::string("RANK=") + (rank ? rank : "(unset)") +
                                        " WORLD_SIZE=" + (world ? world : "(unset)") +
                                        " is not a rank of a run (need whole numbers, 0 <= RANK < WORLD_SIZE); "
                                        "the outputs carry no rank");
    return {};
  }
  return rank_identity{static_cast<int>(r), static_cast<int>(w)};
}

/// The rank a profiler writes into its outputs: the one it was given (profiler_options::rank), else
/// the environment's. A given rank outside its world is said once and left out, as a bad
/// environment is.
inline rank_identity resolve_rank(const std::optional<rank_identity>& given) {
  if (!given) return rank_from_environment();
  if (given->distributed() || (given->rank < 0 && given->world_size <= 0)) return *given;
  report_once("rank-option", "profiler_options::rank " + std::to_string(given->rank) + " of " +
                                 std::to_string(given->world_size) +
                                 " is not a rank of a run (need 0 <= rank < world_size); the outputs carry no rank");
  return {};
}

TRACEML_END_NAMESPACE
