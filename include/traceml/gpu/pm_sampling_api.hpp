// traceml: the CUPTI entry points of PM sampling (hardware counters read at a fixed interval) and of
// the profiler host API that configures and evaluates them, resolved at run time with dlopen/dlsym
// like the activity API (cupti_api.hpp): a program built with these headers still runs where CUPTI
// or the driver is missing, and says so. Used by pm_sampler.hpp only.
//
// The headers arrived with CUDA 12.6; with an older toolkit TRACEML_HAS_PM_SAMPLING is 0 and the
// sampler reports itself unavailable.
#pragma once
#if __has_include(<cupti_pmsampling.h>) && __has_include(<cupti_profiler_host.h>)
#define TRACEML_HAS_PM_SAMPLING 1
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#else
#define TRACEML_HAS_PM_SAMPLING 0
#endif
#include <dlfcn.h>

#include <string>

#include "traceml/config.hpp"
#if TRACEML_HAS_PM_SAMPLING
#include "traceml/gpu/cupti_api.hpp"
#endif

TRACEML_BEGIN_NAMESPACE
namespace detail {

#if TRACEML_HAS_PM_SAMPLING
struct pm_sampling_api {
  void* handle = nullptr;
  decltype(&::cuptiGetResultString) result_string = nullptr;
  decltype(&::cuptiProfilerInitialize) profiler_initialize = nullptr;
  decltype(&::cuptiProfilerDeInitialize) profiler_deinitialize = nullptr;
  decltype(&::cuptiDeviceGetChipName) chip_name = nullptr;
  decltype(&::cuptiPmSamplingGetCounterAvailability) counter_availability = nullptr;
  decltype(&::cuptiPmSamplingEnable) enable = nullptr;
  decltype(&::cuptiPmSamplingDisable) disable = nullptr;
  decltype(&::cuptiPmSamplingSetConfig) set_config = nullptr;
  decltype(&::cuptiPmSamplingStart) start = nullptr;
  decltype(&::cuptiPmSamplingStop) stop = nullptr;
  decltype(&::cuptiPmSamplingDecodeData) decode = nullptr;
  decltype(&::cuptiPmSamplingGetCounterDataSize) counter_data_size = nullptr;
  decltype(&::cuptiPmSamplingCounterDataImageInitialize) counter_data_initialize = nullptr;
  decltype(&::cuptiPmSamplingGetCounterDataInfo) counter_data_info = nullptr;
  decltype(&::cuptiPmSamplingCounterDataGetSampleInfo) sample_info = nullptr;
  decltype(&::cuptiProfilerHostInitialize) host_initialize = nullptr;
  decltype(&::cuptiProfilerHostDeinitialize) host_deinitialize = nullptr;
  decltype(&::cuptiProfilerHostConfigAddMetrics) host_add_metrics = nullptr;
  decltype(&::cuptiProfilerHostGetConfigImageSize) host_config_size = nullptr;
  decltype(&::cuptiProfilerHostGetConfigImage) host_config_image = nullptr;
  decltype(&::cuptiProfilerHostGetNumOfPasses) host_passes = nullptr;
  decltype(&::cuptiProfilerHostEvaluateToGpuValues) host_evaluate = nullptr;
  decltype(&::cuptiGetTimestamp) get_timestamp = nullptr;

  template <class F>
  bool sym(F& f, const char* n) {
    f = reinterpret_cast<F>(dlsym(handle, n));
    return f != nullptr;
  }

  /// Loads CUPTI (open_cupti_library, as the activity API does) and resolves every entry point;
  /// false with `why` set otherwise.
  bool load(std::string& why) {
    handle = open_cupti_library(nullptr, why);
    if (!handle) return false;
    const bool ok =
        sym(result_string, "cuptiGetResultString") && sym(profiler_initialize, "cuptiProfilerInitialize") &&
        sym(profiler_deinitialize, "cuptiProfilerDeInitialize") && sym(chip_name, "cuptiDeviceGetChipName") &&
        sym(counter_availability, "cuptiPmSamplingGetCounterAvailability") && sym(enable, "cuptiPmSamplingEnable") &&
        sym(disable, "cuptiPmSamplingDisable") && sym(set_config, "cuptiPmSamplingSetConfig") &&
        sym(start, "cuptiPmSamplingStart") && sym(stop, "cuptiPmSamplingStop") &&
        sym(decode, "cuptiPmSamplingDecodeData") && sym(counter_data_size, "cuptiPmSamplingGetCounterDataSize") &&
        sym(counter_data_initialize, "cuptiPmSamplingCounterDataImageInitialize") &&
        sym(counter_data_info, "cuptiPmSamplingGetCounterDataInfo") &&
        sym(sample_info, "cuptiPmSamplingCounterDataGetSampleInfo") &&
        sym(host_initialize, "cuptiProfilerHostInitialize") &&
        sym(host_deinitialize, "cuptiProfilerHostDeinitialize") &&
        sym(host_add_metrics, "cuptiProfilerHostConfigAddMetrics") &&
        sym(host_config_size, "cuptiProfilerHostGetConfigImageSize") &&
        sym(host_config_image, "cuptiProfilerHostGetConfigImage") &&
        sym(host_passes, "cuptiProfilerHostGetNumOfPasses") &&
        sym(host_evaluate, "cuptiProfilerHostEvaluateToGpuValues") && sym(get_timestamp, "cuptiGetTimestamp");
    if (!ok) why = "CUPTI library without PM sampling (CUDA 12.6 or newer needed)";
    return ok;
  }

  std::string describe(CUptiResult r) const {
    const char* s = nullptr;
    if (result_string) result_string(r, &s);
    return s ? std::string(s) : "CUPTI error " + std::to_string(static_cast<int>(r));
  }
};
#endif

}  // namespace detail
TRACEML_END_NAMESPACE
