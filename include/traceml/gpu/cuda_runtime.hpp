// traceml: the CUDA runtime entry points traceml uses, resolved at run time with dlopen/dlsym as
// CUPTI's are (cupti_api.hpp). A program linked with traceml::cupti therefore has no NEEDED
// libcudart: it starts where no CUDA runtime is installed, and its GPU parts say once why they are
// off (check_cuda_device() gives the reason). In a LibTorch process the runtime LibTorch loaded is
// the one used (two runtimes in one process would each keep their own state).
//
// The functions keep the runtime's names and signatures, in traceml::detail::rt, so a call reads
// as the runtime's (`rt::cudaEventRecord(event, stream)`); each looks its symbol up once and, when
// the runtime could not be loaded, returns cudaErrorSharedObjectInitFailed (cudaGetErrorString of
// which then says why). Symbols are looked up under the names the runtime header maps them to
// (cudaEventRecord_ptsz with a per-thread default stream), as a linked call would resolve them.
#pragma once
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <string>

#include "traceml/config.hpp"

#ifndef TRACEML_CUDART_LIBRARY  // the runtime the build found (traceml_components.cmake); tried after a loaded one
#define TRACEML_CUDART_LIBRARY ""
#endif

// The header's name for a function (a macro may rename it), as a string for dlsym.
#define TRACEML_CUDART_SYMBOL_(name) #name
#define TRACEML_CUDART_SYMBOL(name) TRACEML_CUDART_SYMBOL_(name)

// Every runtime function traceml calls. Add one here, in library, and a wrapper below.
// clang-format off
#define TRACEML_CUDART_FUNCTIONS(X) \
  X(cudaGetLastError) \
  X(cudaGetErrorString) \
  X(cudaGetDeviceCount) \
  X(cudaGetDevice) \
  X(cudaSetDevice) \
  X(cudaDriverGetVersion) \
  X(cudaRuntimeGetVersion) \
  X(cudaGetDeviceProperties) \
  X(cudaDeviceGetAttribute) \
  X(cudaDeviceSynchronize) \
  X(cudaStreamSynchronize) \
  X(cudaStreamIsCapturing) \
  X(cudaEventCreateWithFlags) \
  X(cudaEventDestroy) \
  X(cudaEventRecord) \
  X(cudaEventQuery) \
  X(cudaEventSynchronize) \
  X(cudaEventElapsedTime) \
  X(cudaMalloc) \
  X(cudaFree) \
  X(cudaHostAlloc) \
  X(cudaFreeHost) \
  X(cudaHostGetDevicePointer) \
  X(cudaMemsetAsync) \
  X(cudaMemGetInfo) \
  X(cudaDeviceGetDefaultMemPool) \
  X(cudaMemPoolGetAttribute) \
  X(cudaMemPoolSetAttribute)
// clang-format on

