// traceml: what a GPU source keeps between a scope's begin, its end and its step's end.
//
// A GPU source (CUDA events, CUPTI markers) leaves something on the stream at each scope boundary.
// At the end it needs what the matching begin left (scopes nest per thread, so: the innermost open
// one of this thread), and at the step's end what each closed span left, found by the span's
// identity (recorder thread index and begin time). Not thread-safe: the source holds its lock.
#pragma once
#include <cstdint>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// Identifies a closed span: the recorder's thread index and its begin time.
inline std::uint64_t span_key(std::uint32_t thread, std::int64_t begin_ns) noexcept {
  return (static_cast<std::uint64_t>(begin_ns) * 1000003ull) ^ thread;
}

template <class Opened, class Closed>
class scope_pairing {
 public:
  /// A scope opened on the calling thread, leaving `o`.
  void begin(const Opened& o) { open_[std::this_thread::get_id()].push_back(o); }

  /// A scope closed on the calling thread: what its begin left, in `o`. False when this thread has
  /// no open scope (it opened before the source was attached).
  bool end(Opened& o) {
    auto& stack = open_[std::this_thread::get_id()];
    if (stack.empty()) return false;
    o = stack.back();
    stack.pop_back();
    return true;
  }

  /// What the closed span `r` left, kept until its step ends.
  void closed(const span_record& r, const Closed& c) { closed_[span_key(r.thread, r.begin_ns)] = c; }

  /// What span `s` left when it closed (Closed{} when nothing), forgotten afterwards.
  Closed take(const span_record& s) {
    auto it = closed_.find(span_key(s.thread, s.begin_ns));
    if (it == closed_.end()) return Closed{};
    Closed c = std::move(it->second);
    closed_.erase(it);
    return c;
  }

  /// Hands what every other closed span left (scopes outside the step) to `f`, and forgets it.
  template <class F>
  void drop_rest(F&& f) {
    for (auto& kv : closed_) f(kv.second);
    closed_.clear();
  }

 private:
  std::unordered_map<std::thread::id, std::vector<Opened>> open_;
  std::unordered_map<std::uint64_t, Closed> closed_;
};

}  // namespace detail
TRACEML_END_NAMESPACE
