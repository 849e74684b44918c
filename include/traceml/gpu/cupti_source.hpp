// traceml: kernel attribution with CUPTI activity records.
//
// What it enables: CONCURRENT_KERNEL, MEMCPY and MEMSET activity records only. No runtime or driver
// API records and no external correlation: those cost per launch (+55% step time measured on a
// launch-bound loop) and external correlation ids are per thread, which misses backward kernels
// launched from autograd worker threads.
//
// How kernels find their phase: at each step and phase boundary the source enqueues a marker on
// the boundary thread's current stream, a tiny cudaMemsetAsync whose byte count encodes a sequence
// number. CUPTI times the markers like any other memset, on the same clock as the kernels, and the
// stream runs everything in launch order: a kernel between the begin and end markers of a phase on
// its stream was launched inside that phase, by whichever thread (attribution.hpp, docs/attribution.md).
//
// Threads: CUPTI hands full buffers to its own thread; a worker thread of ours flushes CUPTI
// periodically, attributes complete steps and keeps the reports until collect(). The training
// thread only enqueues markers (two per phase) and copies the step's spans at step end.
//
// CUPTI is loaded with dlopen at run time, so a program built with this header still runs where
// CUPTI is missing; every failure (no library, insufficient privileges, another CUPTI client such
// as Nsight Systems) is reported once and make_best_gpu_source() falls back to CUDA events.
//
//   traceml::gpu_source_options o;
//   o.current_stream = traceml::libtorch::current_stream_provider();   // LibTorch users
//   o.memory = traceml::libtorch::caching_allocator_sampler();
//   profiler.set_gpu_source(traceml::make_best_gpu_source(o));        // may be nullptr: no GPU
#pragma once
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "traceml/gpu/attribution.hpp"
#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/gpu/cuda_events_source.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/gpu/gpu_memory.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/gpu/kernel_name.hpp"
#include "traceml/gpu/recording_budget.hpp"

TRACEML_BEGIN_NAMESPACE

struct cupti_options {
  std::size_t buffer_bytes = std::size_t{4} << 20;  ///< one activity buffer (~20k kernel records)
  std::size_t buffer_count = 16;                    ///< preallocated; none is allocated later
  bool markers = true;            ///< boundary markers (exact attribution); off: by time only
  bool memcpy = true;             ///< MEMCPY records
  int flush_period_ms = 100;      ///< how often the worker asks CUPTI for finished records
  bool timestamp_callback = true; ///< let CUPTI stamp records with now_ns() directly when it can
  bool finalize = true;           ///< cuptiFinalize on destruction (not after recording only some steps: stop())
  std::size_t top_kernels = 10;
  int max_lag_steps = 8;          ///< resolve a step by time after this many later steps ended
  /// Which steps CUPTI records. CUPTI's per-launch cost is paid only on recorded steps: between
  /// them every activity kind is switched off and no marker is enqueued, so the other steps run as
  /// if untraced and report kernels_measured = false, span_ns = -1 (docs/attribution.md has the
  /// measured costs).
  /// overhead_budget > 0: as many steps as keep CUPTI's measured cost under this share of the run
  /// time (recording_budget.hpp); the first recording comes right after 3 warm-up and 3 baseline
  /// steps. 0.5% by default: with traceml's own ~0.1-0.2% per step the whole stays under 1%
  /// (measured, docs/attribution.md). 0: every step (CUPTI's full cost), or one in sample_every.
  double overhead_budget = 0.005;
  int sample_every = 1;
  /// Diagnostics and tests: called on the worker thread with each attribution round.
  std::function<void(const attribution_input&, const attribution_output&)> round_tap;
  const char* library = nullptr;  ///< CUPTI library path; default: the one found at build time
  stream_provider current_stream; ///< see cuda_events_source.hpp
  memory_sampler memory;          ///< called at each step end
};

namespace detail {

#if CUPTI_API_VERSION >= 130000
using cupti_kernel_record = CUpti_ActivityKernel10;
using cupti_memcpy_record = CUpti_ActivityMemcpy6;
#else
using cupti_kernel_record = CUpti_ActivityKernel9;
using cupti_memcpy_record = CUpti_ActivityMemcpy5;
#endif
using cupti_memset_record = CUpti_ActivityMemset4;

#ifndef TRACEML_CUPTI_LIBRARY
#define TRACEML_CUPTI_LIBRARY ""
#endif

/// The CUPTI entry points we use, resolved with dlopen/dlsym.
struct cupti_api {
  void* handle = nullptr;
  decltype(&::cuptiGetVersion) get_version = nullptr;
  decltype(&::cuptiGetResultString) result_string = nullptr;
  decltype(&::cuptiSubscribe) subscribe = nullptr;
  decltype(&::cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&::cuptiActivityEnable) enable = nullptr;
  decltype(&::cuptiActivityDisable) disable = nullptr;
  decltype(&::cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&::cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&::cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&::cuptiFinalize) finalize = nullptr;
  decltype(&::cuptiActivitySetAttribute) set_attribute = nullptr;  // optional
  // Newer than CUDA 12.0: declared here so that older headers compile; null when absent.
  using timestamp_fn = std::uint64_t(CUPTIAPI*)(void);
  CUptiResult(CUPTIAPI* register_timestamp_callback)(timestamp_fn) = nullptr;

