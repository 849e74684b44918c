// traceml: GPU phase timing with CUDA events alone, for when CUPTI is off or unavailable.
//
// At each step and phase boundary an event is recorded on the boundary thread's current stream
// (event_timer.hpp); a phase's GPU time (gpu_facts::span_ns) is the elapsed time between its two
// events. Steps are delivered once their events completed (cudaEventQuery: the training loop never
// waits for the GPU; the final collect may). Kernel counts, busy and idle time need CUPTI
// (cupti_source.hpp), which times every step with the same events besides.
//
//   auto src = std::make_unique<traceml::cuda_events_source>();      // needs the CUDA runtime
//   profiler.set_gpu_source(std::move(src));
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/scope_pairing.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/cuda_runtime.hpp"
#include "traceml/gpu/cuda_stream.hpp"
#include "traceml/gpu/device_check.hpp"
#include "traceml/gpu/event_sampling.hpp"
#include "traceml/gpu/event_timer.hpp"
#include "traceml/gpu/gpu_memory.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE

/// Device-level memory for programs without LibTorch: peak_reserved_bytes is the device memory in
/// use at step end (cudaMemGetInfo: every process on the device, not a peak); peak_allocated_bytes
/// is the peak of the device's default stream-ordered pool (cudaMallocAsync) when it was used,
/// else -1. Cost: two runtime calls per step.
inline memory_sampler cuda_device_memory_sampler(int device = -1) {
  return [device]() {
    memory_sample s;
    int dev = device;
    if (dev < 0 && detail::rt::cudaGetDevice(&dev) != cudaSuccess) return s;
    int prev = -1;
    detail::rt::cudaGetDevice(&prev);
    if (prev != dev) detail::rt::cudaSetDevice(dev);
    std::size_t free_b = 0, total_b = 0;
    if (detail::rt::cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      s.peak_reserved_bytes = static_cast<std::int64_t>(total_b - free_b);
    cudaMemPool_t pool = nullptr;
    if (detail::rt::cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess && pool) {
      std::uint64_t high = 0;
      if (detail::rt::cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high) == cudaSuccess && high > 0) {
        s.peak_allocated_bytes = static_cast<std::int64_t>(high);
        std::uint64_t zero = 0;
        detail::rt::cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero);
      }
    }
    if (prev >= 0 && prev != dev) detail::rt::cudaSetDevice(prev);
    detail::rt::cudaGetLastError();  // leave no sticky error behind for the training loop to trip over
    return s;
  };
}

struct cuda_events_options {
  std::size_t event_pool = 4096;   ///< events created up front (two per step/phase scope)
  stream_provider current_stream;  ///< empty: the legacy default stream
  memory_sampler memory;           ///< called at each step end; empty: no memory numbers
  /// The share of the run the events may cost the training thread: on steps too short for that,
  /// one step in N is timed (event_sampling.hpp). 0: every step, whatever it costs.
  double event_budget = default_event_budget;
  /// Why kernel attribution (CUPTI) is off, when this source stands in for it (make_best_gpu_source):
  /// said in status(), so that every output gives the reason, not only the first message.
  std::string attribution_off;
};

/// CUDA-event phase timing. Delivers every step unrecorded (no kernel records), with the events'
/// GPU time per span: reports carry span_ns per phase and step (kernels_measured = false).
class cuda_events_source : public gpu_source {
 public:
  explicit cuda_events_source(cuda_events_options o = {}) : opt_(std::move(o)) {
    const cuda_device_check device = check_cuda_device();
    if (!device.ok()) {
      why_ = device.why;
      return;
    }
    timer_ = std::make_unique<event_timer>(opt_.event_pool);
    if (!timer_->ok()) why_ = "could not create CUDA events";
  }
  cuda_events_source(const cuda_events_source&) = delete;
  cuda_events_source& operator=(const cuda_events_source&) = delete;

  /// False when no event could be created (no device); status() says why.
  bool ok() const noexcept { return why_.empty(); }

  const char* name() const noexcept override { return "cuda-events"; }
  bool wants_scope_hooks() const noexcept override { return ok(); }

  /// Hot: on a timed step one event record on the current stream (~1-2 us), on others nothing but
  /// the pairing; no lock (the pairing's stacks are per thread).
  void on_scope_begin(phase_kind kind, const char*, std::int32_t, std::int32_t) noexcept override {
    if (kind == phase_kind::microbatch || !ok()) return;
    if (kind == phase_kind::step) sampling_.begin_step();
    if (!sampling_.timing()) {
      scopes_.begin(open_entry{});  // keeps begins and ends paired
      return;
    }
    const std::int64_t t0 = now_ns();
    const cudaStream_t s = detail::stream_of(opt_.current_stream);
    const cudaEvent_t e = timer_->record(s);
    sampling_.add_cost(now_ns() - t0);
    if (!scopes_.begin(open_entry{e, s})) timer_->release(e);  // not kept: this scope stays untimed
  }
  bool step_timed() const noexcept override { return ok() && sampling_.timing(); }

