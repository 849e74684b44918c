// traceml: the GPU's own clock at a point of a stream. A one-thread kernel reads %globaltimer (the
// clock PM samples are stamped with) and writes it into pinned host memory; once the stream has
// passed that point the host reads the value. With one stamp per step and the step's CUDA events
// (elapsed times from the step's first event), every phase gets a window on the GPU's clock, which
// is what hardware-counter samples (pm_samples.hpp) are mapped onto.
//
// The kernel is PTX text compiled by the driver at first use (no CUDA compiler in the build), and
// the driver API is resolved with dlopen: a program built with it still runs without a GPU. Cost of
// a stamp: one kernel launch (~2-3 us of CPU, ~2 us of GPU). Never inside a CUDA-graph capture.
//
//   traceml::gpu_clock clock(64);
//   int slot = clock.stamp(stream);                    // at the step's begin
//   ... later, once the stream passed it ...
//   std::int64_t t; if (clock.read(slot, t)) use(t);   // ns on the GPU's clock; slot released
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/cuda_runtime.hpp"
#include "traceml/gpu/cuda_stream.hpp"

TRACEML_BEGIN_NAMESPACE

class gpu_clock {
 public:
  /// `slots`: stamps in flight at once (one per step whose GPU work has not finished).
  explicit gpu_clock(std::size_t slots = 64) : slots_(slots) {}
  ~gpu_clock() {
    if (host_) detail::rt::cudaFreeHost(const_cast<std::uint64_t*>(host_));
    if (module_ && unload_) unload_(module_);
    detail::rt::cudaGetLastError();
  }
  gpu_clock(const gpu_clock&) = delete;
  gpu_clock& operator=(const gpu_clock&) = delete;

  /// Hot (once per step): launches the stamp on `stream`; the slot to read later, or -1 (capturing;
  /// no slot free or the clock unavailable: why() says why).
  int stamp(cudaStream_t stream) noexcept {
    if (!ready() || detail::stream_capturing(stream)) return -1;
    int slot = -1;
    {
      detail::lock_guard lock(mu_);
      if (free_.empty()) {
        if (why_.empty()) why_ = "all " + std::to_string(slots_) + " clock stamps in flight (steps not yet delivered)";
        return -1;
      }
      slot = free_.back();
      free_.pop_back();
    }
    host_[slot] = 0;
    void* out = static_cast<void*>(device_ + slot);
    void* args[] = {&out};
    if (launch_(function_, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(stream), args, nullptr) != CUDA_SUCCESS) {
      release(slot);
      return -1;
    }
    return slot;
  }

  /// The stamp's GPU time once the stream passed it (the slot goes back to the pool); false while
  /// it has not run. Call after an event recorded behind it completed.
  bool read(int slot, std::int64_t& ns) noexcept {
    if (slot < 0 || !host_) return false;
    const std::uint64_t v = host_[slot];
    if (v == 0) return false;
    ns = static_cast<std::int64_t>(v);
    release(slot);
    return true;
  }
  /// The stamp's GPU time if it ran, keeping the slot (read() later takes it).
  bool peek(int slot, std::int64_t& ns) const noexcept {
    if (slot < 0 || !host_) return false;
    const std::uint64_t v = host_[slot];
    if (v == 0) return false;
    ns = static_cast<std::int64_t>(v);
    return true;
  }
  void release(int slot) noexcept {
    if (slot < 0) return;
    detail::lock_guard lock(mu_);
    free_.push_back(slot);
  }

  /// Keeps the GPU busy for `ns`, every SM with one block of 128 threads spinning on the clock (all
  /// resident at once: the burst lasts `ns`, not a multiple), on `stream`, and waits for it: the
  /// burst's begin and end on the GPU's clock. For calibration (pm_sampling_source.hpp), never on a
  /// hot path. False when the clock is unavailable.
  bool busy_burst(cudaStream_t stream, std::int64_t ns, std::int64_t& begin_ns, std::int64_t& end_ns) noexcept {
    if (!ready() || !spin_ || detail::stream_capturing(stream)) return false;
    int device = 0, sms = 1;
    if (detail::rt::cudaGetDevice(&device) != cudaSuccess ||
        detail::rt::cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms < 1)
      sms = 1;
    detail::rt::cudaGetLastError();
    burst_host_[0] = burst_host_[1] = 0;
    void* out = static_cast<void*>(burst_device_);
    auto length = static_cast<std::uint64_t>(ns);
    void* args[] = {&out, &length};
    if (launch_(spin_, static_cast<unsigned>(sms), 1, 1, 128, 1, 1, 0, reinterpret_cast<CUstream>(stream), args,
                nullptr) != CUDA_SUCCESS)
      return false;
    const bool ok = detail::rt::cudaStreamSynchronize(stream) == cudaSuccess;
    detail::rt::cudaGetLastError();
    begin_ns = static_cast<std::int64_t>(burst_host_[0]);
    end_ns = static_cast<std::int64_t>(burst_host_[1]);
    return ok && begin_ns > 0 && end_ns > begin_ns;
  }

