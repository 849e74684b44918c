// traceml: the CUPTI entry points traceml uses, resolved at run time with dlopen/dlsym, so that a
// program built with the CUPTI headers still runs where the library is missing. Used by the
// activity reader (cupti_reader.hpp) only.
#pragma once
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE
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

/// Set once the process's PM sampler runs (pm_sampler.hpp): from then on nothing may cuptiFinalize,
/// which destroys every CUPTI resource, the sampling object its decoding thread uses included.
inline std::atomic<bool>& pm_sampling_live() {
  static std::atomic<bool> live{false};
  return live;
}

/// The CUPTI library, resolved once per caller: a CUPTI already in the process first (LibTorch's
/// profiler links one; two copies of CUPTI in one process fight over the driver's tool interface),
/// then `path`, the one the build found, and the usual names. nullptr with `why` set otherwise.
inline void* open_cupti_library(const char* path, std::string& why) {
  const char* names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
  void* handle = nullptr;
  for (const char* n : names)
    if (!handle) handle = dlopen(n, RTLD_NOW | RTLD_NOLOAD);
  if (!handle && path && *path) handle = dlopen(path, RTLD_NOW);
  if (!handle && *TRACEML_CUPTI_LIBRARY) handle = dlopen(TRACEML_CUPTI_LIBRARY, RTLD_NOW);
  for (const char* n : names)
    if (!handle) handle = dlopen(n, RTLD_NOW);
  if (handle) return handle;
  const char* e = dlerror();
  const std::string err = e ? e : "libcupti.so";
  // A CUPTI that needs the driver's library cannot load without it: that is a missing driver,
  // not a missing CUPTI, and installing the toolkit again would not help.
  if (err.find("libcuda.so") != std::string::npos)
    why = "no NVIDIA driver (CUPTI could not load the driver's library: " + err + ")";
  else
    why = "CUPTI library not found (" + err + "; install the CUDA toolkit's CUPTI or put it on LD_LIBRARY_PATH)";
  return nullptr;
}

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
    handle = open_cupti_library(path, why);
    if (!handle) return false;
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

}  // namespace detail
TRACEML_END_NAMESPACE
