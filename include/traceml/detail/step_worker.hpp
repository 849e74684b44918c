// traceml: the thread that does a step's end work off the training thread.
//
// Why: a step's end used to drain the rings, compute the step's statistics, format and flush its
// JSONL line and hand its GPU activity over, all on the training thread: about 6.5 us of CPU per
// step (benchmarks/cpu_step_cost), a third of a 20 us step. Now the training thread only says that a
// step ended (poke(): one relaxed atomic store, no system call, no lock) and this thread does the
// rest, checking for work every poll interval.
//
// Why polling and not a notify per step: waking a sleeping thread is a system call (futex) on the
// training thread, a microsecond or more each step. The thread instead wakes by itself: every
// `busy_poll` while steps keep ending, backing off to `idle_poll` when none did, so an idle program
// wakes it 50 times a second and a training loop's steps are processed within about a millisecond.
//
//   detail::step_worker w([&] { process_what_ended(); });
//   w.poke();   // training thread, at each step's end
//   w.stop();   // joins; then run the work once more yourself for what is left
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "traceml/config.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/thread_identity.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// A bounded queue from the thread that ends steps to whoever processes them (under the
/// profiler's lock: one consumer at a time). push() and pop() take no lock and allocate nothing;
/// push() fails when the queue is full (the producer then does the work itself).
template <class T, std::size_t N>
class handoff_queue {
  static_assert((N & (N - 1)) == 0, "N must be a power of two");

 public:
  bool push(const T& v) noexcept {
    const std::uint64_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) >= N) return false;
    slots_[t & (N - 1)] = v;
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }
  bool pop(T& v) noexcept {
    const std::uint64_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return false;
    v = slots_[h & (N - 1)];
    head_.store(h + 1, std::memory_order_release);
    return true;
  }
  std::size_t size() const noexcept {
    return static_cast<std::size_t>(tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire));
  }

 private:
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  T slots_[N]{};
};

class step_worker {
 public:
  using clock = std::chrono::steady_clock;
  explicit step_worker(std::function<void()> work,
                       std::chrono::microseconds busy_poll = std::chrono::microseconds(1000),
                       std::chrono::microseconds idle_poll = std::chrono::microseconds(20000))
      : work_(std::move(work)), busy_poll_(busy_poll), idle_poll_(idle_poll) {}
  ~step_worker() { stop(); }
  step_worker(const step_worker&) = delete;
  step_worker& operator=(const step_worker&) = delete;

  /// Training thread, at a step's end: work is waiting. Cost: a relaxed load and, the first time, the
  /// thread's start (the first step end of a run: a system call, once).
  void poke() noexcept {
    pending_.store(true, std::memory_order_relaxed);
    if (!started_.load(std::memory_order_relaxed)) start();
  }

  /// Stops the thread and waits for it (its work in progress finishes first). Idempotent, callable
  /// from any thread but the worker's own.
  void stop() {
    detail::lock_guard join_lock(join_mu_);
    {
      detail::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void start() noexcept {
    detail::lock_guard lock(mu_);
    if (started_.load(std::memory_order_relaxed) || stopping_) return;
    try {
      thread_ = std::thread([this] {
        name_this_thread("traceml step");
        run();
      });
      started_.store(true, std::memory_order_relaxed);
    } catch (...) {
      // No thread (resources exhausted): the work is left for whoever calls it next (finish()).
      started_.store(true, std::memory_order_relaxed);
    }
  }

  void run() {
    auto poll = busy_poll_;
    detail::unique_lock lock(mu_);
    while (!stopping_) {
      wake_.wait_for(lock.native(), poll, [this]() TRACEML_REQUIRES(mu_) { return stopping_; });
      if (stopping_) break;
      if (!pending_.exchange(false, std::memory_order_relaxed)) {
        poll = std::min(idle_poll_, poll * 2);  // nothing ended: wake less often
        continue;
      }
      poll = busy_poll_;
      lock.unlock();
      work_();
      lock.lock();
    }
  }

  std::function<void()> work_;
  const std::chrono::microseconds busy_poll_, idle_poll_;
  std::atomic<bool> pending_{false};
  std::atomic<bool> started_{false};
  detail::mutex mu_;       // guards stopping_ and the thread's start; the work runs outside it
  detail::mutex join_mu_;  // one stop() joins at a time (finish() may be called from two threads)
  std::condition_variable wake_;
  std::thread thread_;
  bool stopping_ TRACEML_GUARDED_BY(mu_) = false;
};

}  // namespace detail
TRACEML_END_NAMESPACE
