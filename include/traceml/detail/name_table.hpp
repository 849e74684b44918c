// traceml: the process-lifetime table of phase names given at run time. A record keeps its name as
// a `const char*` that the profiler reads at the step's end and the trace at the run's end, so a name
// built at run time (a std::string, a string_view, a char buffer, a c_str() of a temporary) is copied
// here once, by content, and the record keeps the copy. String literals and tag names never come
// here: they already live as long as the process.
//
//   const char* n = traceml::intern(std::string("layer_") + std::to_string(i));  // same text, same pointer
//
// Names are never freed (records and traces of any run may point at them), so the table is bounded:
// past max_interned_names distinct names or max_interned_bytes of text, a new name is recorded as
// too_many_names_label (said once on stderr). Everything here is the same in every build mode, so
// one table serves a program whose translation units were built in different modes.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "traceml/config.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/phase_kind.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// The name every new name gets once the table is full (one address: end hooks compare it).
inline constexpr char too_many_names_label[] = "(too many phase names)";
/// Every empty name (no bytes to compare or copy).
inline constexpr char empty_name[] = "";
/// The table's bounds: distinct names, and bytes of their text.
inline constexpr std::size_t max_interned_names = std::size_t{1} << 16;
inline constexpr std::size_t max_interned_bytes = std::size_t{16} << 20;

struct name_table {
  detail::mutex mu;  // guards everything below (the slow path only)
  // a deque never moves its elements: pointers stay valid
  std::deque<std::string> names TRACEML_GUARDED_BY(mu);
  std::unordered_set<std::string_view> index TRACEML_GUARDED_BY(mu);  // views of `names`
  std::size_t bytes TRACEML_GUARDED_BY(mu) = 0;
};

inline name_table& interned_names() {
  // Never destroyed: records and the exit-time session's trace read names after static destructors.
  static name_table& table = *new name_table;
  return table;
}

/// A name as the table keeps it: its copy, and the kind a phase of that name has
/// (phase_kind_from_name: "forward" is the forward kind, any other name a user phase).
struct interned_name {
  const char* text = nullptr;
  phase_kind kind = phase_kind::user;
};

/// One slot of a thread's cache of names it interned lately: the name's hash, length, copy and kind.
struct cached_name {
  std::uint64_t hash;
  std::size_t size;
  interned_name name;
};
/// Direct-mapped by hash. Plain data, zero-initialized: no constructor runs when a thread first
/// uses it, and it allocates nothing.
inline constexpr std::size_t name_cache_slots = 64;
inline thread_local cached_name tls_name_cache[name_cache_slots];

/// A hash of the bytes, eight at a time (one multiply per eight bytes, then a final mix so that the
/// low bits, which pick the cache slot, depend on every byte).
inline std::uint64_t name_hash(const char* s, std::size_t n) noexcept {
  constexpr std::uint64_t k = 0xff51afd7ed558ccdull;
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s + i, 8);
    h = (h ^ w) * k;
    h ^= h >> 32;
  }
  if (i < n) {
    std::uint64_t w = 0;
    std::memcpy(&w, s + i, n - i);
    h = (h ^ w) * k;
  }
  h ^= h >> 29;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 32);
}

/// Slow path: under the table's lock, the stored copy of `s`, stored now if new. Allocates (a new
/// name: its copy and an index entry). Throws what the allocation or the lock throws.
inline const char* intern_locked(std::string_view s) {
  auto& t = interned_names();
  detail::lock_guard lock(t.mu);
  if (const auto it = t.index.find(s); it != t.index.end()) return it->data();
  if (t.names.size() >= max_interned_names || t.bytes + s.size() > max_interned_bytes) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true, std::memory_order_relaxed))
      std::fprintf(stderr,
                   "traceml: more than %zu distinct phase names (or %zu MiB of them) were given at run time; "
                   "phases with newer names are recorded as '%s'\n",
                   max_interned_names, max_interned_bytes >> 20, too_many_names_label);
    return too_many_names_label;
  }
  t.names.emplace_back(s);
  t.bytes += s.size();
  t.index.insert(std::string_view(t.names.back()));
  return t.names.back().c_str();
}

/// The process-lifetime copy of the `n` bytes at `s` (NUL-terminated; the same pointer for the same
/// text, on every thread; `s` may be null when `n` is 0), with its phase kind. text is nullptr only
/// when memory ran out (said once).
/// Cost: a hash of the bytes and, when this thread met the text lately (its 64-slot cache), one
/// compare of them: no lock, no allocation. Otherwise the slow path: the table's lock and a hash-set
/// lookup, plus, the first time the process sees the text, its copy (allocates).
inline interned_name intern_phase_name(const char* s, std::size_t n) noexcept {
  if (n == 0) return {empty_name, phase_kind::user};
  const std::uint64_t h = name_hash(s, n);
  cached_name& slot = tls_name_cache[h % name_cache_slots];
  if (slot.name.text && slot.hash == h && slot.size == n && std::memcmp(slot.name.text, s, n) == 0) return slot.name;
  const char* kept = nullptr;
  try {
    kept = intern_locked(std::string_view(s, n));
  } catch (const std::exception& e) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true, std::memory_order_relaxed))
      std::fprintf(stderr,
                   "traceml: a phase name given at run time could not be kept (%s); that phase is not "
                   "recorded\n",
                   e.what());
    return {};
  }
  const interned_name out{kept, phase_kind_from_name(kept)};
  if (kept != too_many_names_label) slot = cached_name{h, n, out};
  return out;
}

/// intern_phase_name's copy alone.
inline const char* intern_name(const char* s, std::size_t n) noexcept { return intern_phase_name(s, n).text; }

}  // namespace detail

/// A process-lifetime copy of `name`, for APIs that keep a `const char*` (trainer-callback hooks, a
/// GPU source's phase names): the same text always gives the same pointer. Never freed. Cost: as
/// detail::intern_name (a hash and a compare when this thread met the text lately; the first time,
/// a lock and an allocation). Returns too_many_names_label's text past the table's bounds, and ""
/// when memory ran out.
inline const char* intern(std::string_view name) noexcept {
  const char* kept = detail::intern_name(name.data(), name.size());
  return kept ? kept : "";
}

TRACEML_END_NAMESPACE
