// traceml: the TRACEML_OUT session's LibTorch part. Linked in (src/session_torch.cpp, compiled once
// per build tree for every target that links a CUDA traceml::torch), it hands the session
// (session.hpp) LibTorch's current stream and caching-allocator sampler at static initialisation,
// which the GPU part (session_gpu.hpp) gives the GPU source: phases are timed on the stream the
// trainer launches on, and each step's peak memory is read. Without CUDA in LibTorch it registers
// nothing. Without CMake, include it in one source file of a program linked with LibTorch.
#pragma once
#include "traceml/config.hpp"
#if TRACEML_ENABLED
#include "traceml/session.hpp"
#include "traceml/torch_adapter.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

#if defined(TRACEML_TORCH_CUDA) && TRACEML_TORCH_CUDA
/// Registers LibTorch's stream and memory at static initialisation (once per program).
inline const bool session_torch_registered = [] {
  session_registry().current_stream = [] { return libtorch::current_stream_provider(); };
  session_registry().memory = [] { return libtorch::caching_allocator_sampler(); };
  return true;
}();
#endif

}  // namespace detail
TRACEML_END_NAMESPACE
#endif  // TRACEML_ENABLED