  /// Hot: one event record on the stream of the matching begin (~1-2 us; none on an untimed step)
  /// and an uncontended lock.
  void on_scope_end(const span_record& r) noexcept override {
    if (r.kind == phase_kind::microbatch || !ok()) return;
    open_entry b{};
    if (!scopes_.end(b)) return;
    event_pair p{b.begin, nullptr};
    if (b.begin) {
      const std::int64_t t0 = now_ns();
      p.end = timer_->record(b.stream);
      sampling_.add_cost(now_ns() - t0);
    }
    if (!p.end) timer_->release(p);  // half a pair times nothing
    if (r.kind == phase_kind::step) sampling_.end_step(r.end_ns - r.begin_ns);
    bool kept = false;
    {
      detail::lock_guard lock(mu_);
      kept = scopes_.closed(r, p);
    }
    if (!kept) timer_->release(p);
  }

  /// Training thread, as the step closes: a memory sample of the step, kept for step_ended().
  void step_closed(const span_record& step) noexcept override {
    if (!ok() || !opt_.memory) return;
    try {
      const memory_sample m = opt_.memory();
      detail::lock_guard lock(mu_);
      closed_memory_.emplace_back(step.step, m);
    } catch (const std::exception& e) {
      report_once("events-step-closed", std::string("a step's memory sample failed: ") + e.what());
    }
  }

  /// Once per step, on the profiler's step worker (later steps may have begun): keeps the step's
  /// events and the memory sample step_closed() took.
  void step_ended(std::int32_t step, const std::vector<span_record>& spans) override {
    if (!ok()) return;
    pending_step p;
    p.step = step;
    detail::lock_guard lock(mu_);
    bool closed_seen = false;
    while (!closed_memory_.empty() && closed_memory_.front().first <= step) {
      if (closed_memory_.front().first == step) {
        p.memory = closed_memory_.front().second;
        closed_seen = true;
      }
      closed_memory_.pop_front();
    }
    if (!closed_seen && opt_.memory) p.memory = opt_.memory();  // without step_closed(): now
    for (auto& s : spans) {
      if (s.kind == phase_kind::microbatch || s.step != step) continue;
      p.spans.push_back(s);
      p.events.push_back(scopes_.take(s));
    }
    // Scopes of this step or earlier that belong to no span: their events go back to the pool.
    // Later steps' scopes stay for their own step end.
    scopes_.drop_through(step, [this](event_pair& e) { timer_->release(e); });
    pending_.push_back(std::move(p));
  }

  /// Steps whose events completed (cudaEventQuery, no waiting); with `final`, waits for all.
  gpu_delivery collect(bool final) override {
    gpu_delivery d;
    d.final = final;
    detail::lock_guard lock(mu_);
    while (!pending_.empty()) {
      auto& p = pending_.front();
      bool done = true;
      for (auto& e : p.events) done = done && event_timer::done(e, final);
      if (!done) break;
      step_activity a;
      a.step = p.step;
      a.memory = p.memory;
      std::vector<std::int64_t> ns, offsets;
      timer_->read_step(p.events, step_index(p.spans), ns, offsets);
      for (std::size_t i = 0; i < p.spans.size(); ++i)
        a.spans.push_back(timed_span{marked_span{p.spans[i], 0, 0}, ns[i], offsets[i], {}});
      d.steps.push_back(std::move(a));
      pending_.pop_front();
    }
    return d;
  }

  std::string status() const override {
    if (!ok()) return "GPU timing off: " + why_;
    const std::string off = opt_.attribution_off.empty() ? "" : ": " + opt_.attribution_off;
    return "CUDA-event phase timing " + sampling_.describe() + " (GPU time per phase; kernel attribution off" + off +
           ")";
  }

 private:
  struct open_entry {
    cudaEvent_t begin = nullptr;
    cudaStream_t stream = nullptr;
  };
  static std::size_t step_index(const std::vector<span_record>& spans) {
    for (std::size_t i = 0; i < spans.size(); ++i)
      if (spans[i].kind == phase_kind::step) return i;
    return spans.size();
  }

  struct pending_step {
    std::int32_t step = -1;
    memory_sample memory;
    std::vector<span_record> spans;
    std::vector<event_pair> events;  // parallel to spans
  };

  cuda_events_options opt_;
  std::string why_;
  event_sampling sampling_{opt_.event_budget};
  std::unique_ptr<event_timer> timer_;  // its own lock is a leaf: taken under mu_ (never the reverse)
  detail::mutex mu_;  // guards pending_, closed_memory_ and scopes_' closed spans (its open stacks are per thread)
  detail::scope_pairing<open_entry, event_pair> scopes_;
  std::deque<pending_step> pending_ TRACEML_GUARDED_BY(mu_);
  // step_closed() to step_ended()
  std::deque<std::pair<std::int32_t, memory_sample>> closed_memory_ TRACEML_GUARDED_BY(mu_);
};

TRACEML_END_NAMESPACE