  /// "" while usable (or not tried yet).
  const std::string& why() const noexcept { return why_; }

 private:
  using load_fn = CUresult (*)(CUmodule*, const void*);
  using get_fn = CUresult (*)(CUfunction*, CUmodule, const char*);
  using launch_fn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 CUstream, void**, void**);
  using unload_fn = CUresult (*)(CUmodule);

  /// Loads the driver entry points, the kernel and the pinned slots on first use (the caller's
  /// current context is the training's).
  bool ready() noexcept {
    if (tried_) return function_ != nullptr;
    tried_ = true;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return fail("no NVIDIA driver library (libcuda.so.1)");
    auto load = reinterpret_cast<load_fn>(dlsym(h, "cuModuleLoadData"));
    auto get = reinterpret_cast<get_fn>(dlsym(h, "cuModuleGetFunction"));
    launch_ = reinterpret_cast<launch_fn>(dlsym(h, "cuLaunchKernel"));
    unload_ = reinterpret_cast<unload_fn>(dlsym(h, "cuModuleUnload"));
    if (!load || !get || !launch_ || !unload_) return fail("driver library without the module API");
    // traceml_gpu_clock: one thread stores %globaltimer (ns) to the address it is given.
    // traceml_gpu_spin: every thread spins until `ns` have passed on the clock; the first thread of
    // the first block stores the clock before and after.
    static const char ptx[] =
        ".version 7.0\n.target sm_70\n.address_size 64\n"
        ".visible .entry traceml_gpu_clock(.param .u64 out)\n{\n"
        "  .reg .b64 %rd<3>;\n  ld.param.u64 %rd1, [out];\n  mov.u64 %rd2, %globaltimer;\n"
        "  st.volatile.global.u64 [%rd1], %rd2;\n  ret;\n}\n"
        ".visible .entry traceml_gpu_spin(.param .u64 out, .param .u64 ns)\n{\n"
        "  .reg .b64 %rd<6>;\n  .reg .b32 %r<4>;\n  .reg .pred %p, %q;\n"
        "  ld.param.u64 %rd1, [out];\n  ld.param.u64 %rd2, [ns];\n"
        "  mov.u32 %r1, %ctaid.x;\n  mov.u32 %r2, %tid.x;\n  or.b32 %r3, %r1, %r2;\n  setp.eq.u32 %q, %r3, 0;\n"
        "  mov.u64 %rd3, %globaltimer;\n  @%q st.volatile.global.u64 [%rd1], %rd3;\n  add.u64 %rd4, %rd3, %rd2;\n"
        "SPIN:\n  mov.u64 %rd5, %globaltimer;\n  setp.lt.u64 %p, %rd5, %rd4;\n  @%p bra SPIN;\n"
        "  @%q st.volatile.global.u64 [%rd1+8], %rd5;\n  ret;\n}\n";
    if (load(&module_, ptx) != CUDA_SUCCESS) return fail("the driver could not compile the clock kernel");
    if (get(&function_, module_, "traceml_gpu_clock") != CUDA_SUCCESS) return fail("clock kernel not found");
    if (get(&spin_, module_, "traceml_gpu_spin") != CUDA_SUCCESS) spin_ = nullptr;  // only calibration needs it
    void* host = nullptr;
    if (detail::rt::cudaHostAlloc(&host, (slots_ + 2) * sizeof(std::uint64_t), cudaHostAllocMapped) != cudaSuccess)
      return fail("no pinned host memory for the clock stamps");
    host_ = static_cast<volatile std::uint64_t*>(host);
    void* dev = nullptr;
    if (detail::rt::cudaHostGetDevicePointer(&dev, host, 0) != cudaSuccess)
      return fail("pinned memory not mapped to the device");
    device_ = static_cast<std::uint64_t*>(dev);
    {
      detail::lock_guard lock(mu_);
      for (std::size_t i = slots_; i > 0; --i) free_.push_back(static_cast<int>(i - 1));
    }
    // The last two words of the pinned block belong to the burst (begin, end).
    burst_host_ = host_ + slots_;
    burst_device_ = device_ + slots_;
    return true;
  }
  bool fail(const char* why) noexcept {
    why_ = why;
    function_ = nullptr;
    detail::rt::cudaGetLastError();
    return false;
  }

  std::size_t slots_;
  bool tried_ = false;
  std::string why_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  CUfunction spin_ = nullptr;
  launch_fn launch_ = nullptr;
  unload_fn unload_ = nullptr;
  volatile std::uint64_t* host_ = nullptr;
  std::uint64_t* device_ = nullptr;
  volatile std::uint64_t* burst_host_ = nullptr;
  std::uint64_t* burst_device_ = nullptr;
  detail::mutex mu_;
  std::vector<int> free_ TRACEML_GUARDED_BY(mu_);
};

TRACEML_END_NAMESPACE
