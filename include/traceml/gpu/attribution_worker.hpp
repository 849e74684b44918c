// traceml: runs the attribution stage off the training thread.
//
// Why: a recorded step of the Qwen3 trainer carries ~18,000 kernel records, and attributing them took
// about 5 ms. Run at the step's end on the training thread, that was between two steps -- outside
// every step's wall time, but inside the run's: measured on an H200 with CUDA graphs it was most of
// the profiler's 0.6 ms per step. Here the profiler's step worker only hands the delivery over (a move and
// a notify) and picks up whatever reports are done; the data still flows one way: source ->
// delivery -> stage (on this worker) -> reports -> profiler.
//
// One lock, `mu_`: it guards the inbox, the finished reports and the busy flag. The stage itself is
// touched only by the worker thread (or, before the thread starts and after it stopped, by the
// caller), so attribution never runs under the lock.
//
//   traceml::attribution_worker w;
//   w.submit(source->collect(false));        // the step worker, after a step's end
//   for (auto& rep : w.take_ready()) ...     // reports of steps whose round is done
//   for (auto& rep : w.finish(source->collect(true))) ...   // end of run: everything, in order
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/attribution_stage.hpp"
#include "traceml/thread_identity.hpp"

TRACEML_BEGIN_NAMESPACE

class attribution_worker {
 public:
  attribution_worker() = default;
  ~attribution_worker() { stop(); }
  attribution_worker(const attribution_worker&) = delete;
  attribution_worker& operator=(const attribution_worker&) = delete;

  /// Configure before the first submit (the stage is the worker's once it runs).
  void keep_activities(bool on) { stage_.keep_activities(on); }
  void counter_view(records_as_counted v) { stage_.counter_view(v); }
  void set_round_tap(attribution_stage::round_tap tap) { stage_.set_round_tap(std::move(tap)); }

  /// The profiler's step worker: hands a delivery over. Empty deliveries cost nothing. The thread starts on
  /// the first non-empty one, so a run without GPU activity never has one.
  void submit(gpu_delivery d) {
    if (d.steps.empty() && d.records.empty() && d.markers.empty() && !d.final) return;
    {
      detail::lock_guard lock(mu_);
      inbox_.push_back(std::move(d));
      if (!thread_.joinable() && !stopping_)
        thread_ = std::thread([this] {
          detail::name_this_thread("traceml gpu");
          run();
        });
    }
    wake_.notify_one();
  }

  /// The profiler's step worker: the reports finished so far, in delivery order.
  std::vector<step_gpu_report> take_ready() {
    detail::lock_guard lock(mu_);
    std::vector<step_gpu_report> out;
    out.swap(ready_);
    return out;
  }

  /// The CPU this thread spent since the last call on deliveries that held kernel records (the
  /// recording budget charges it to the recordings: recording_budget.hpp).
  std::int64_t take_record_cpu_ns() noexcept { return record_cpu_ns_.exchange(0, std::memory_order_relaxed); }

  /// End of the run: hands over the last delivery, waits until every delivery is attributed, stops
  /// the thread and returns every report not yet taken.
  std::vector<step_gpu_report> finish(gpu_delivery last) {
    submit(std::move(last));
    stop();
    // Anything left (the thread never started, or it stopped early): attributed here, taken under
    // the lock like every other access to inbox_ (process() takes it again for ready_).
    std::deque<gpu_delivery> left;
    {
      detail::lock_guard lock(mu_);
      left.swap(inbox_);
    }
    for (auto& d : left) process(std::move(d));
    return take_ready();
  }

 private:
  void run() {
    detail::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock.native(), [this]() TRACEML_REQUIRES(mu_) { return stopping_ || !inbox_.empty(); });
      if (inbox_.empty()) return;  // stopping, nothing left
      gpu_delivery d = std::move(inbox_.front());
      inbox_.pop_front();
      lock.unlock();
      process(std::move(d));
      lock.lock();
    }
  }

  /// Attributes one delivery (worker thread, or the caller once the thread stopped). The CPU it took
  /// is charged to recording when it handled kernel records (brought them, or finished a recorded
  /// step's report), as against the events' and markers' of unrecorded steps; charged before the
  /// reports are published, so whoever takes a report finds its cost already counted.
  void process(gpu_delivery d) {
    const std::int64_t t0 = thread_cpu_ns();
    bool records = !d.records.empty();
    std::vector<step_gpu_report> reports;
    try {
      reports = stage_.add(std::move(d));
    } catch (const std::exception& e) {
      report_once("attribution-worker",
                  std::string("GPU attribution failed: ") + e.what() + "; the steps of that round have no GPU figures");
    }
    for (const auto& r : reports) records = records || r.kernels_measured;
    if (records) record_cpu_ns_.fetch_add(thread_cpu_ns() - t0, std::memory_order_relaxed);
    detail::lock_guard lock(mu_);
    for (auto& r : reports) ready_.push_back(std::move(r));
  }

  /// Finishes what is queued and joins the thread.
  void stop() {
    {
      detail::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  attribution_stage stage_;
  detail::mutex mu_;
  std::condition_variable wake_;
  std::deque<gpu_delivery> inbox_ TRACEML_GUARDED_BY(mu_);
  std::vector<step_gpu_report> ready_ TRACEML_GUARDED_BY(mu_);
  bool stopping_ TRACEML_GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::atomic<std::int64_t> record_cpu_ns_{0};  // the thread's CPU on records' deliveries, not yet taken
};

TRACEML_END_NAMESPACE
