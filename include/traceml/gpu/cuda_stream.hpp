// traceml: which CUDA stream a boundary goes on, and whether it may go there now. Shared by the
// event timer (event_timer.hpp) and CUPTI's boundary markers (boundary_markers.hpp).
#pragma once
#include <cuda_runtime_api.h>

#include <exception>
#include <functional>
#include <string>

#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/gpu/cuda_runtime.hpp"

TRACEML_BEGIN_NAMESPACE

/// Where boundary markers and events go: the calling thread's current CUDA stream (a cudaStream_t).
/// Empty: the legacy default stream, which is LibTorch's default too. LibTorch users pass
/// traceml::libtorch::current_stream_provider() (torch_adapter.hpp).
using stream_provider = std::function<void*()>;

namespace detail {

/// Says once that a stream provider threw, and what the fallback costs: work the trainer put on
/// another stream is then bracketed by boundaries on the default stream, which can misplace it.
inline void report_stream_provider_threw(const char* what) noexcept {
  try {
    report_once("gpu-stream-provider", std::string("the CUDA stream provider threw (") + what +
                                           "); boundaries go on the legacy default stream, so GPU work on other "
                                           "streams may be placed in the wrong phase");
  } catch (...) {
    // No memory to build the message: the fallback stands, unsaid, rather than end the process.
  }
}

/// The stream `provider` names (the legacy default stream when it is empty or throws; a throw is
/// said once, since the default stream can misplace the boundaries of work on other streams).
inline cudaStream_t stream_of(const stream_provider& provider) noexcept {
  if (!provider) return nullptr;
  try {
    return static_cast<cudaStream_t>(provider());
  } catch (const std::exception& e) {
    report_stream_provider_threw(e.what());
  } catch (...) {
    report_stream_provider_threw("not a std::exception");
  }
  return nullptr;
}

/// True while `stream` is being captured into a CUDA graph: recording a marker or an event then
/// would put it into the graph. Cost: one runtime call (~100 ns).
inline bool stream_capturing(cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (detail::rt::cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
    detail::rt::cudaGetLastError();
    return true;  // cannot tell: stay out of the stream
  }
  return st != cudaStreamCaptureStatusNone;
}

}  // namespace detail
TRACEML_END_NAMESPACE
