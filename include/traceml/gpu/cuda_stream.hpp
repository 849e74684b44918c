// traceml: which CUDA stream a boundary goes on, and whether it may go there now. Shared by the
// event timer (event_timer.hpp) and CUPTI's boundary markers (boundary_markers.hpp).
#pragma once
#include <cuda_runtime_api.h>

#include <functional>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// Where boundary markers and events go: the calling thread's current CUDA stream (a cudaStream_t).
/// Empty: the legacy default stream, which is LibTorch's default too. LibTorch users pass
/// traceml::libtorch::current_stream_provider() (torch_adapter.hpp).
using stream_provider = std::function<void*()>;

namespace detail {

/// The stream `provider` names (the legacy default stream when it is empty or throws).
inline cudaStream_t stream_of(const stream_provider& provider) noexcept {
  if (!provider) return nullptr;
  try {
    return static_cast<cudaStream_t>(provider());
  } catch (...) {
    return nullptr;  // a provider that throws means "no stream of its own": the default stream
  }
}

/// True while `stream` is being captured into a CUDA graph: recording a marker or an event then
/// would put it into the graph. Cost: one runtime call (~100 ns).
inline bool stream_capturing(cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
    cudaGetLastError();
    return true;  // cannot tell: stay out of the stream
  }
  return st != cudaStreamCaptureStatusNone;
}

}  // namespace detail
TRACEML_END_NAMESPACE
