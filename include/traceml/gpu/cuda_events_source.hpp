// traceml: GPU phase timing with CUDA events, for when CUPTI is off or unavailable.
//
// At each step and phase boundary an event from a preallocated pool is recorded on the boundary
// thread's current stream; a phase's GPU time (gpu_facts::span_ns) is the elapsed time between its
// two events: from when the stream reached the phase's first work to when it finished its last.
// Events are resolved with cudaEventQuery only: the training loop never waits for the GPU (the
// final collect may synchronize). Kernel counts, busy and idle time need CUPTI (cupti_source.hpp).
//
//   auto src = std::make_unique<traceml::cuda_events_source>();      // needs the CUDA runtime
//   profiler.set_gpu_source(std::move(src));
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/detail/scope_pairing.hpp"
#include "traceml/gpu/gpu_memory.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE

/// Where boundary markers go: the calling thread's current CUDA stream (a cudaStream_t). Empty:
/// the legacy default stream, which is LibTorch's default too. LibTorch users pass
/// traceml::libtorch::current_stream_provider() (torch_adapter.hpp).
using stream_provider = std::function<void*()>;

/// Device-level memory for programs without LibTorch: peak_reserved_bytes is the device memory in
/// use at step end (cudaMemGetInfo: every process on the device, not a peak); peak_allocated_bytes
/// is the peak of the device's default stream-ordered pool (cudaMallocAsync) when it was used,
/// else -1. Cost: two runtime calls per step.
inline memory_sampler cuda_device_memory_sampler(int device = -1) {
  return [device]() {
    memory_sample s;
    int dev = device;
    if (dev < 0 && cudaGetDevice(&dev) != cudaSuccess) return s;
    int prev = -1;
    cudaGetDevice(&prev);
    if (prev != dev) cudaSetDevice(dev);
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      s.peak_reserved_bytes = static_cast<std::int64_t>(total_b - free_b);
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess && pool) {
      std::uint64_t high = 0;
      if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high) == cudaSuccess && high > 0) {
        s.peak_allocated_bytes = static_cast<std::int64_t>(high);
        std::uint64_t zero = 0;
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero);
      }
    }
    if (prev >= 0 && prev != dev) cudaSetDevice(prev);
    cudaGetLastError();  // leave no sticky error behind for the training loop to trip over
    return s;
  };
}

namespace detail {

/// The stream `provider` names (the legacy default stream when it is empty or throws).
inline cudaStream_t stream_of(const stream_provider& provider) noexcept {
  if (!provider) return nullptr;
  try {
    return static_cast<cudaStream_t>(provider());
  } catch (...) {
    return nullptr;
  }
}

/// True while `stream` is being captured into a CUDA graph: recording a marker then would put it
/// into the graph. Cost: one runtime call (~100 ns).
inline bool stream_capturing(cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
    cudaGetLastError();
    return true;  // cannot tell: stay out of the stream
  }
  return st != cudaStreamCaptureStatusNone;
}

}  // namespace detail

struct cuda_events_options {
  std::size_t event_pool = 4096;   ///< events created up front (two per step/phase scope)
  stream_provider current_stream;  ///< empty: the legacy default stream
  memory_sampler memory;           ///< called at each step end; empty: no memory numbers
};

