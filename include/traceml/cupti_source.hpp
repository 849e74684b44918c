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
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "traceml/attribution.hpp"
#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/cuda_events_source.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/gpu_memory.hpp"
#include "traceml/gpu_source.hpp"
#include "traceml/kernel_name.hpp"

TRACEML_BEGIN_NAMESPACE

struct cupti_options {
  std::size_t buffer_bytes = std::size_t{4} << 20;  ///< one activity buffer (~20k kernel records)
  std::size_t buffer_count = 16;                    ///< preallocated; none is allocated later
  bool markers = true;            ///< boundary markers (exact attribution); off: by time only
  bool memcpy = true;             ///< MEMCPY records
  int flush_period_ms = 100;      ///< how often the worker asks CUPTI for finished records
  bool timestamp_callback = true; ///< let CUPTI stamp records with now_ns() directly when it can
  bool finalize = true;           ///< cuptiFinalize on destruction: no CUPTI cost afterwards
  std::size_t top_kernels = 10;
  int max_lag_steps = 8;          ///< resolve a step by time after this many later steps ended
  /// Kernel records on one step in N (1: every step). CUPTI's own per-launch cost is paid only on
  /// sampled steps; the others report kernels_measured = false (and, as measured on an H200 with
  /// CUDA 13.0, span_ns = -1: marker records did not come back while kernel records were off).
  /// See docs/attribution.md for the measured costs.
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
  explicit cupti_source(cupti_options o = {}) : opt_(std::move(o)) { start(); }

  ~cupti_source() override { stop(); }
  cupti_source(const cupti_source&) = delete;
  cupti_source& operator=(const cupti_source&) = delete;

  /// True when CUPTI tracing is running; otherwise why() says what failed.
  bool ok() const noexcept { return running_; }
  const std::string& why() const noexcept { return why_; }

  const char* name() const noexcept override { return "cupti"; }
  bool wants_scope_hooks() const noexcept override { return opt_.markers && running_; }

