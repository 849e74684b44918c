// traceml: SIGINT and SIGTERM noted instead of ending the process at once, so that a run can stop at
// a safe point and write what it measured. profiler_options::finish_on_signal uses it; a program
// can use it around work of its own (examples/qwen3/experiment.cpp does, between schedules).
//
//   traceml::stop_signal_guard guard;          // while one lives, SIGINT/SIGTERM only set a flag
//   for (...) {
//     if (const int sig = traceml::pending_stop_signal()) {
//       write_what_is_finished();
//       traceml::end_by_signal(sig);           // the process ends by that signal: status 128 + signo
//     }
//     ...
//   }
//
// Why a flag: a signal handler may only do async-signal-safe things (no allocation, no lock, no
// stdio), so it cannot write a report. The handler does one lock-free atomic compare-exchange; the
// work happens where the program looks at the flag.
//
// Rules:
// - A second SIGINT or SIGTERM while one is pending ends the process at once by the default action
//   (Ctrl-C twice quits now, as a user who means it expects; nothing more is written).
// - A signal the process ignores when the first guard is made (SIG_IGN: SIGINT of a background job
//   started by a script, `nohup`) stays ignored.
// - Guards nest (a count). The last one to go restores the handlers that were there before and, if a
//   signal is still pending that nothing acted on, raises it again: a signal is deferred, never
//   swallowed.
// - Handlers are installed with SA_RESTART (POSIX): a read() the training is blocked in goes on
//   instead of failing with EINTR.
// Cost: nothing on any hot path; pending_stop_signal() is one relaxed atomic load.
#pragma once
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <signal.h>
#define TRACEML_POSIX_SIGNALS 1
#else
#define TRACEML_POSIX_SIGNALS 0
#endif

#include "traceml/config.hpp"
#include "traceml/detail/thread_safety.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free atomic int");

/// The signals a guard catches, in the order of stop_signal_state's arrays.
inline constexpr int stop_signals[2] = {SIGINT, SIGTERM};

struct stop_signal_state {
  std::atomic<int> pending{0};  // the first signal noted and not yet acted on; 0 = none
  detail::mutex mu;             // guards, installed, previous: changed by guards, never by the handler
  int guards TRACEML_GUARDED_BY(mu) = 0;
  bool installed[2] TRACEML_GUARDED_BY(mu) = {false, false};
#if TRACEML_POSIX_SIGNALS
  struct sigaction previous[2] TRACEML_GUARDED_BY(mu) = {};
#else
  void (*previous[2])(int) TRACEML_GUARDED_BY(mu) = {nullptr, nullptr};
#endif
};

/// Constant-initialised (no guard variable for the handler to run into), one per program.
inline stop_signal_state stop_state;

/// Restores the default action of `sig` (async-signal-safe).
inline void default_action(int sig) noexcept {
#if TRACEML_POSIX_SIGNALS
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
#else
  std::signal(sig, SIG_DFL);
#endif
}

/// The handler: notes the first signal; a second one ends the process now.
inline void stop_signal_handler(int sig) {
  const int saved_errno = errno;
  int none = 0;
  if (!stop_state.pending.compare_exchange_strong(none, sig)) {
    // Blocked while this handler runs, the raised signal is delivered when it returns.
    default_action(sig);
    std::raise(sig);
  }
#if !TRACEML_POSIX_SIGNALS
  else {
    std::signal(sig, stop_signal_handler);  // std::signal may reset the handler on delivery
  }
#endif
  errno = saved_errno;
}

}  // namespace detail

/// While at least one guard lives, SIGINT and SIGTERM are noted (pending_stop_signal()) instead of
/// ending the process. Not copyable; make it on any thread (the handlers are process-wide).
class stop_signal_guard {
 public:
  stop_signal_guard() {
    auto& s = detail::stop_state;
    detail::lock_guard lock(s.mu);
    if (s.guards++ > 0) return;
    for (int i = 0; i < 2; ++i) {
      const int sig = detail::stop_signals[i];
#if TRACEML_POSIX_SIGNALS
      struct sigaction ours = {};
      ours.sa_handler = detail::stop_signal_handler;
      sigemptyset(&ours.sa_mask);
      ours.sa_flags = SA_RESTART;
      if (sigaction(sig, nullptr, &s.previous[i]) != 0 || s.previous[i].sa_handler == SIG_IGN) continue;
      s.installed[i] = sigaction(sig, &ours, nullptr) == 0;
#else
      s.previous[i] = std::signal(sig, detail::stop_signal_handler);
      s.installed[i] = s.previous[i] != SIG_ERR;
      if (s.previous[i] == SIG_IGN) {
        std::signal(sig, SIG_IGN);
        s.installed[i] = false;
      }
#endif
    }
  }

  ~stop_signal_guard() {
    auto& s = detail::stop_state;
    detail::lock_guard lock(s.mu);
    if (--s.guards > 0) return;
    for (int i = 0; i < 2; ++i) {
      if (!s.installed[i]) continue;
#if TRACEML_POSIX_SIGNALS
      sigaction(detail::stop_signals[i], &s.previous[i], nullptr);
#else
      std::signal(detail::stop_signals[i], s.previous[i]);
#endif
      s.installed[i] = false;
    }
    // Nobody acted on it: the signal goes where it would have gone without the guard.
    if (const int sig = s.pending.exchange(0)) std::raise(sig);
  }

  stop_signal_guard(const stop_signal_guard&) = delete;
  stop_signal_guard& operator=(const stop_signal_guard&) = delete;
};

/// The signal (SIGINT or SIGTERM) noted by a guard and not yet acted on, or 0.
inline int pending_stop_signal() noexcept { return detail::stop_state.pending.load(std::memory_order_relaxed); }

/// "SIGINT", "SIGTERM", or "a signal".
inline const char* stop_signal_name(int sig) noexcept {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "a signal";
}

/// Ends the process by `sig` with its default action, as if no guard had caught it: a shell sees
/// status 128 + sig (130 for SIGINT, 143 for SIGTERM), and a parent that waits sees the signal. Stdio
/// buffers are flushed first; no destructor or atexit handler runs. Where the signal cannot end the
/// process (the platform refuses), it exits with status 128 + sig.
[[noreturn]] inline void end_by_signal(int sig) noexcept {
  std::fflush(nullptr);
  detail::default_action(sig);
#if TRACEML_POSIX_SIGNALS
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
#endif
  std::raise(sig);
  std::_Exit(128 + sig);
}

TRACEML_END_NAMESPACE
