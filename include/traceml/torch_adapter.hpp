// traceml: the LibTorch adapter. Streams, synchronization and the caching allocator's memory
// statistics, behind one small API that builds against LibTorch 1.13 (CPU-only builds included)
// and LibTorch 2.x with CUDA.
//
//   #include <traceml/torch_adapter.hpp>
//   traceml::gpu_source_options o;                                 // gpu/source_factory.hpp
//   o.current_stream = traceml::libtorch::current_stream_provider();
//   o.memory = traceml::libtorch::caching_allocator_sampler();
//
// For a schedule sweep (sweep.hpp): is_out_of_memory() recognises LibTorch's out-of-memory errors
// (1.13 and 2.x), release_cached_memory() empties the caching allocator between trials, and
// device_memory_bytes() gives the memory the headroom is of.
//
// CUDA parts are compiled when TRACEML_TORCH_CUDA is 1. CMake's traceml::torch target sets it from
// the LibTorch it found; without CMake define it yourself. It defaults to 0 because the c10/cuda
// headers alone prove nothing: Debian's CPU-only LibTorch ships them without libc10_cuda.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <string>

#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/gpu/gpu_memory.hpp"

#ifndef TRACEML_TORCH_CUDA
#define TRACEML_TORCH_CUDA 0
#endif

#if TRACEML_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

TRACEML_BEGIN_NAMESPACE
namespace libtorch {

/// True when this LibTorch has CUDA and a device is visible. Cost: a cached query.
inline bool cuda_available() {
#if TRACEML_TORCH_CUDA
  return ::torch::cuda::is_available();
#else
  return false;
#endif
}

/// The calling thread's current CUDA stream (a cudaStream_t) on the current device; nullptr (the
/// legacy default stream) without CUDA. Cost: a thread-local read in c10.
inline void* current_stream() noexcept {
#if TRACEML_TORCH_CUDA
  try {
    return static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream());
  } catch (...) {
    return nullptr;
  }
#else
  return nullptr;
#endif
}

/// current_stream() as the stream_provider GPU sources take (markers go where LibTorch launches).
inline std::function<void*()> current_stream_provider() {
  return [] { return current_stream(); };
}

/// Wait for all work on `device` (-1: the current one). A CPU-GPU sync point: for warm-up,
/// measurement boundaries and the end of a run, never inside a profiled step. No-op without CUDA.
inline void synchronize(int device = -1) {
#if TRACEML_TORCH_CUDA
  if (cuda_available()) ::torch::cuda::synchronize(device);
#else
  (void)device;
#endif
}

/// Peak bytes held by tensors and reserved by LibTorch's caching allocator since the last reset.
struct allocator_peaks {
  std::int64_t allocated = -1;
  std::int64_t reserved = -1;
};

/// Read the caching allocator's peaks for `device` (-1: current) and optionally reset them, so the
/// next read covers only what happened since. {-1, -1} without CUDA. Cost: a lock in c10, ~1 us.
inline allocator_peaks read_allocator_peaks(int device = -1, bool reset = true) {
  allocator_peaks p;
#if TRACEML_TORCH_CUDA
  if (!cuda_available()) return p;
  try {
    const int dev = device >= 0 ? device : static_cast<int>(c10::cuda::current_device());
    // Index 0 is StatType::AGGREGATE in every LibTorch that has these statistics.
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(dev));
    p.allocated = static_cast<std::int64_t>(stats.allocated_bytes[0].peak);
    p.reserved = static_cast<std::int64_t>(stats.reserved_bytes[0].peak);
    if (reset) c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(dev));
  } catch (...) {
    p = allocator_peaks{};
  }
#else
  (void)device;
  (void)reset;
#endif
  return p;
}

/// A memory_sampler over the caching allocator: per-step peaks, reset at each step end. Empty
/// (no sampling) when LibTorch has no CUDA, so reports say "unknown" rather than 0.
inline memory_sampler caching_allocator_sampler(int device = -1) {
  if (!cuda_available()) return memory_sampler{};
  return [device]() {
    const allocator_peaks p = read_allocator_peaks(device, true);
    memory_sample s;
    s.peak_allocated_bytes = p.allocated;
    s.peak_reserved_bytes = p.reserved;
    return s;
  };
}

/// Whether `e` says that memory ran out: c10::OutOfMemoryError (what the CUDA caching allocator
/// throws in LibTorch 2.x), a c10::Error whose message says so (LibTorch 1.13's CUDA allocator:
/// "CUDA out of memory"; the CPU allocator: "not enough memory", "can't allocate memory"; cuBLAS
/// failing to allocate its workspace on a full device: "CUBLAS_STATUS_ALLOC_FAILED"), or
/// std::bad_alloc. For traceml::sweep_options::is_out_of_memory. Cost: a dynamic_cast and a few
/// substring searches.
inline bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) || dynamic_cast<const std::bad_alloc*>(&e)) return true;
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  const std::string message = c10_error ? c10_error->msg() : e.what();
  for (const char* sign : {"out of memory", "not enough memory", "can't allocate memory", "CUBLAS_STATUS_ALLOC_FAILED"})
    if (message.find(sign) != std::string::npos) return true;
  return false;
}

/// Gives the caching allocator's unused blocks back to the device and starts its peak statistics
/// afresh, so that what runs next (the next sweep candidate) starts as if it ran first. A
/// CPU-GPU sync point; no-op without CUDA. For traceml::sweep_options::release_memory.
inline void release_cached_memory(int device = -1) {
#if TRACEML_TORCH_CUDA
  if (!cuda_available()) return;
  ::torch::cuda::synchronize(device);
  c10::cuda::CUDACachingAllocator::emptyCache();
  (void)read_allocator_peaks(device, /*reset=*/true);
#else
  (void)device;
#endif
}

/// Total memory of `device` (-1: the current one) in bytes; -1 without CUDA. For
/// traceml::sweep_options::device_memory_bytes (the headroom of each candidate's peak).
inline std::int64_t device_memory_bytes(int device = -1) {
#if TRACEML_TORCH_CUDA
  if (!cuda_available()) return -1;
  try {
    const int dev = device >= 0 ? device : static_cast<int>(c10::cuda::current_device());
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) return -1;
    return static_cast<std::int64_t>(p.totalGlobalMem);
  } catch (const c10::Error& e) {
    report_once("torch-device-memory",
                std::string("cannot read the device's memory size: ") + e.what_without_backtrace());
    return -1;
  }
#else
  (void)device;
  return -1;
#endif
}

}  // namespace libtorch
TRACEML_END_NAMESPACE