  /// Hot: one ~20 KB cudaMemsetAsync on the current stream (a few microseconds of CPU, about a
  /// microsecond of GPU) plus an uncontended lock. Micro-batch boundaries get no marker.
  void on_scope_begin(phase_kind kind, const char*, std::int32_t step, std::int32_t) noexcept override {
    if (kind == phase_kind::microbatch || !running_) return;
    if (kind == phase_kind::step && sampled(step)) set_kernel_records(true);
    open_marker m = enqueue_marker(current_stream());
    try {
      std::lock_guard<std::mutex> lock(hook_mu_);
      open_[std::this_thread::get_id()].push_back(m);
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
        auto& st = open_[std::this_thread::get_id()];
        if (st.empty()) return;
        b = st.back();
        st.pop_back();
      }
      open_marker e = b.seq ? enqueue_marker(b.stream) : open_marker{};
      if (r.kind == phase_kind::step && opt_.sample_every > 1 && sampled(r.step)) set_kernel_records(false);
      std::lock_guard<std::mutex> lock(hook_mu_);
      closed_[detail::span_key(r.thread, r.begin_ns)] = std::make_pair(b.seq, e.seq);
    } catch (...) {
    }
  }

  void keep_activities(bool on) override { keep_activities_.store(on, std::memory_order_relaxed); }

  /// Once per step, on the training thread: samples memory and hands the spans to the worker.
  void step_ended(std::int32_t step, const std::vector<span_record>& spans) override {
    if (!running_) return;
    pending_step p;
    p.step = step;
    p.sampled = sampled(step);
    if (opt_.memory) p.memory = opt_.memory();
    {
      std::lock_guard<std::mutex> lock(hook_mu_);
      for (auto& s : spans) {
        if (s.step != step || s.kind == phase_kind::microbatch) continue;
        marked_span ms;
        ms.span = s;
        auto it = closed_.find(detail::span_key(s.thread, s.begin_ns));
        if (it != closed_.end()) {
          ms.begin_marker = it->second.first;
          ms.end_marker = it->second.second;
          closed_.erase(it);
        }
        if (s.kind == phase_kind::step) p.end_marker = ms.end_marker;
        p.spans.push_back(ms);
      }
      closed_.clear();  // scopes outside this step: nothing to attribute them to
    }
    {
      std::lock_guard<std::mutex> lock(state_mu_);
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
    if (opt_.sample_every > 1) s += ", kernel records on 1 step in " + std::to_string(opt_.sample_every);
    s += ")";
    return s;
  }

  /// Records CUPTI dropped (buffers full or refused) since the start.
  std::uint64_t dropped_records() const noexcept { return dropped_total_.load(); }

 private:
  struct open_marker {
    std::uint64_t seq = 0;
    cudaStream_t stream = nullptr;
  };
  struct pending_step {
    std::int32_t step = -1;
    bool sampled = true;
    std::uint64_t ready_after_flush = 0;  // 0: successor's end marker not seen yet
    std::uint64_t end_marker = 0;
    memory_sample memory;
    std::vector<marked_span> spans;
  };

  bool sampled(std::int32_t step) const noexcept {
    return opt_.sample_every <= 1 || (step >= 0 && step % opt_.sample_every == 0);
  }

  /// Sampling: kernel and memcpy records on or off (memsets, hence markers, stay on). Training
  /// thread, once per sampled step.
  void set_kernel_records(bool on) noexcept {
    if (opt_.sample_every <= 1) return;
    for (auto k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY}) {
      if (k == CUPTI_ACTIVITY_KIND_MEMCPY && !opt_.memcpy) continue;
      (on ? api_.enable : api_.disable)(k);
    }
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

    pool_.reserve(opt_.buffer_count);
    try {
      for (std::size_t i = 0; i < opt_.buffer_count; ++i) {
        storage_.emplace_back(new std::uint8_t[opt_.buffer_bytes]);
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
    if (opt_.sample_every > 1) {
      // Enabled once above to learn whether CUPTI lets us; sampled steps switch them on again.
      api_.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      if (opt_.memcpy) api_.disable(CUPTI_ACTIVITY_KIND_MEMCPY);
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
      if (opt_.finalize && api_.finalize) api_.finalize();
    }
    for (auto& p : marker_buffers_)
      if (p) cudaFree(p);
    cudaGetLastError();
    if (owns_instance_) instance().store(nullptr);
    owns_instance_ = false;
    // Buffers are freed with storage_: CUPTI holds none after the flush and finalize above.
  }

  // ---- markers (training thread) --------------------------------------------------------------
  cudaStream_t current_stream() const noexcept {
    if (!opt_.current_stream) return nullptr;
    try {
      return static_cast<cudaStream_t>(opt_.current_stream());
    } catch (...) {
      return nullptr;
    }
  }

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
          gpu_record g;
          g.what = gpu_activity::type::kernel;
          g.begin_ns = to_now(k->start);
          g.end_ns = to_now(k->end);
          g.device = k->deviceId;
          g.stream = k->streamId;
          g.correlation = k->correlationId;
          g.graph = k->graphId;
          g.name = intern(k->name);
          recs.push_back(g);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          auto* m = reinterpret_cast<const detail::cupti_memcpy_record*>(a);
          gpu_record g;
          g.what = gpu_activity::type::memcpy;
          g.begin_ns = to_now(m->start);
          g.end_ns = to_now(m->end);
          g.device = m->deviceId;
          g.stream = m->streamId;
          g.correlation = m->correlationId;
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
          gpu_record g;
          g.what = gpu_activity::type::memset;
          g.begin_ns = to_now(m->start);
          g.end_ns = to_now(m->end);
          g.device = m->deviceId;
          g.stream = m->streamId;
          g.correlation = m->correlationId;
          g.bytes = b;
          g.name = "memset";
          recs.push_back(g);
          break;
        }
        default:
          break;
      }
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
      wake_.wait_until(lock, next_flush);
      if (stopping_) break;
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
      if (!ready && i + 1 < steps_.size() && steps_[i].end_marker && steps_[i + 1].end_marker) {
        if (!steps_[i].ready_after_flush && markers_.count(steps_[i].end_marker) &&
            markers_.count(steps_[i + 1].end_marker))
          steps_[i].ready_after_flush = flushes_done_ + 2;  // a whole flush begun after this moment
        ready = steps_[i].ready_after_flush && flushes_done_ >= steps_[i].ready_after_flush;
      }
      if (!ready) ready = static_cast<int>(steps_.size() - 1 - i) >= opt_.max_lag_steps;
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
  std::mutex hook_mu_;
  std::unordered_map<std::thread::id, std::vector<open_marker>> open_;
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> closed_;

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