  template <class F>
  bool sym(F& f, const char* n) {
    f = reinterpret_cast<F>(dlsym(handle, n));
    return f != nullptr;
  }

  bool load(const char* path, std::string& why) {
    // A CUPTI already in the process (LibTorch's profiler links one) must be the one we use: two
    // copies of CUPTI in one process fight over the driver's tool interface.
    const char* names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    for (const char* n : names)
      if (!handle) handle = dlopen(n, RTLD_NOW | RTLD_NOLOAD);
    if (!handle && path && *path) handle = dlopen(path, RTLD_NOW);
    if (!handle && *TRACEML_CUPTI_LIBRARY) handle = dlopen(TRACEML_CUPTI_LIBRARY, RTLD_NOW);
    for (const char* n : names)
      if (!handle) handle = dlopen(n, RTLD_NOW);
    if (!handle) {
      const char* e = dlerror();
      why = std::string("CUPTI library not found (") + (e ? e : "libcupti.so") +
            "; install the CUDA toolkit's CUPTI or put it on LD_LIBRARY_PATH)";
      return false;
    }
    bool ok = sym(get_version, "cuptiGetVersion") && sym(result_string, "cuptiGetResultString") &&
              sym(subscribe, "cuptiSubscribe") && sym(unsubscribe, "cuptiUnsubscribe") &&
              sym(register_callbacks, "cuptiActivityRegisterCallbacks") && sym(enable, "cuptiActivityEnable") &&
              sym(disable, "cuptiActivityDisable") && sym(flush_all, "cuptiActivityFlushAll") &&
              sym(next_record, "cuptiActivityGetNextRecord") &&
              sym(dropped_records, "cuptiActivityGetNumDroppedRecords") && sym(get_timestamp, "cuptiGetTimestamp") &&
              sym(finalize, "cuptiFinalize");
    sym(register_timestamp_callback, "cuptiActivityRegisterTimestampCallback");
    sym(set_attribute, "cuptiActivitySetAttribute");
    if (!ok) why = "CUPTI library too old (missing entry points)";
    return ok;
  }

  std::string describe(CUptiResult r) const {
    const char* s = nullptr;
    if (result_string) result_string(r, &s);
    return s ? std::string(s) : "CUPTI error " + std::to_string(static_cast<int>(r));
  }
};

/// Marker encoding: cudaMemsetAsync(buffer, marker_value, marker_base + 4 * (seq % marker_window)).
/// A user memset of exactly this value and one of these sizes would be taken for a marker; the
/// odd base and the 0xA7 fill make that very unlikely.
constexpr int marker_value = 0xA7;
constexpr std::size_t marker_base = 4100;
constexpr std::size_t marker_window = 4096;
constexpr std::size_t marker_buffer_bytes = marker_base + 4 * marker_window;
constexpr int max_devices = 64;

inline std::uint64_t CUPTIAPI cupti_now() { return static_cast<std::uint64_t>(now_ns()); }
inline void CUPTIAPI cupti_noop_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

}  // namespace detail

/// Kernel attribution with CUPTI. Construct, check ok() (or use make_best_gpu_source), hand it to
/// the profiler. One per process at a time (CUPTI has one activity client).
class cupti_source : public gpu_source {
 public:
  explicit cupti_source(cupti_options o = {}) : opt_(std::move(o)), budget_(opt_.overhead_budget) { start(); }

  ~cupti_source() override { stop(); }
  cupti_source(const cupti_source&) = delete;
  cupti_source& operator=(const cupti_source&) = delete;

  /// True when CUPTI tracing is running; otherwise why() says what failed.
  bool ok() const noexcept { return running_; }
  const std::string& why() const noexcept { return why_; }

  const char* name() const noexcept override { return "cupti"; }
  bool wants_scope_hooks() const noexcept override { return running_ && (opt_.markers || sampling()); }

  /// Hot: one ~20 KB cudaMemsetAsync on the current stream (a few microseconds of CPU, about a
  /// microsecond of GPU) plus an uncontended lock. Micro-batch boundaries get no marker.
  void on_scope_begin(phase_kind kind, const char*, std::int32_t step, std::int32_t) noexcept override {
    if (kind == phase_kind::microbatch || !running_) return;
    if (kind == phase_kind::step) {
      bool traced = true;
      {
        std::lock_guard<std::mutex> lock(hook_mu_);
        traced = opt_.overhead_budget > 0 ? budget_.should_record()
                                          : opt_.sample_every <= 1 || (step >= 0 && step % opt_.sample_every == 0);
      }
      if (traced) set_records_on();
      step_traced_.store(traced, std::memory_order_relaxed);
    }
    // Unsampled steps get no markers: a stack entry with seq 0 keeps begins and ends paired.
    open_marker m = step_traced_.load(std::memory_order_relaxed) ? enqueue_marker(current_stream()) : open_marker{};
    try {
      std::lock_guard<std::mutex> lock(hook_mu_);
      scopes_.begin(m);
    } catch (...) {
    }
  }