TRACEML_BEGIN_NAMESPACE
namespace detail {
namespace rt {

/// The loaded runtime: its entry points (null when it was not found) and, when it was not, why.
/// Each signature is spelled out: <cuda_runtime.h> (which LibTorch includes) overloads some of them
/// with templates, so `decltype(&::cudaMalloc)` would not name one.
struct library {
  using error = cudaError_t;
  error(CUDARTAPI* cudaGetLastError)() = nullptr;
  const char*(CUDARTAPI* cudaGetErrorString)(cudaError_t) = nullptr;
  error(CUDARTAPI* cudaGetDeviceCount)(int*) = nullptr;
  error(CUDARTAPI* cudaGetDevice)(int*) = nullptr;
  error(CUDARTAPI* cudaSetDevice)(int) = nullptr;
  error(CUDARTAPI* cudaDriverGetVersion)(int*) = nullptr;
  error(CUDARTAPI* cudaRuntimeGetVersion)(int*) = nullptr;
  error(CUDARTAPI* cudaGetDeviceProperties)(cudaDeviceProp*, int) = nullptr;
  error(CUDARTAPI* cudaDeviceGetAttribute)(int*, cudaDeviceAttr, int) = nullptr;
  error(CUDARTAPI* cudaDeviceSynchronize)() = nullptr;
  error(CUDARTAPI* cudaStreamSynchronize)(cudaStream_t) = nullptr;
  error(CUDARTAPI* cudaStreamIsCapturing)(cudaStream_t, cudaStreamCaptureStatus*) = nullptr;
  error(CUDARTAPI* cudaEventCreateWithFlags)(cudaEvent_t*, unsigned) = nullptr;
  error(CUDARTAPI* cudaEventDestroy)(cudaEvent_t) = nullptr;
  error(CUDARTAPI* cudaEventRecord)(cudaEvent_t, cudaStream_t) = nullptr;
  error(CUDARTAPI* cudaEventQuery)(cudaEvent_t) = nullptr;
  error(CUDARTAPI* cudaEventSynchronize)(cudaEvent_t) = nullptr;
  error(CUDARTAPI* cudaEventElapsedTime)(float*, cudaEvent_t, cudaEvent_t) = nullptr;
  error(CUDARTAPI* cudaMalloc)(void**, size_t) = nullptr;
  error(CUDARTAPI* cudaFree)(void*) = nullptr;
  error(CUDARTAPI* cudaHostAlloc)(void**, size_t, unsigned) = nullptr;
  error(CUDARTAPI* cudaFreeHost)(void*) = nullptr;
  error(CUDARTAPI* cudaHostGetDevicePointer)(void**, void*, unsigned) = nullptr;
  error(CUDARTAPI* cudaMemsetAsync)(void*, int, size_t, cudaStream_t) = nullptr;
  error(CUDARTAPI* cudaMemGetInfo)(size_t*, size_t*) = nullptr;
  error(CUDARTAPI* cudaDeviceGetDefaultMemPool)(cudaMemPool_t*, int) = nullptr;
  error(CUDARTAPI* cudaMemPoolGetAttribute)(cudaMemPool_t, cudaMemPoolAttr, void*) = nullptr;
  error(CUDARTAPI* cudaMemPoolSetAttribute)(cudaMemPool_t, cudaMemPoolAttr, void*) = nullptr;
  void* handle = nullptr;
  std::string why;  ///< empty when loaded
};

/// The runtime of this header's major version (struct layouts change between majors).
inline std::string runtime_name() { return "libcudart.so." + std::to_string(CUDART_VERSION / 1000); }

/// The runtime called `name`: one already in the process first (LibTorch's), then `path` (the one
/// the build found), then by its name on the loader's path.
inline library load_library(const std::string& name = runtime_name(), const char* path = TRACEML_CUDART_LIBRARY) {
  library lib;
  lib.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!lib.handle && path && *path) lib.handle = dlopen(path, RTLD_NOW);
  if (!lib.handle) lib.handle = dlopen(name.c_str(), RTLD_NOW);
  if (!lib.handle) {
    const char* e = dlerror();
    lib.why = "no CUDA runtime (" + (e ? std::string(e) : name) + "; install the CUDA " +
              std::to_string(CUDART_VERSION / 1000) + " runtime, or a CUDA build of LibTorch, or put " + name +
              " on LD_LIBRARY_PATH)";
    return lib;
  }
  std::string missing;
#define TRACEML_CUDART_RESOLVE(name)                                                               \
  lib.name = reinterpret_cast<decltype(lib.name)>(dlsym(lib.handle, TRACEML_CUDART_SYMBOL(name))); \
  if (!lib.name) missing += std::string(missing.empty() ? "" : ", ") + TRACEML_CUDART_SYMBOL(name);
  TRACEML_CUDART_FUNCTIONS(TRACEML_CUDART_RESOLVE)
#undef TRACEML_CUDART_RESOLVE
  if (!missing.empty()) {  // an older runtime than the header: none of it is used, rather than half
    lib = library{};
    lib.why = "the CUDA runtime " + name + " lacks " + missing + " (a runtime older than this build's CUDA " +
              std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) + " headers)";
  }
  return lib;
}

/// Loaded on first use, once per process (a function-local static: one guarded load per call after).
inline const library& runtime() {
  static const library lib = load_library();
  return lib;
}

