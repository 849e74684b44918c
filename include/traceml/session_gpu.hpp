// traceml: the TRACEML_OUT session's GPU part. Linked in (src/session_gpu.cpp, compiled once per
// build tree for every target that links traceml::cupti), it hands the session (session.hpp) the
// GPU source factory at static initialisation: the session then attaches make_best_gpu_source(),
// with LibTorch's current stream and caching allocator where the LibTorch part is linked too
// (session_torch.hpp). Without CMake, include it in one source file of a program built with the
// CUDA toolkit's headers.
#pragma once
#include "traceml/config.hpp"
#if TRACEML_ENABLED
#include <functional>
#include <memory>
#include <utility>

#include "traceml/gpu/source_factory.hpp"
#include "traceml/session.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

inline std::unique_ptr<gpu_source> make_session_gpu_source(std::function<void*()> current_stream,
                                                           memory_sampler memory) {
  gpu_source_options gpu;
  gpu.current_stream = std::move(current_stream);
  gpu.memory = std::move(memory);
  return make_best_gpu_source(gpu);
}

/// Registers the factory at static initialisation (once per program: an inline variable).
inline const bool session_gpu_registered = [] {
  session_registry().make_gpu_source = &make_session_gpu_source;
  return true;
}();

}  // namespace detail
TRACEML_END_NAMESPACE
#endif  // TRACEML_ENABLED
