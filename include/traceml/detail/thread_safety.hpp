// traceml: Clang's thread-safety analysis for the library's locks: the attribute macros, a mutex that
// carries the capability, and its scoped locks.
//
// Why: which mutex guards which member is otherwise only a comment. With the members annotated
// (TRACEML_GUARDED_BY) and the helpers that expect a lock held (TRACEML_REQUIRES), clang's
// -Wthread-safety proves at compile time that every access holds its lock; scripts/thread_safety.sh
// runs it over every header. Under another compiler the macros expand to nothing and the types are
// thin wrappers over std::mutex, so the code is the same.
//
// libstdc++'s std::mutex and std::lock_guard carry no capability attributes, so the analysis needs a
// mutex type of its own: detail::mutex, locked by detail::lock_guard (a scope) or detail::unique_lock
// (a scope that a condition variable may unlock while it waits).
//
//   mutable detail::mutex mu_;
//   int count_ TRACEML_GUARDED_BY(mu_) = 0;
//   void add() { detail::lock_guard lock(mu_); ++count_; }
#pragma once
#include <mutex>

#include "traceml/config.hpp"

#if defined(__clang__)
#define TRACEML_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TRACEML_THREAD_ANNOTATION(x)
#endif

/// A type that is a lock (the analysis calls it a capability).
#define TRACEML_CAPABILITY(name) TRACEML_THREAD_ANNOTATION(capability(name))
/// A type whose constructor acquires a capability and whose destructor releases it.
#define TRACEML_SCOPED_CAPABILITY TRACEML_THREAD_ANNOTATION(scoped_lockable)
/// A member read or written only with the lock held.
#define TRACEML_GUARDED_BY(x) TRACEML_THREAD_ANNOTATION(guarded_by(x))
/// A pointer member whose pointee is read or written only with the lock held.
#define TRACEML_PT_GUARDED_BY(x) TRACEML_THREAD_ANNOTATION(pt_guarded_by(x))
/// A function called only with these locks held.
#define TRACEML_REQUIRES(...) TRACEML_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
/// A function that takes these locks (none named: the object itself, for a mutex's lock()).
#define TRACEML_ACQUIRE(...) TRACEML_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
/// A function that lets these locks go.
#define TRACEML_RELEASE(...) TRACEML_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
/// A function that takes the lock when it returns its first argument (true or false).
#define TRACEML_TRY_ACQUIRE(...) TRACEML_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
/// A function called only without these locks held (it takes them itself).
#define TRACEML_EXCLUDES(...) TRACEML_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
/// A function the analysis skips; its comment says why its accesses are safe.
#define TRACEML_NO_THREAD_SAFETY_ANALYSIS TRACEML_THREAD_ANNOTATION(no_thread_safety_analysis)

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// std::mutex with the capability attribute, so that members can name it in TRACEML_GUARDED_BY.
class TRACEML_CAPABILITY("mutex") mutex {
 public:
  mutex() = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;

  void lock() TRACEML_ACQUIRE() { m_.lock(); }
  void unlock() TRACEML_RELEASE() { m_.unlock(); }
  bool try_lock() TRACEML_TRY_ACQUIRE(true) { return m_.try_lock(); }

  /// The std::mutex inside, for detail::unique_lock (a std::condition_variable waits on a
  /// std::unique_lock<std::mutex> only).
  std::mutex& native() noexcept { return m_; }

 private:
  std::mutex m_;
};

/// Holds `m` for the scope (std::lock_guard, seen by the analysis).
class TRACEML_SCOPED_CAPABILITY lock_guard {
 public:
  explicit lock_guard(mutex& m) TRACEML_ACQUIRE(m) : m_(m) { m_.lock(); }
  ~lock_guard() TRACEML_RELEASE() { m_.unlock(); }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  mutex& m_;
};

/// Holds `m` for the scope, and may let it go and take it again (std::unique_lock, seen by the
/// analysis). A std::condition_variable waits on native(): it unlocks the mutex while it sleeps and
/// holds it again when it returns, so to the analysis the lock is held throughout, as it is for the
/// code around the wait. This keeps std::condition_variable (std::condition_variable_any would take
/// this type directly, but adds a mutex of its own and a shared_ptr per wait).
class TRACEML_SCOPED_CAPABILITY unique_lock {
 public:
  explicit unique_lock(mutex& m) TRACEML_ACQUIRE(m) : lock_(m.native()) {}
  ~unique_lock() TRACEML_RELEASE() {}  // std::unique_lock unlocks if still held
  unique_lock(const unique_lock&) = delete;
  unique_lock& operator=(const unique_lock&) = delete;

  void lock() TRACEML_ACQUIRE() { lock_.lock(); }
  void unlock() TRACEML_RELEASE() { lock_.unlock(); }

  /// For std::condition_variable::wait and wait_for.
  std::unique_lock<std::mutex>& native() noexcept { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace detail
TRACEML_END_NAMESPACE
