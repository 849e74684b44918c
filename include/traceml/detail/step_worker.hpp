// traceml: the thread that does a step's end work off the training thread.
//
// Why: a step's end used to drain the rings, compute the step's statistics, format and flush its
// JSONL line and hand its GPU activity over, all on the training thread: about 6.5 us of CPU per
// step (benchmarks/cpu_step_cost), a third of a 20 us step. Now the training thread only says that a
// step ended (poke(): one relaxed atomic store, no system call, no lock) and this thread does the
// rest, checking for work every poll interval.
//
// Why polling and not a notify per step: waking a sleeping thread is a system call (futex) on the
// training thread, a microsecond or more each step. The thread instead wakes by itself, every
// `longest_poll` (250 ms) at most: each wake-up costs it tens of microseconds of CPU (a timed futex
// wait and the scheduler's switch; 27-48 us measured on a 2-core VM) plus the write of the batch's
// JSONL lines: with a wake-up per step, twice the step's own processing (perf, 75 ms steps). Shorter
// steps are taken in batches of what a wake-up may take: at most 64 steps (a wake-up's work stays
// short) and at most a quarter of a thread ring's records (the training thread does a
// step's work itself once its ring is half full, which a batch must never cause). The poll is the
// time those steps take at the step period measured (the time since the last work divided by the
// steps that work processed), doubling when a wake finds nothing. A step is thus processed, and its
// JSONL line written, within 250 ms of its end.
//
// Measured (benchmarks/cpu_step_cost, 2-core VM; docs/cost.md), the profiler's threads' CPU per step:
// 75 ms steps (the eager Qwen3 trainer's 4x1 step length) 0.34 ms with a fixed 1 ms poll, 104-110 us
// with a wake-up per step, 41 us now; 2 ms steps 25-29 us with a wake-up per step, 7-8 us now.
//
//   detail::step_worker w([&] { return process_what_ended(); });  // returns a step_batch
//   w.poke();   // training thread, at each step's end
//   w.stop();   // joins; then run the work once more yourself for what is left
#pragma once
#include <algorithm>
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

/// What one wake-up of the step worker processed.
struct step_batch {
  std::size_t steps = 0;
  std::size_t records = 0;  ///< the steps' span records, every thread's
};

class step_worker {
 public:
  using clock = std::chrono::steady_clock;
  /// `work` processes every step ended so far and says how many steps and records it processed.
  /// The first wake-up comes after `first_poll`; later ones as the header says, `longest_poll` apart
  /// at most.
  explicit step_worker(std::function<step_batch()> work,
                       std::chrono::microseconds first_poll = std::chrono::milliseconds(10),
                       std::chrono::microseconds longest_poll = std::chrono::milliseconds(250))
      : work_(std::move(work)), first_poll_(first_poll), longest_poll_(std::max(longest_poll, first_poll)) {}
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

  /// The poll for steps of `period` with `records_per_step` records: the time of as many steps as
  /// one wake-up may take (at most max_batch, and at most max_batch_records records), never longer
  /// than longest_poll_ nor shorter than 200 us.
  std::chrono::microseconds next_poll(std::chrono::microseconds period, std::size_t records_per_step) const noexcept {
    const std::size_t by_records = max_batch_records / std::max<std::size_t>(records_per_step, 1);
    const auto steps = static_cast<std::int64_t>(std::clamp<std::size_t>(by_records, 1, max_batch));
    return std::clamp(period * steps, std::chrono::microseconds(200), longest_poll_);
  }

  static constexpr std::size_t max_batch = 64;  // steps one wake-up takes at most, by design
  /// Records one wake-up takes at most: a quarter of a thread ring (16,384 records), well below the
  /// half at which the training thread does its step's work itself (profiler.hpp checks the match).
  static constexpr std::size_t max_batch_records = 4096;

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
    std::chrono::microseconds poll = first_poll_;
    clock::time_point last_work = clock::now();
    detail::unique_lock lock(mu_);
    while (!stopping_) {
      wake_.wait_for(lock.native(), poll, [this]() TRACEML_REQUIRES(mu_) { return stopping_; });
      if (stopping_) break;
      if (!pending_.exchange(false, std::memory_order_relaxed)) {
        poll = std::min(longest_poll_, poll * 2);  // nothing ended: wake less often
        continue;
      }
      lock.unlock();
      const step_batch batch = work_();
      lock.lock();
      if (batch.steps == 0) continue;
      const clock::time_point now = clock::now();
      const auto period = std::chrono::duration_cast<std::chrono::microseconds>(now - last_work) /
                          static_cast<std::int64_t>(batch.steps);
      poll = next_poll(period, batch.records / batch.steps);
      last_work = now;
    }
  }

  std::function<step_batch()> work_;
  const std::chrono::microseconds first_poll_, longest_poll_;
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
