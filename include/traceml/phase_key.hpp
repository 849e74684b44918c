// traceml: the one identity of a phase -- its kind, its name and, where it matters, its micro-batch.
// Statistics group per (kind, name); attribution per (kind, name, micro-batch). Both use this key.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "traceml/config.hpp"
#include "traceml/phase_kind.hpp"

TRACEML_BEGIN_NAMESPACE

struct phase_key {
  phase_kind kind = phase_kind::user;
  std::string name;
  std::int32_t microbatch = -1;  ///< -1: outside micro-batches, or "every micro-batch" (run statistics)

  friend bool operator==(const phase_key& a, const phase_key& b) noexcept {
    return a.kind == b.kind && a.microbatch == b.microbatch && a.name == b.name;
  }
  friend bool operator!=(const phase_key& a, const phase_key& b) noexcept { return !(a == b); }
  /// The same phase, micro-batches not told apart.
  bool same_phase(phase_kind k, const std::string& n) const noexcept { return kind == k && name == n; }
};

struct phase_key_hash {
  std::size_t operator()(const phase_key& k) const noexcept {
    std::size_t h = std::hash<std::string>{}(k.name);
    h ^= (static_cast<std::size_t>(k.kind) << 1) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= static_cast<std::size_t>(static_cast<std::uint32_t>(k.microbatch)) + 0x9e3779b97f4a7c15ull + (h << 6) +
         (h >> 2);
    return h;
  }
};

TRACEML_END_NAMESPACE