  /// Hot: as on_scope_begin, on the stream of the matching begin.
  void on_scope_end(const span_record& r) noexcept override {
    if (r.kind == phase_kind::microbatch || !running_) return;
    try {
      open_marker b{};
      {
        std::lock_guard<std::mutex> lock(hook_mu_);
        if (!scopes_.end(b)) return;
      }
      open_marker e = b.seq ? enqueue_marker(b.stream) : open_marker{};
      const bool step_end = r.kind == phase_kind::step;
      const bool traced = step_traced_.load(std::memory_order_relaxed);
      if (step_end && traced) switch_off_after_step(b.stream, e.seq);
      std::lock_guard<std::mutex> lock(hook_mu_);
      if (step_end && opt_.overhead_budget > 0) budget_.step_done(r.end_ns - r.begin_ns, traced);
      scopes_.closed(r, std::make_pair(b.seq, e.seq));
    } catch (...) {
    }
  }

  void keep_activities(bool on) override { keep_activities_.store(on, std::memory_order_relaxed); }

  /// Once per step, on the thread that ended it (before the next step begins): samples memory and
  /// hands the spans to the worker.
  void step_ended(std::int32_t step, const std::vector<span_record>& spans) override {
    if (!running_) return;
    pending_step p;
    p.step = step;
    p.sampled = step_traced_.load(std::memory_order_relaxed);  // still this step's decision
    if (opt_.memory) p.memory = opt_.memory();
    {
      std::lock_guard<std::mutex> lock(hook_mu_);
      for (auto& s : spans) {
        if (s.step != step || s.kind == phase_kind::microbatch) continue;
        marked_span ms;
        ms.span = s;
        std::tie(ms.begin_marker, ms.end_marker) = scopes_.take(s);
        if (s.kind == phase_kind::step) p.end_marker = ms.end_marker;
        p.spans.push_back(ms);
      }
      scopes_.drop_rest([](const auto&) {});  // scopes outside this step: nothing to attribute them to
    }
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      p.flushes_at_end = flushes_done_;
      steps_.push_back(std::move(p));
    }
    wake_.notify_one();
  }

  /// Reports of resolved steps. With `final`: synchronizes the device, flushes CUPTI and resolves
  /// everything outstanding.
  std::vector<step_gpu_report> collect(bool final) override {
    if (!running_) return {};
    if (final) {
      cudaDeviceSynchronize();
      cudaGetLastError();
      api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      std::lock_guard<std::mutex> lock(state_mu_);
      process_locked(true);
    }
    std::lock_guard<std::mutex> lock(state_mu_);
    std::vector<step_gpu_report> out;
    out.swap(ready_);
    return out;
  }

  std::string status() const override {
    if (!running_) return "kernel attribution off: " + why_;
    std::string s = "CUPTI kernel attribution on (";
    s += opt_.markers ? "stream-ordered boundary markers" : "by time, markers off";
    s += ", clock: ";
    s += clock_callback_ ? "CUPTI stamps now_ns()" : "CUPTI clock mapped by offset";
    if (opt_.overhead_budget > 0) {
      std::lock_guard<std::mutex> lock(hook_mu_);
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "; kernel records on %llu step(s) chosen to keep their cost under %.1f%% of run time: one cost "
                    "%+.0f%% of a step, %.2f%% spent",
                    static_cast<unsigned long long>(budget_.recordings()), 100.0 * budget_.budget(),
                    100.0 * budget_.cost_per_recording(), 100.0 * budget_.spent_share());
      s += buf;
    } else if (opt_.sample_every > 1) {
      s += "; kernel records on 1 step in " + std::to_string(opt_.sample_every);
    } else {
      s += "; kernel records on every step";
    }
    s += ")";
    return s;
  }

  /// Records CUPTI dropped (buffers full or refused) since the start.
  std::uint64_t dropped_records() const noexcept { return dropped_total_.load(); }

  /// Sampling: how often CUPTI records were switched on or off, and the training thread's time
  /// spent doing it (cuptiActivityEnable/Disable calls), since the start.
  std::uint64_t record_switches() const noexcept { return switches_.load(); }
  std::int64_t record_switch_ns() const noexcept { return switch_ns_.load(); }

 private:
  struct open_marker {
    std::uint64_t seq = 0;
    cudaStream_t stream = nullptr;
  };
  struct pending_step {
    std::int32_t step = -1;
    bool sampled = true;
    std::uint64_t ready_after_flush = 0;  // 0: successor's end marker not seen yet
    std::uint64_t flushes_at_end = 0;     // flushes_done_ when the step ended
    std::uint64_t end_marker = 0;
    memory_sample memory;
    std::vector<marked_span> spans;
  };

  bool sampling() const noexcept { return opt_.overhead_budget > 0 || opt_.sample_every > 1; }

  /// Sampling: every activity kind on or off together. Any enabled kind costs per launch (measured:
  /// with only MEMSET records left on, unsampled steps still paid about half of CUPTI's cost), so
  /// none stays on between recorded steps. On: training thread, at a recorded step's begin.
  void set_records_on() noexcept {
    if (!sampling()) return;
    std::lock_guard<std::mutex> lock(switch_mu_);
    off_pending_ = false;  // a pending switch-off would cut this step's records: records stay on
    if (records_on_) return;
    const std::int64_t t0 = now_ns();
    for (auto k : enabled_) api_.enable(k);
    records_on_ = true;
    switch_ns_.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    switches_.fetch_add(1, std::memory_order_relaxed);
  }

  /// Off: not at the recorded step's end but once the GPU has run it, and then with a forced flush.
  /// Measured: records switched off at the step's end (its last work still queued) never came back
  /// from a default flush (CUPTI keeps a buffer with an unfinished record), and steps resolved
  /// without them. So the training thread records an event behind the step's end marker, and the
  /// worker, once the event completed, switches records off and force-flushes: everything of the
  /// recorded step is finished by then; records of later work cut off by the switch come back
  /// unfinished and are ignored (they belong to unrecorded steps).
  void switch_off_after_step(cudaStream_t stream, std::uint64_t end_marker) noexcept {
    if (!sampling()) return;
    std::lock_guard<std::mutex> lock(switch_mu_);
    if (off_event_ && !detail::stream_capturing(stream) && cudaEventRecord(off_event_, stream) == cudaSuccess) {
      off_pending_ = true;
      off_marker_ = end_marker;
      return;
    }
    cudaGetLastError();
    for (auto k : enabled_) api_.disable(k);  // no event: at once (this step's last records may be lost)
    records_on_ = false;
    off_pending_ = false;
  }

  /// Worker: performs a pending switch-off whose event completed. True when it did.
  bool switch_off_if_due() {
    std::uint64_t marker = 0;
    {
      std::lock_guard<std::mutex> lock(switch_mu_);
      if (!off_pending_) return false;
      const cudaError_t q = cudaEventQuery(off_event_);
      if (q == cudaErrorNotReady) return false;
      cudaGetLastError();
      for (auto k : enabled_) api_.disable(k);
      records_on_ = false;
      off_pending_ = false;
      marker = off_marker_;
    }
    api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> lock(state_mu_);
    off_flushed_marker_ = std::max(off_flushed_marker_, marker);
    return true;
  }

  static std::atomic<cupti_source*>& instance() {
    static std::atomic<cupti_source*> p{nullptr};
    return p;
  }

  void fail(const std::string& why) { why_ = why; }

  void start() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      cudaGetLastError();
      return fail("no CUDA device");
    }
    cupti_source* expected = nullptr;
    if (!instance().compare_exchange_strong(expected, this))
      return fail("another traceml CUPTI source is active in this process");
    owns_instance_ = true;
    if (!api_.load(opt_.library, why_)) return;

    // A subscription with no callbacks costs nothing and tells us whether another CUPTI client
    // (Nsight Systems, a Python profiler) is attached; holding it makes later clients fail loudly
    // instead of silently sharing.
    CUptiResult r = api_.subscribe(&subscriber_, &detail::cupti_noop_callback, nullptr);
    if (r != CUPTI_SUCCESS) return fail(explain(r));
    subscribed_ = true;

    if (opt_.timestamp_callback && api_.register_timestamp_callback &&
        api_.register_timestamp_callback(&detail::cupti_now) == CUPTI_SUCCESS)
      clock_callback_ = true;
    else
      sample_clock_offset();

    // Buffers are handed to CUPTI already zeroed (here, and again off the training thread when they
    // come back), so that CUPTI does not zero them itself on the launching thread.
    if (api_.set_attribute) {
      std::uint8_t zeroed = 1;
      std::size_t size = sizeof zeroed;
      if (api_.set_attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &zeroed) == CUPTI_SUCCESS)
        zeroed_buffers_ = true;
    }
    pool_.reserve(opt_.buffer_count);
    try {
      for (std::size_t i = 0; i < opt_.buffer_count; ++i) {
        storage_.emplace_back(new std::uint8_t[opt_.buffer_bytes]());
        pool_.push_back(storage_.back().get());
      }
    } catch (...) {
      return fail("could not allocate CUPTI activity buffers");
    }
    r = api_.register_callbacks(&cupti_source::buffer_requested, &cupti_source::buffer_completed);
    if (r != CUPTI_SUCCESS) return fail(explain(r));

    std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET};
    if (opt_.memcpy) kinds.push_back(CUPTI_ACTIVITY_KIND_MEMCPY);
    for (auto k : kinds) {
      r = api_.enable(k);
      if (r != CUPTI_SUCCESS) {
        for (auto e : enabled_) api_.disable(e);
        enabled_.clear();
        return fail(explain(r));
      }
      enabled_.push_back(k);
    }
    if (sampling()) {
      for (auto k : enabled_) api_.disable(k);  // enabled above to learn whether CUPTI lets us; steps switch them
      if (cudaEventCreateWithFlags(&off_event_, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        off_event_ = nullptr;  // records then go off at each recorded step's end (some may be lost)
      }
    }
    if (opt_.markers) {
      int dev = 0;
      cudaGetDevice(&dev);
      marker_buffer(dev);  // the current device's buffer now, not on the first boundary
    }
    running_ = true;
    worker_ = std::thread([this] { worker_loop(); });
  }

  std::string explain(CUptiResult r) const {
    switch (r) {
      case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        return "CUPTI already in use by another tool (Nsight Systems or a profiler in this process)";
      case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
        return "insufficient privileges for CUPTI (see NVIDIA's ERR_NVGPUCTRPERM: run as admin or set "
               "NVreg_RestrictProfilingToAdminUsers=0)";
      case CUPTI_ERROR_NOT_INITIALIZED:
        return "CUPTI could not initialize (driver too old for this CUPTI, or no CUDA driver)";
      default:
        return "CUPTI error: " + api_.describe(r);
    }
  }

  void stop() {
    if (running_) {
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        stopping_ = true;
      }
      wake_.notify_all();
      if (worker_.joinable()) worker_.join();
      running_ = false;
      cudaDeviceSynchronize();
      cudaGetLastError();
      api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    if (api_.handle) {
      for (auto k : enabled_) api_.disable(k);
      enabled_.clear();
      if (api_.flush_all) api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      if (subscribed_) api_.unsubscribe(subscriber_);
      subscribed_ = false;
      // Not after sampling: on an H200 (CUDA 13.0) a CUDA-graph replay after a sampling source had
      // been finalized failed with "unspecified launch failure", twice; an every-step source
      // finalized without trouble. With every kind disabled CUPTI stays loaded but idle.
      if (opt_.finalize && api_.finalize && !sampling()) api_.finalize();
    }
    for (auto& p : marker_buffers_)
      if (p) cudaFree(p);
    if (off_event_) cudaEventDestroy(off_event_);
    off_event_ = nullptr;
    cudaGetLastError();
    if (owns_instance_) instance().store(nullptr);
    owns_instance_ = false;
    // Buffers are freed with storage_: CUPTI holds none after the flush and finalize above.
  }

  // ---- markers (training thread) --------------------------------------------------------------
  cudaStream_t current_stream() const noexcept { return detail::stream_of(opt_.current_stream); }

  void* marker_buffer(int dev) noexcept {
    if (dev < 0 || dev >= detail::max_devices) return nullptr;
    if (marker_buffers_.empty()) marker_buffers_.assign(detail::max_devices, nullptr);
    if (!marker_buffers_[static_cast<std::size_t>(dev)]) {
      void* p = nullptr;
      if (cudaMalloc(&p, detail::marker_buffer_bytes) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      marker_buffers_[static_cast<std::size_t>(dev)] = p;
    }
    return marker_buffers_[static_cast<std::size_t>(dev)];
  }

  open_marker enqueue_marker(cudaStream_t stream) noexcept {
    open_marker m;
    m.stream = stream;
    if (!opt_.markers) return m;
    if (detail::stream_capturing(stream)) return m;  // a marker would become part of the graph
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
      cudaGetLastError();
      return m;
    }
    void* buf = nullptr;
    std::uint64_t seq = 0;
    {
      // Only the numbering is serialized; the memset itself runs outside the lock, so that no
      // CUPTI callback can ever wait on it.
      std::lock_guard<std::mutex> lock(marker_mu_);
      buf = marker_buffer(dev);
      if (!buf) return m;
      seq = ++marker_seq_;
    }
    const std::size_t residue = static_cast<std::size_t>(seq % detail::marker_window);
    issued_[residue].store(seq, std::memory_order_release);
    if (cudaMemsetAsync(buf, detail::marker_value, detail::marker_base + 4 * residue, stream) != cudaSuccess) {
      cudaGetLastError();
      return m;
    }
    m.seq = seq;
    return m;
  }

  // ---- CUPTI callbacks (CUPTI's threads, or a thread calling flush) ---------------------------
  static void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
    cupti_source* self = instance().load();
    if (!self) return;
    std::lock_guard<std::mutex> lock(self->pool_mu_);
    if (self->pool_.empty()) {
      self->refused_.fetch_add(1);
      return;  // CUPTI drops records and counts them: reported as dropped_records
    }
    *buffer = self->pool_.back();
    self->pool_.pop_back();
    *size = self->opt_.buffer_bytes;
  }

  static void CUPTIAPI buffer_completed(CUcontext ctx, std::uint32_t stream_id, std::uint8_t* buffer,
                                        std::size_t /*size*/, std::size_t valid) {
    cupti_source* self = instance().load();
    if (!self || !buffer) return;
    self->parse(buffer, valid);
    std::size_t dropped = 0;
    if (self->api_.dropped_records(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped) {
      self->dropped_total_.fetch_add(dropped);
      self->dropped_since_.fetch_add(dropped);
    }
    if (self->zeroed_buffers_) std::memset(buffer, 0, self->opt_.buffer_bytes);  // off the training thread
    {
      std::lock_guard<std::mutex> lock(self->pool_mu_);
      self->pool_.push_back(buffer);
    }
    self->wake_.notify_one();
  }

  const char* intern(const char* raw) {  // CUPTI's thread only (parse_mu_ held)
    if (!raw) return "<unnamed>";
    auto it = names_by_ptr_.find(raw);
    // CUPTI shares one name pointer across a kernel's records; the strcmp guards against reuse.
    if (it != names_by_ptr_.end() && std::strcmp(it->second.first.c_str(), raw) == 0) return it->second.second;
    const std::string shortened = shorten_kernel_name(raw);
    const char* stable = names_.insert(shortened).first->c_str();
    names_by_ptr_[raw] = std::make_pair(std::string(raw), stable);
    return stable;
  }

  std::int64_t to_now(std::uint64_t cupti_ns) const noexcept {
    if (cupti_ns == 0) return 0;
    return static_cast<std::int64_t>(cupti_ns) + (clock_callback_ ? 0 : clock_offset_.load(std::memory_order_relaxed));
  }

  /// The fields every kernel, memcpy and memset record has, on the now_ns() clock.
  template <class Record>
  gpu_record common_fields(gpu_activity::type what, const Record& r) const noexcept {
    gpu_record g;
    g.what = what;
    g.begin_ns = to_now(r.start);
    g.end_ns = to_now(r.end);
    g.device = r.deviceId;
    g.stream = r.streamId;
    g.correlation = r.correlationId;
    return g;
  }

  void parse(std::uint8_t* buffer, std::size_t valid) {
    std::vector<gpu_record> recs;
    std::vector<marker_time> marks;
    std::lock_guard<std::mutex> plock(parse_mu_);
    CUpti_Activity* a = nullptr;
    while (api_.next_record(buffer, valid, &a) == CUPTI_SUCCESS) {
      switch (a->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          auto* k = reinterpret_cast<const detail::cupti_kernel_record*>(a);
          gpu_record g = common_fields(gpu_activity::type::kernel, *k);
          g.graph = k->graphId;
          g.name = intern(k->name);
          recs.push_back(g);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          auto* m = reinterpret_cast<const detail::cupti_memcpy_record*>(a);
          gpu_record g = common_fields(gpu_activity::type::memcpy, *m);
          g.bytes = m->bytes;
          g.name = memcpy_name(m->copyKind);
          recs.push_back(g);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          auto* m = reinterpret_cast<const detail::cupti_memset_record*>(a);
          const std::uint64_t b = m->bytes;
          if (m->value == static_cast<std::uint32_t>(detail::marker_value) && b >= detail::marker_base &&
              b < detail::marker_buffer_bytes && (b - detail::marker_base) % 4 == 0) {
            const std::size_t residue = static_cast<std::size_t>((b - detail::marker_base) / 4);
            const std::uint64_t seq = issued_[residue].load(std::memory_order_acquire);
            if (seq) {
              marks.push_back(marker_time{seq, m->deviceId, m->streamId, to_now(m->start), to_now(m->end)});
              break;
            }
          }
          gpu_record g = common_fields(gpu_activity::type::memset, *m);
          g.bytes = b;
          g.name = "memset";
          recs.push_back(g);
          break;
        }
        default:
          break;
      }
    }
    if (sampling()) {
      // Records cut off by a switch-off come back unfinished (no timestamps); they belong to
      // unrecorded steps (switch_off_after_step), so they are not reported as dropped.
      recs.erase(std::remove_if(recs.begin(), recs.end(), [](const gpu_record& g) { return !g.begin_ns || !g.end_ns; }),
                 recs.end());
      marks.erase(std::remove_if(marks.begin(), marks.end(), [](const marker_time& m) { return !m.begin_ns || !m.end_ns; }),
                  marks.end());
    }
    std::lock_guard<std::mutex> lock(inbox_mu_);
    inbox_records_.insert(inbox_records_.end(), recs.begin(), recs.end());
    inbox_markers_.insert(inbox_markers_.end(), marks.begin(), marks.end());
  }

  static const char* memcpy_name(std::uint32_t kind) {
    switch (kind) {
      case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
      case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
      case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
      default: return "memcpy";
    }
  }

  // ---- clock ----------------------------------------------------------------------------------
  /// Offset from CUPTI's clock to now_ns(), from the tightest of a few bracketed samples. Used only
  /// when CUPTI cannot stamp with our clock directly; refreshed by the worker to follow drift.
  void sample_clock_offset() {
    std::int64_t best_width = INT64_MAX, best = 0;
    for (int i = 0; i < 7; ++i) {
      const std::int64_t t0 = now_ns();
      std::uint64_t c = 0;
      if (api_.get_timestamp(&c) != CUPTI_SUCCESS) return;
      const std::int64_t t1 = now_ns();
      if (t1 - t0 < best_width) {
        best_width = t1 - t0;
        best = t0 + (t1 - t0) / 2 - static_cast<std::int64_t>(c);
      }
    }
    clock_offset_.store(best, std::memory_order_relaxed);
  }

  // ---- worker ---------------------------------------------------------------------------------
  void worker_loop() {
    auto next_flush = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(state_mu_);
    while (!stopping_) {
      bool pending = false;
      {
        std::lock_guard<std::mutex> sl(switch_mu_);
        pending = off_pending_;
      }
      if (pending)  // a switch-off waits for the GPU: look again in a millisecond
        wake_.wait_for(lock, std::chrono::milliseconds(1));
      else if (opt_.flush_period_ms > 0)
        wake_.wait_until(lock, next_flush);
      else
        wake_.wait(lock);  // no periodic flush: CUPTI hands over full buffers, steps resolve by lag
      if (stopping_) break;
      if (pending) {
        lock.unlock();
        const bool switched = switch_off_if_due();
        lock.lock();
        if (switched) ++flushes_done_;
      }
      if (std::chrono::steady_clock::now() >= next_flush && opt_.flush_period_ms > 0) {
        lock.unlock();
        api_.flush_all(0);  // delivers finished records through buffer_completed on this thread
        if (!clock_callback_) sample_clock_offset();
        lock.lock();
        ++flushes_done_;
        next_flush = std::chrono::steady_clock::now() + std::chrono::milliseconds(opt_.flush_period_ms);
      }
      process_locked(false);
    }
  }

  /// Moves the inbox in and attributes every step that is ready. state_mu_ held.
  void process_locked(bool final) {
    {
      std::lock_guard<std::mutex> lock(inbox_mu_);
      records_.insert(records_.end(), inbox_records_.begin(), inbox_records_.end());
      inbox_records_.clear();
      for (auto& m : inbox_markers_) markers_[m.seq] = m;
      inbox_markers_.clear();
    }
    const std::uint64_t refused = refused_.exchange(0);
    if (refused)
      report_once("cupti-buffers", "CUPTI activity buffers exhausted: records are being dropped (raise "
                                   "cupti_options::buffer_count or buffer_bytes); steps report dropped_records");
    // Ready: the step's end marker and the next step's end marker have arrived (one step of slack
    // for records of other streams) and CUPTI was flushed once more after that (records sit in
    // per-thread buffers: the autograd thread's may be delivered after the training thread's
    // markers); or enough later steps ended; or the run is over.
    std::size_t n_ready = 0;
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      bool ready = final;
      // An unrecorded step has no records to wait for. A recorded step under sampling is complete
      // once records were switched off behind it and force-flushed.
      if (!ready && !steps_[i].sampled) ready = true;
      if (!ready && sampling()) ready = steps_[i].end_marker && off_flushed_marker_ >= steps_[i].end_marker;
      if (!ready && !sampling() && i + 1 < steps_.size() && steps_[i].end_marker) {
        const auto& next = steps_[i + 1];
        const bool next_seen = next.sampled ? next.end_marker && markers_.count(next.end_marker) : true;
        if (!steps_[i].ready_after_flush && markers_.count(steps_[i].end_marker) && next_seen)
          steps_[i].ready_after_flush = flushes_done_ + 2;  // a whole flush begun after this moment
        ready = steps_[i].ready_after_flush && flushes_done_ >= steps_[i].ready_after_flush;
      }
      // Lagging: enough later steps ended and two flushes ran since (fast steps must not outrun
      // the flush period).
      if (!ready)
        ready = static_cast<int>(steps_.size() - 1 - i) >= opt_.max_lag_steps &&
                flushes_done_ >= steps_[i].flushes_at_end + 2;
      if (!ready) break;
      n_ready = i + 1;
    }
    if (n_ready == 0) return;

    attribution_input in;
    std::unordered_set<std::uint64_t> used;
    for (std::size_t i = 0; i < n_ready; ++i) {
      auto& p = steps_[i];
      for (auto& ms : p.spans) {
        in.spans.push_back(ms);
        for (auto seq : {ms.begin_marker, ms.end_marker}) {
          if (!seq) continue;
          auto it = markers_.find(seq);
          if (it != markers_.end()) {
            in.markers.push_back(it->second);
            used.insert(seq);
          }
        }
      }
      in.memory[p.step] = {p.memory.peak_allocated_bytes, p.memory.peak_reserved_bytes};
    }
    in.dropped[steps_.front().step] = dropped_since_.exchange(0);
    in.records.swap(records_);
    in.final_round = final;
    attribution_options ao;
    ao.top_kernels = opt_.top_kernels;
    ao.keep_activities = keep_activities_.load(std::memory_order_relaxed);
    attribution_output out = attribute(in, ao);
    if (opt_.round_tap) {
      try {
        opt_.round_tap(in, out);
      } catch (...) {
      }
    }
    records_ = std::move(out.leftover);
    for (auto seq : used) markers_.erase(seq);
    // Markers of scopes outside steps are never used: forget those older than the resolved ones.
    std::uint64_t max_used = 0;
    for (auto seq : used) max_used = std::max(max_used, seq);
    for (auto it = markers_.begin(); it != markers_.end();)
      it = it->first < max_used ? markers_.erase(it) : std::next(it);
    for (auto& r : out.reports) {
      bool was_sampled = true;
      for (std::size_t i = 0; i < n_ready; ++i)
        if (steps_[i].step == r.step) was_sampled = steps_[i].sampled;
      if (!was_sampled) {
        // No kernel records were taken: keep only what markers measured, never a silent zero.
        step_gpu_report q;
        q.step = r.step;
        q.kernels_measured = false;
        q.total.span_ns = r.total.span_ns;
        q.peak_allocated_bytes = r.peak_allocated_bytes;
        q.peak_reserved_bytes = r.peak_reserved_bytes;
        q.dropped_records = r.dropped_records;
        for (auto& ph : r.phases) {
          phase_gpu_facts f;
          f.kind = ph.kind;
          f.name = ph.name;
          f.microbatch = ph.microbatch;
          f.facts.span_ns = ph.facts.span_ns;
          q.phases.push_back(f);
        }
        r = std::move(q);
      }
      ready_.push_back(std::move(r));
    }
    steps_.erase(steps_.begin(), steps_.begin() + static_cast<std::ptrdiff_t>(n_ready));
  }

  cupti_options opt_;
  std::string why_;
  std::atomic<bool> running_{false};
  bool owns_instance_ = false;
  bool subscribed_ = false;
  bool clock_callback_ = false;
  detail::cupti_api api_;
  CUpti_SubscriberHandle subscriber_{};
  std::vector<CUpti_ActivityKind> enabled_;
  std::atomic<std::int64_t> clock_offset_{0};
  std::atomic<bool> keep_activities_{false};
  std::atomic<bool> step_traced_{true};  // the current step is recorded (always, without sampling)
  std::atomic<std::uint64_t> switches_{0};
  std::atomic<std::int64_t> switch_ns_{0};
  bool zeroed_buffers_ = false;

  // activity buffers
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<std::uint8_t[]>> storage_;
  std::vector<std::uint8_t*> pool_;
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> dropped_total_{0};
  std::atomic<std::uint64_t> dropped_since_{0};

  // markers
  std::mutex marker_mu_;
  std::vector<void*> marker_buffers_;
  std::uint64_t marker_seq_ = 0;
  std::atomic<std::uint64_t> issued_[detail::marker_window] = {};  // residue -> last seq issued

  // scope hooks
  std::mutex switch_mu_;           // records on/off (sampling)
  bool records_on_ = false;        // guarded by switch_mu_
  bool off_pending_ = false;       // guarded by switch_mu_: records go off once off_event_ completed
  std::uint64_t off_marker_ = 0;   // the recorded step's end marker behind which off_event_ waits
  cudaEvent_t off_event_ = nullptr;
  std::uint64_t off_flushed_marker_ = 0;  // state_mu_: records up to this marker were force-flushed
  mutable std::mutex hook_mu_;
  recording_budget budget_;                            // which steps are recorded (overhead_budget)
  detail::scope_pairing<open_marker, std::pair<std::uint64_t, std::uint64_t>> scopes_;  // begin/end marker seqs

  // parsing (CUPTI's thread)
  std::mutex parse_mu_;
  std::unordered_map<const char*, std::pair<std::string, const char*>> names_by_ptr_;
  std::unordered_set<std::string> names_;  // node-based: c_str() stays valid

  std::mutex inbox_mu_;
  std::vector<gpu_record> inbox_records_;
  std::vector<marker_time> inbox_markers_;

  // worker state
  std::mutex state_mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<pending_step> steps_;
  std::vector<gpu_record> records_;
  std::uint64_t flushes_done_ = 0;
  std::unordered_map<std::uint64_t, marker_time> markers_;
  std::vector<step_gpu_report> ready_;
  std::thread worker_;
};

