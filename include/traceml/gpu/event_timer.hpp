// traceml: GPU time between two points of a stream, with CUDA events from a preallocated pool.
// Both GPU sources time every step and phase with it (cuda_events_source.hpp, cupti_source.hpp):
// an event at each boundary, on the boundary thread's current stream; a span's GPU time is the
// elapsed time between its two events, from when the stream reached the span's first work to when
// it finished its last. Events are read with cudaEventQuery only: the training loop never waits for
// the GPU (a final collect may). Cost: one cudaEventRecord per boundary (~1-2 us of CPU; measured
// +0.13% step time on the graphed Qwen3 trainer), nothing allocated after construction.
//
//   traceml::event_timer t(4096);
//   traceml::event_pair p{t.record(stream), nullptr};   // at the begin
//   p.end = t.record(stream);                           // at the end
//   if (t.done(p, /*wait=*/false)) ns = t.take_elapsed(p);
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/cuda_runtime.hpp"
#include "traceml/gpu/cuda_stream.hpp"

TRACEML_BEGIN_NAMESPACE

/// The events at a span's two boundaries (nullptr: that boundary was not timed).
struct event_pair {
  cudaEvent_t begin = nullptr;
  cudaEvent_t end = nullptr;
};

class event_timer {
 public:
  /// Creates `pool_size` events up front (two per step or phase scope in flight).
  explicit event_timer(std::size_t pool_size) {
    free_.reserve(pool_size);
    all_.reserve(pool_size);
    for (std::size_t i = 0; i < pool_size; ++i) {
      cudaEvent_t e = nullptr;
      if (detail::rt::cudaEventCreateWithFlags(&e, cudaEventDefault) != cudaSuccess) {
        detail::rt::cudaGetLastError();
        break;
      }
      free_.push_back(e);
      all_.push_back(e);
    }
  }
  ~event_timer() {
    for (auto e : all_) detail::rt::cudaEventDestroy(e);
    detail::rt::cudaGetLastError();
  }
  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;

  /// False when no event could be created (no device, no driver).
  bool ok() const noexcept { return !all_.empty(); }

  /// Hot: an event from the pool, recorded on `stream` (~1-2 us). nullptr while the stream is being
  /// captured into a CUDA graph, when the pool is empty (said once) or the record failed.
  cudaEvent_t record(cudaStream_t stream) noexcept {
    if (!ok() || detail::stream_capturing(stream)) return nullptr;
    cudaEvent_t e = nullptr;
    {
      detail::lock_guard lock(mu_);
      if (free_.empty()) {
        exhausted();
        return nullptr;
      }
      e = free_.back();
      free_.pop_back();
    }
    if (detail::rt::cudaEventRecord(e, stream) != cudaSuccess) {
      detail::rt::cudaGetLastError();
      release(e);
      return nullptr;
    }
    return e;
  }

  /// Returns an event to the pool (nullptr: nothing).
  void release(cudaEvent_t e) noexcept {
    if (!e) return;
    detail::lock_guard lock(mu_);
    free_.push_back(e);  // never reallocates: capacity is the pool size
  }
  void release(event_pair& p) noexcept {
    release(p.begin);
    release(p.end);
    p = event_pair{};
  }

  /// Whether the GPU has passed the pair's end event (true when it has none). With `wait`, waits
  /// for it (a CPU-GPU sync: end of run only).
  static bool done(const event_pair& p, bool wait) noexcept {
    if (!p.end) return true;
    const cudaError_t q = wait ? detail::rt::cudaEventSynchronize(p.end) : detail::rt::cudaEventQuery(p.end);
    if (q != cudaSuccess) detail::rt::cudaGetLastError();
    return q != cudaErrorNotReady;
  }

  /// GPU nanoseconds between the pair's events (-1 when either is missing or unreadable); both
  /// events go back to the pool. Call once done() said so.
  std::int64_t take_elapsed(event_pair& p) noexcept {
    std::int64_t ns = -1;
    if (p.begin && p.end) {
      float ms = 0.f;
      if (detail::rt::cudaEventElapsedTime(&ms, p.begin, p.end) == cudaSuccess)
        ns = static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
      detail::rt::cudaGetLastError();
    }
    release(p);
    return ns;
  }

  /// GPU nanoseconds from event `a` to event `b` (both completed; either may be on any stream);
  /// -1 when unreadable. Neither goes back to the pool.
  static std::int64_t between(cudaEvent_t a, cudaEvent_t b) noexcept {
    if (!a || !b) return -1;
    float ms = 0.f;
    const bool ok = detail::rt::cudaEventElapsedTime(&ms, a, b) == cudaSuccess;
    detail::rt::cudaGetLastError();
    return ok ? static_cast<std::int64_t>(static_cast<double>(ms) * 1e6) : -1;
  }

  /// Reads a finished step's pairs (parallel to its spans; `step_index` is the step's own span):
  /// each span's elapsed time into `ns` and the time from the step's begin event to the span's
  /// begin event into `offset_ns` (-1 where unknown); every event goes back to the pool.
  void read_step(std::vector<event_pair>& pairs, std::size_t step_index, std::vector<std::int64_t>& ns,
                 std::vector<std::int64_t>& offset_ns) noexcept {
    ns.assign(pairs.size(), -1);
    offset_ns.assign(pairs.size(), -1);
    const cudaEvent_t origin = step_index < pairs.size() ? pairs[step_index].begin : nullptr;
    for (std::size_t i = 0; i < pairs.size(); ++i) offset_ns[i] = between(origin, pairs[i].begin);
    for (std::size_t i = 0; i < pairs.size(); ++i) ns[i] = take_elapsed(pairs[i]);
  }

 private:
  void exhausted() TRACEML_REQUIRES(mu_) {
    if (said_exhausted_) return;
    said_exhausted_ = true;
    report_once("cuda-events-pool", "CUDA event pool exhausted (" + std::to_string(all_.size()) +
                                        " events): some phases are not GPU-timed; raise the GPU source's event_pool");
  }

  std::vector<cudaEvent_t> all_;  // every event, destroyed with the timer; fixed after construction
  detail::mutex mu_;              // guards free_ only (a leaf: nothing else is locked under it)
  std::vector<cudaEvent_t> free_ TRACEML_GUARDED_BY(mu_);
  bool said_exhausted_ TRACEML_GUARDED_BY(mu_) = false;
};

TRACEML_END_NAMESPACE
