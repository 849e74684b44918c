// traceml: "when something fails it says why, once". Slow path only (takes a lock).
#pragma once
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/thread_safety.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

struct diagnostics_state {
  detail::mutex mu;
  std::set<std::string> seen TRACEML_GUARDED_BY(mu);         // keys already reported
  std::vector<std::string> messages TRACEML_GUARDED_BY(mu);  // everything reported, in order
  bool quiet TRACEML_GUARDED_BY(mu) = false;                 // tests silence stderr and read messages() instead
};

/// Never destroyed: it is first built by whatever reports first, which may come after an exit
/// handler was registered (the TRACEML_OUT session's), and that handler reports through it after the
/// static destructors of later-built objects have run.
inline diagnostics_state& diagnostics() {
  static diagnostics_state& s = *new diagnostics_state;
  return s;
}

}  // namespace detail

/// Report a problem once per `key`: printed to stderr as "traceml: <message>" and kept for
/// diagnostic_messages(). Never throws. Cost: a lock and a set lookup (not for hot paths).
inline void report_once(const std::string& key, const std::string& message) noexcept {
  try {
    auto& d = detail::diagnostics();
    detail::lock_guard lock(d.mu);
    if (!d.seen.insert(key).second) return;
    d.messages.push_back(message);
    if (!d.quiet) std::fprintf(stderr, "traceml: %s\n", message.c_str());
  } catch (...) {
    // Out of memory while reporting: nothing sensible left to do, and the training must go on.
  }
}

/// Every message report_once() has emitted so far in this process.
inline std::vector<std::string> diagnostic_messages() {
  auto& d = detail::diagnostics();
  detail::lock_guard lock(d.mu);
  return d.messages;
}

/// Forget reported keys and messages (tests); `quiet` keeps stderr clean.
inline void reset_diagnostics(bool quiet = false) {
  auto& d = detail::diagnostics();
  detail::lock_guard lock(d.mu);
  d.seen.clear();
  d.messages.clear();
  d.quiet = quiet;
}

TRACEML_END_NAMESPACE