/// What make_best_gpu_source tries, and the hooks both sources share.
struct gpu_source_options {
  bool cupti = true;               ///< try kernel attribution first
  cupti_options cupti_opts;        ///< its stream provider and memory sampler are overwritten below
  cuda_events_options events_opts;
  stream_provider current_stream;  ///< given to whichever source is made
  memory_sampler memory;           ///< given to whichever source is made
};

/// The best GPU source this process can have: CUPTI kernel attribution, else CUDA-event phase
/// timing (saying once why attribution is off), else nullptr when there is no GPU (saying so
/// once). Never throws, never hangs.
inline std::unique_ptr<gpu_source> make_best_gpu_source(gpu_source_options o = {}) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    const std::string why = e != cudaSuccess ? cudaGetErrorString(e) : "no devices";
    cudaGetLastError();
    report_once("gpu-none", "no CUDA device (" + why + "): GPU timing off, phases are timed on the CPU");
    return nullptr;
  }
  if (o.cupti) {
    o.cupti_opts.current_stream = o.current_stream;
    o.cupti_opts.memory = o.memory;
    auto c = std::make_unique<cupti_source>(o.cupti_opts);
    if (c->ok()) return c;
    report_once("gpu-cupti-off", "kernel attribution off: " + c->why() + "; using CUDA-event phase timing");
  }
  o.events_opts.current_stream = o.current_stream;
  o.events_opts.memory = o.memory;
  auto ev = std::make_unique<cuda_events_source>(o.events_opts);
  if (ev->ok()) return ev;
  report_once("gpu-events-off", "GPU timing off: " + ev->status() + "; phases are timed on the CPU");
  return nullptr;
}

TRACEML_END_NAMESPACE