/// Why the runtime could not be loaded; empty when it was.
inline const std::string& runtime_missing() { return runtime().why; }

/// What every wrapper returns when the runtime is missing.
inline constexpr cudaError_t missing_runtime_error = cudaErrorSharedObjectInitFailed;

#define TRACEML_CUDART_CALL(name, ...) return runtime().name ? runtime().name(__VA_ARGS__) : missing_runtime_error

inline cudaError_t cudaGetLastError() {
  return runtime().cudaGetLastError ? runtime().cudaGetLastError() : missing_runtime_error;
}
inline const char* cudaGetErrorString(cudaError_t e) {
  if (runtime().cudaGetErrorString) return runtime().cudaGetErrorString(e);
  return runtime().why.c_str();
}
inline cudaError_t cudaGetDeviceCount(int* n) { TRACEML_CUDART_CALL(cudaGetDeviceCount, n); }
inline cudaError_t cudaGetDevice(int* device) { TRACEML_CUDART_CALL(cudaGetDevice, device); }
inline cudaError_t cudaSetDevice(int device) { TRACEML_CUDART_CALL(cudaSetDevice, device); }
inline cudaError_t cudaDriverGetVersion(int* v) { TRACEML_CUDART_CALL(cudaDriverGetVersion, v); }
inline cudaError_t cudaRuntimeGetVersion(int* v) { TRACEML_CUDART_CALL(cudaRuntimeGetVersion, v); }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  TRACEML_CUDART_CALL(cudaGetDeviceProperties, p, device);
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int device) {
  TRACEML_CUDART_CALL(cudaDeviceGetAttribute, v, a, device);
}
inline cudaError_t cudaDeviceSynchronize() {
  return runtime().cudaDeviceSynchronize ? runtime().cudaDeviceSynchronize() : missing_runtime_error;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) { TRACEML_CUDART_CALL(cudaStreamSynchronize, s); }
inline cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  TRACEML_CUDART_CALL(cudaStreamIsCapturing, s, status);
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  TRACEML_CUDART_CALL(cudaEventCreateWithFlags, e, flags);
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { TRACEML_CUDART_CALL(cudaEventDestroy, e); }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr) {
  TRACEML_CUDART_CALL(cudaEventRecord, e, s);
}
inline cudaError_t cudaEventQuery(cudaEvent_t e) { TRACEML_CUDART_CALL(cudaEventQuery, e); }
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) { TRACEML_CUDART_CALL(cudaEventSynchronize, e); }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  TRACEML_CUDART_CALL(cudaEventElapsedTime, ms, a, b);
}
inline cudaError_t cudaMalloc(void** p, size_t bytes) { TRACEML_CUDART_CALL(cudaMalloc, p, bytes); }
inline cudaError_t cudaFree(void* p) { TRACEML_CUDART_CALL(cudaFree, p); }
inline cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned flags) {
  TRACEML_CUDART_CALL(cudaHostAlloc, p, bytes, flags);
}
inline cudaError_t cudaFreeHost(void* p) { TRACEML_CUDART_CALL(cudaFreeHost, p); }
inline cudaError_t cudaHostGetDevicePointer(void** dev, void* host, unsigned flags) {
  TRACEML_CUDART_CALL(cudaHostGetDevicePointer, dev, host, flags);
}
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s = nullptr) {
  TRACEML_CUDART_CALL(cudaMemsetAsync, p, value, bytes, s);
}
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  TRACEML_CUDART_CALL(cudaMemGetInfo, free_bytes, total);
}
inline cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  TRACEML_CUDART_CALL(cudaDeviceGetDefaultMemPool, pool, device);
}
inline cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr a, void* v) {
  TRACEML_CUDART_CALL(cudaMemPoolGetAttribute, pool, a, v);
}
inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr a, void* v) {
  TRACEML_CUDART_CALL(cudaMemPoolSetAttribute, pool, a, v);
}
#undef TRACEML_CUDART_CALL

}  // namespace rt
}  // namespace detail
TRACEML_END_NAMESPACE