/// CUDA-event phase timing. Reports carry span_ns per phase and step (kernels_measured = false).
class cuda_events_source : public gpu_source {
 public:
  explicit cuda_events_source(cuda_events_options o = {}) : opt_(std::move(o)) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      cudaGetLastError();
      why_ = "no CUDA device";
      return;
    }
    free_.reserve(opt_.event_pool);
    for (std::size_t i = 0; i < opt_.event_pool; ++i) {
      cudaEvent_t e = nullptr;
      if (cudaEventCreateWithFlags(&e, cudaEventDefault) != cudaSuccess) {
        cudaGetLastError();
        break;
      }
      free_.push_back(e);
      all_.push_back(e);
    }
    if (free_.empty()) why_ = "could not create CUDA events";
  }

  ~cuda_events_source() override {
    for (auto e : all_) cudaEventDestroy(e);
    cudaGetLastError();
  }
  cuda_events_source(const cuda_events_source&) = delete;
  cuda_events_source& operator=(const cuda_events_source&) = delete;

  /// False when no event could be created (no device); status() says why.
  bool ok() const noexcept { return why_.empty(); }

  const char* name() const noexcept override { return "cuda-events"; }
  bool wants_scope_hooks() const noexcept override { return true; }

  /// Hot: one event record on the current stream (~1-2 us) and an uncontended lock.
  void on_scope_begin(phase_kind kind, const char*, std::int32_t, std::int32_t) noexcept override {
    if (kind == phase_kind::microbatch || !ok()) return;
    cudaStream_t s = current_stream();
    cudaEvent_t e = nullptr;
    if (!detail::stream_capturing(s)) e = take_and_record(s);
    try {
      std::lock_guard<std::mutex> lock(mu_);
      scopes_.begin(open_entry{e, s});
    } catch (...) {
    }
  }

  /// Hot: one event record on the stream of the matching begin (~1-2 us) and an uncontended lock.
  void on_scope_end(const span_record& r) noexcept override {
    if (r.kind == phase_kind::microbatch || !ok()) return;
    try {
      open_entry b{};
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!scopes_.end(b)) return;
      }
      cudaEvent_t e = nullptr;
      if (b.begin && !detail::stream_capturing(b.stream)) e = take_and_record(b.stream);
      std::lock_guard<std::mutex> lock(mu_);
      if (b.begin && !e) give_back(b.begin);
      scopes_.closed(r, closed_entry{e ? b.begin : nullptr, e});
    } catch (...) {
    }
  }

  void step_ended(std::int32_t step, const std::vector<span_record>& spans) override {
    pending_step p;
    p.step = step;
    if (opt_.memory) p.memory = opt_.memory();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : spans) {
      if (s.kind == phase_kind::microbatch || s.step != step) continue;
      p.spans.emplace_back(s, scopes_.take(s));
    }
    // Scopes that closed before this step and belong to none: their events go back to the pool.
    scopes_.drop_rest([this](const closed_entry& c) {
      give_back(c.begin);
      give_back(c.end);
    });
    pending_.push_back(std::move(p));
  }

  /// Resolves steps whose events completed (cudaEventQuery, no waiting); with `final`, waits.
  std::vector<step_gpu_report> collect(bool final) override {
    std::vector<step_gpu_report> out;
    std::lock_guard<std::mutex> lock(mu_);
    while (!pending_.empty()) {
      auto& p = pending_.front();
      bool ready = true;
      for (auto& sc : p.spans) {
        if (!sc.second.end) continue;
        cudaError_t q = final ? cudaEventSynchronize(sc.second.end) : cudaEventQuery(sc.second.end);
        if (q == cudaErrorNotReady) {
          ready = false;
          break;
        }
      }
      cudaGetLastError();
      if (!ready) break;
      out.push_back(resolve(p));
      pending_.erase(pending_.begin());
    }
    return out;
  }

  std::string status() const override {
    if (!ok()) return "GPU timing off: " + why_;
    return "CUDA-event phase timing (GPU time per phase; kernel attribution off)";
  }

 private:
  struct open_entry {
    cudaEvent_t begin = nullptr;
    cudaStream_t stream = nullptr;
  };
  struct closed_entry {
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
  };
  struct pending_step {
    std::int32_t step = -1;
    memory_sample memory;
    std::vector<std::pair<span_record, closed_entry>> spans;
  };

  cudaStream_t current_stream() const noexcept { return detail::stream_of(opt_.current_stream); }

  cudaEvent_t take_and_record(cudaStream_t s) noexcept {
    cudaEvent_t e = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (free_.empty()) {
        report_once("cuda-events-pool", "CUDA event pool exhausted (" + std::to_string(all_.size()) +
                                            " events): some phases are not GPU-timed; collect() more often or "
                                            "raise cuda_events_options::event_pool");
        return nullptr;
      }
      e = free_.back();
      free_.pop_back();
    }
    if (cudaEventRecord(e, s) != cudaSuccess) {
      cudaGetLastError();
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(e);
      return nullptr;
    }
    return e;
  }

  void give_back(cudaEvent_t e) {  // mu_ held
    if (e) free_.push_back(e);
  }

  step_gpu_report resolve(pending_step& p) {  // mu_ held
    step_gpu_report rep;
    rep.step = p.step;
    rep.kernels_measured = false;
    rep.peak_allocated_bytes = p.memory.peak_allocated_bytes;
    rep.peak_reserved_bytes = p.memory.peak_reserved_bytes;
    std::map<std::tuple<int, std::string, std::int32_t>, std::size_t> index;
    for (auto& sc : p.spans) {
      const span_record& s = sc.first;
      std::int64_t ns = -1;
      if (sc.second.begin && sc.second.end) {
        float ms = 0.f;
        if (cudaEventElapsedTime(&ms, sc.second.begin, sc.second.end) == cudaSuccess)
          ns = static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
        cudaGetLastError();
      }
      give_back(sc.second.begin);
      give_back(sc.second.end);
      if (s.kind == phase_kind::step) {
        rep.total.span_ns = ns;
        continue;
      }
      auto key = std::make_tuple(static_cast<int>(s.kind), std::string(s.name), s.microbatch);
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, rep.phases.size()).first;
        phase_gpu_facts f;
        f.kind = s.kind;
        f.name = s.name;
        f.microbatch = s.microbatch;
        rep.phases.push_back(f);
      }
      gpu_facts add;  // an untimed scope (ns = -1) leaves the entry as it is
      add.span_ns = ns;
      rep.phases[it->second].facts += add;
    }
    return rep;
  }

  cuda_events_options opt_;
  std::string why_;
  std::mutex mu_;
  std::vector<cudaEvent_t> all_;
  std::vector<cudaEvent_t> free_;
  detail::scope_pairing<open_entry, closed_entry> scopes_;
  std::vector<pending_step> pending_;
};

TRACEML_END_NAMESPACE
