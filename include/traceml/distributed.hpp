// traceml: the ranks of a data-parallel LibTorch run gathered to rank 0, through the c10d store the
// process group rendezvoused on (a TCPStore for torchrun-style launches), not through shared files.
// Needs LibTorch with c10d (every LibTorch build of Linux has it; target traceml::torch).
//
//   auto store = c10::make_intrusive<c10d::TCPStore>(master_addr, opts);   // the process group's
//   ... train with a traceml::profiler, gradient all-reduce inside TRACEML_PHASE(communication) ...
//   const auto run = prof.finish();
//   auto merged = traceml::gather_ranks(*store, "mlp", traceml::rank_steps_of(run, rank), world_size,
//                                       std::chrono::seconds(30));
//   if (merged) std::fputs(traceml::format_rank_table(*merged).c_str(), stdout);   // rank 0 only
//
// Every rank publishes its steps under traceml/ranks/<run>/<rank>; rank 0 waits for them all until one
// deadline, so a rank that died or hangs costs rank 0 the timeout once, not a hang, and is named
// missing in the merge. Other ranks return at once (nullopt): nothing waits on them.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "traceml/analysis/ranks.hpp"
#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {

/// Text, one step per line ("step wall_ms communication_ms"), under a first line naming the format.
inline std::vector<std::uint8_t> encode_rank_steps(const rank_steps& r) {
  std::string text = "traceml.rank_steps/1\n";
  char line[96];
  for (const auto& st : r.steps) {
    std::snprintf(line, sizeof line, "%llu %.17g %.17g\n", static_cast<unsigned long long>(st.step), st.wall_ms,
                  st.communication_ms);
    text += line;
  }
  return {text.begin(), text.end()};
}

/// The inverse of encode_rank_steps; nullopt for anything else (then the rank counts as missing).
inline std::optional<rank_steps> decode_rank_steps(const std::vector<std::uint8_t>& bytes, int rank) {
  const std::string text(bytes.begin(), bytes.end());
  const std::string head = "traceml.rank_steps/1\n";
  if (text.compare(0, head.size(), head) != 0) return std::nullopt;
  rank_steps out{rank, {}};
  const char* p = text.c_str() + head.size();
  while (*p) {
    char* end = nullptr;
    rank_step st;
    st.step = std::strtoull(p, &end, 10);
    if (end == p) return std::nullopt;
    p = end;
    st.wall_ms = std::strtod(p, &end);
    if (end == p) return std::nullopt;
    p = end;
    st.communication_ms = std::strtod(p, &end);
    if (end == p || *end != '\n') return std::nullopt;
    p = end + 1;
    out.steps.push_back(st);
  }
  return out;
}

inline std::string rank_key(const std::string& run, int rank) {
  return "traceml/ranks/" + run + "/" + std::to_string(rank);
}

}  // namespace detail

/// Publishes this rank's steps in `store`; on rank 0 (mine.rank == 0) waits for every other rank's
/// until `timeout` has passed since the call and returns the merge (missing: the ranks that did not
/// arrive, or whose data did not decode, each said once on stderr). Other ranks return nullopt.
/// `run` keeps several runs in one store apart. Throws invalid_argument for a rank outside the world.
inline std::optional<rank_merge> gather_ranks(c10d::Store& store, const std::string& run, const rank_steps& mine,
                                              int world_size, std::chrono::milliseconds timeout,
                                              std::size_t warmup = 0) {
  if (mine.rank < 0 || mine.rank >= world_size)
    throw std::invalid_argument("gather_ranks: rank " + std::to_string(mine.rank) + " is outside 0.." +
                                std::to_string(world_size - 1));
  if (mine.rank != 0) {
    store.set(detail::rank_key(run, mine.rank), detail::encode_rank_steps(mine));
    return std::nullopt;
  }
  std::vector<rank_steps> got{mine};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int r = 1; r < world_size; ++r) {
    const std::string key = detail::rank_key(run, r);
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    try {
      // Once the deadline has passed, only what has already arrived counts.
      const bool there = left.count() > 0 ? (store.wait({key}, left), true) : store.check({key});
      if (!there) {
        std::fprintf(stderr, "traceml: rank %d's steps did not arrive within the timeout; it is reported missing\n", r);
        continue;
      }
      auto steps = detail::decode_rank_steps(store.get(key), r);
      if (!steps) {
        std::fprintf(stderr, "traceml: rank %d's steps arrived malformed; it is reported missing\n", r);
        continue;
      }
      got.push_back(std::move(*steps));
    } catch (const std::exception& e) {  // the store's timeout, or its connection lost
      std::string why = e.what();
      why = why.substr(0, why.find('\n'));  // LibTorch's errors go on with a backtrace
      std::fprintf(stderr, "traceml: rank %d's steps did not arrive within the timeout (%s); it is reported missing\n",
                   r, why.c_str());
    }
  }
  return merge_ranks(got, world_size, warmup);
}

TRACEML_END_NAMESPACE
