// traceml: the configuration of CUPTI PM sampling for pm_sampler (pm_sampler.hpp): which counters this
// GPU can sample, the one-pass configuration image of the chosen metrics, and the sampling object
// enabled and configured with it.
//
// Why apart from the sampler: choosing counters is a sequence of CUPTI calls made once, at start, on
// the caller's thread; the sampler's thread and decoding never change it. What it leaves (the host
// object that evaluates samples, the sampling object, the metric names and where each sits in a
// sample's values) is read by the decoder (pm_sample_decoder.hpp) for as long as sampling runs, and
// torn down by release() on the thread that owns the sampler.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/gpu/pm_decode_budget.hpp"
#include "traceml/gpu/pm_samples.hpp"
#include "traceml/gpu/pm_sampling_api.hpp"

TRACEML_BEGIN_NAMESPACE

struct pm_sampler_options {
  int device = -1;  ///< CUDA device index; -1: the current device
  /// Sampling interval: 1 ms, as Kineto samples. Decoding costs a fixed part per pass plus about
  /// 25 us per sample on an H200 with the five default counters (small_steps, counters mode): at
  /// 100 us it kept 38-49% of one core busy, at 500 us 11%, at 1 ms 5%, and on a host with few cores
  /// per GPU that core is the trainer's own (data loading, launches). 1 ms still gives 10 samples in a
  /// 10 ms phase and hundreds per phase over a run; a phase's edges are blurred by up to one sample,
  /// so for phases under ~10 ms per step set 100-500 us and pay the decoding.
  std::int64_t interval_ns = 1000000;
  /// The GPU-side ring of raw samples (taken from device memory): at 1 ms, minutes of samples.
  std::size_t hardware_buffer_bytes = std::size_t{64} << 20;
  /// Samples one decode pass can hold at least (the host counter-data image, initialized again
  /// after every pass, which is most of a pass's fixed cost). The image is made larger where a decode
  /// period at the interval would not fit twice (detail::samples_per_pass): a period that needs
  /// several passes lost about half its samples at 100 us on an H100 (the [pm] tests sampled 11 of
  /// 30 steps), one pass per period loses none.
  std::uint32_t max_samples = 256;
  /// How often the worker decodes the hardware buffer (0: no worker; flush() decodes). Fewer, fuller
  /// passes cost less: at 1 ms, 200 ms passes took 5% of a core where 20 ms passes at 100 us took 49%.
  int decode_period_ms = 200;
  /// The share of one core decoding may use (pm_decode_budget.hpp): beyond it, samples are taken in
  /// windows of `decode_window_ms`, the hardware stopped between them. By default
  /// default_decode_budget (0.25%), which keeps decoding off the training's 1%; 0 or less: every
  /// sample, at the decoding's full cost (a study that wants counters on every step).
  double decode_budget = default_decode_budget;
  int decode_window_ms = 2000;  ///< a window of evaluated samples: several steps of any trainer
  bool tensor = true;           ///< add the tensor-pipe counter when one pass allows it
  bool dram = true;             ///< add the DRAM-throughput counter when one pass allows it
};

namespace detail {

/// Samples the counter-data image is sized for: `max_samples`, or twice what one decode period
/// gathers at the interval when that is more (so that a period is decoded in one pass), at most 1 << 16.
inline std::uint32_t samples_per_pass(const pm_sampler_options& o) {
  std::uint64_t need = o.max_samples;
  if (o.interval_ns > 0 && o.decode_period_ms > 0) {
    const std::uint64_t period_ns = static_cast<std::uint64_t>(o.decode_period_ms) * 1000000;
    const std::uint64_t interval_ns = static_cast<std::uint64_t>(o.interval_ns);
    need = std::max<std::uint64_t>(need, 2 * ((period_ns + interval_ns - 1) / interval_ns));
  }
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(need, 1u << 16));
}

/// Decode passes in a window of the budget: `window_ms` at the decode period, at least one.
inline int decode_window_passes(int window_ms, int decode_period_ms) {
  const int period = std::max(decode_period_ms, 1);
  return std::max(1, (window_ms + period - 1) / period);
}

#if TRACEML_HAS_PM_SAMPLING
/// A CUPTI parameter block: zeroed, with its size set (how CUPTI tells versions apart).
template <class P>
P cupti_params(std::size_t size) noexcept {
  P p{};
  p.structSize = size;
  return p;
}
#endif

/// The words for a failed CUPTI call of the sampler (pure, tested on the CPU): which step failed,
/// the CUPTI result and its text; the cause and the fix a user can act on.
inline std::string describe_pm_failure(const std::string& step, int result, const std::string& text) {
  std::string why = step + " failed (" + text + ")";
#if TRACEML_HAS_PM_SAMPLING
  switch (result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return why +
             ": GPU performance counters are restricted to admin users; run as root, or load the "
             "driver with NVreg_RestrictProfilingToAdminUsers=0 (e.g. 'options nvidia "
             "NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d, then reboot)";
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
      return why + ": this GPU or configuration does not support PM sampling (Turing or newer, no MIG)";
    case CUPTI_ERROR_INVALID_OPERATION:
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
      return why +
             ": the counters are taken by another tool (Nsight Compute or Systems, DCGM, a second "
             "profiler in this process); end it, or run without it";
    case CUPTI_ERROR_INVALID_METRIC_NAME: return why + ": a counter name is not known on this GPU";
    default: break;
  }
#else
  (void)result;
#endif
  return why;
}

#if TRACEML_HAS_PM_SAMPLING
/// "" when `r` is success; otherwise the words for `step` failing with it.
inline std::string pm_call_failure(const pm_sampling_api& api, const char* step, CUptiResult r) {
  if (r == CUPTI_SUCCESS) return {};
  return describe_pm_failure(step, static_cast<int>(r), api.describe(r));
}

/// The counters of one PM-sampling session: chosen, configured and enabled by configure(), read by
/// the decoder while sampling runs, released by release(). Not thread-safe: configure() and release()
/// run on the thread that owns the sampler, before its worker starts and after it ends.
class pm_sampling_config {
 public:
  /// Initializes the profiler API, picks the counters `opt` asks for that fit one pass on `device`,
  /// enables sampling and sets its configuration. "" when done; otherwise why not (the caller
  /// releases what was made).
  std::string configure(const pm_sampling_api& api, std::size_t device, const pm_sampler_options& opt) {
    if (std::string why = read_chip(api, device); !why.empty()) return why;
    if (std::string why = choose_metrics(api, opt); !why.empty()) return why;
    layout_.interval_ns = opt.interval_ns;
    return enable(api, device, opt);
  }

  /// Disables sampling and deinitializes what configure() initialized. Idempotent.
  void release(const pm_sampling_api& api) {
    if (object_) {
      auto p = cupti_params<CUpti_PmSampling_Disable_Params>(CUpti_PmSampling_Disable_Params_STRUCT_SIZE);
      p.pPmSamplingObject = object_;
      api.disable(&p);
      object_ = nullptr;
    }
    if (host_) {
      deinitialize_host(api, host_);
      host_ = nullptr;
    }
    if (profiler_initialized_) {
      auto p = cupti_params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
      api.profiler_deinitialize(&p);
      profiler_initialized_ = false;
    }
  }

  CUpti_PmSampling_Object* object() const noexcept { return object_; }
  /// The host object of the chosen metrics: it evaluates each sample's values.
  CUpti_Profiler_Host_Object* host() const noexcept { return host_; }
  /// The metric names in use, in the order they are evaluated.
  const std::vector<std::string>& metric_names() const noexcept { return metric_names_; }
  /// Where each metric sits in a sample's values.
  const sample_layout& layout() const noexcept { return layout_; }

 private:
  static void deinitialize_host(const pm_sampling_api& api, CUpti_Profiler_Host_Object* host) {
    auto d = cupti_params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    d.pHostObject = host;
    api.host_deinitialize(&d);
  }

  /// The profiler API initialized, the chip's name and which counters it can sample now.
  std::string read_chip(const pm_sampling_api& api, std::size_t device) {
    {
      auto p = cupti_params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
      if (auto why = pm_call_failure(api, "cuptiProfilerInitialize", api.profiler_initialize(&p)); !why.empty())
        return why;
      profiler_initialized_ = true;
    }
    {
      auto p = cupti_params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
      p.deviceIndex = device;
      if (auto why = pm_call_failure(api, "cuptiDeviceGetChipName", api.chip_name(&p)); !why.empty()) return why;
      chip_ = p.pChipName ? p.pChipName : "";
    }
    auto p = cupti_params<CUpti_PmSampling_GetCounterAvailability_Params>(
        CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
    p.deviceIndex = device;
    const char* step = "cuptiPmSamplingGetCounterAvailability";
    if (auto why = pm_call_failure(api, step, api.counter_availability(&p)); !why.empty()) return why;
    availability_.assign(p.counterAvailabilityImageSize, 0);
    p.pCounterAvailabilityImage = availability_.data();
    return pm_call_failure(api, step, api.counter_availability(&p));
  }

  /// The required counters, then each optional one that still fits one pass; the image of the last
  /// set that fitted is kept in config_image_.
  std::string choose_metrics(const pm_sampling_api& api, const pm_sampler_options& opt) {
    // Required: engine busy and SM activity (cycles active against cycles elapsed).
    metric_names_ = {"gr__cycles_active.avg", "gr__cycles_elapsed.max", "sm__cycles_active.avg"};
    CUptiResult r = CUPTI_SUCCESS;
    if (!build_config(api, metric_names_, config_image_, r))
      return pm_call_failure(api, "configuring the busy and SM counters", r);
    // Optional, each kept only when the set still fits one pass. Names differ between GPU generations.
    // PM sampling offers the "_realtime" tensor counters and the DRAM controller's (dramc__) throughput;
    // the other names are those of the range profiler, tried last. Scales as measured on an H200: the
    // tensor value is a percentage; dramc__throughput read 0.99 while 1 GiB memsets ran at 4.5 TB/s
    // (95% of the HBM's peak): a ratio, whatever its name says.
    if (opt.tensor)
      try_add(api, layout_.tensor, layout_.tensor_scale,
              {{"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed", 0.01},
               {"sm__pipe_tensor_op_hmma_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed", 0.01},
               {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 0.01},
               {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed", 0.01}});
    if (opt.dram)
      try_add(api, layout_.dram, layout_.dram_scale,
              {{"dramc__throughput.avg.pct_of_peak_sustained_elapsed", 1.0},
               {"dram__throughput.avg.pct_of_peak_sustained_elapsed", 0.01},
               {"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 0.01}});
    return {};
  }

  /// A candidate name and what turns its value into a share.
  struct candidate {
    const char* name;
    double scale;
  };

  /// The first of `candidates` that fits one pass beside the metrics chosen so far: added, its
  /// position into `slot`, its scale into `scale`. None fitting leaves everything as it was.
  void try_add(const pm_sampling_api& api, int& slot, double& scale, std::initializer_list<candidate> candidates) {
    for (const candidate& c : candidates) {
      auto names = metric_names_;
      names.push_back(c.name);
      std::vector<std::uint8_t> img;
      CUptiResult rr = CUPTI_SUCCESS;
      if (build_config(api, names, img, rr)) {
        metric_names_ = std::move(names);
        config_image_ = std::move(img);
        slot = static_cast<int>(metric_names_.size()) - 1;
        scale = c.scale;
        return;
      }
    }
  }

  /// A host object for `names`; its one-pass config image into `image`. False when a name is not
  /// known or the set needs more than one pass (PM sampling takes one pass only).
  bool build_config(const pm_sampling_api& api, const std::vector<std::string>& names, std::vector<std::uint8_t>& image,
                    CUptiResult& r) {
    auto hi = cupti_params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    hi.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    hi.pChipName = chip_.c_str();
    hi.pCounterAvailabilityImage = availability_.data();
    if ((r = api.host_initialize(&hi)) != CUPTI_SUCCESS) return false;
    const bool ok = write_image(api, hi.pHostObject, names, image, r);
    if (ok) {
      if (host_) deinitialize_host(api, host_);
      host_ = hi.pHostObject;  // kept: it evaluates the samples
    } else {
      deinitialize_host(api, hi.pHostObject);
    }
    return ok;
  }

  /// `names` added to `host`, the config image written into `image`; false (with `r`) when CUPTI
  /// refuses or the image needs more than one pass.
  static bool write_image(const pm_sampling_api& api, CUpti_Profiler_Host_Object* host,
                          const std::vector<std::string>& names, std::vector<std::uint8_t>& image, CUptiResult& r) {
    std::vector<const char*> c;
    for (const auto& n : names) c.push_back(n.c_str());
    auto am = cupti_params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    am.pHostObject = host;
    am.ppMetricNames = c.data();
    am.numMetrics = c.size();
    if ((r = api.host_add_metrics(&am)) != CUPTI_SUCCESS) return false;
    auto sz = cupti_params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    sz.pHostObject = host;
    if ((r = api.host_config_size(&sz)) != CUPTI_SUCCESS) return false;
    image.assign(sz.configImageSize, 0);
    auto gi =
        cupti_params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    gi.pHostObject = host;
    gi.configImageSize = image.size();
    gi.pConfigImage = image.data();
    if ((r = api.host_config_image(&gi)) != CUPTI_SUCCESS) return false;
    auto np =
        cupti_params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
    np.configImageSize = image.size();
    np.pConfigImage = image.data();
    if ((r = api.host_passes(&np)) != CUPTI_SUCCESS) return false;
    if (np.numOfPasses != 1) r = CUPTI_ERROR_NOT_SUPPORTED;
    return np.numOfPasses == 1;
  }

  /// The sampling object enabled on `device` and given the chosen configuration.
  std::string enable(const pm_sampling_api& api, std::size_t device, const pm_sampler_options& opt) {
    {
      auto p = cupti_params<CUpti_PmSampling_Enable_Params>(CUpti_PmSampling_Enable_Params_STRUCT_SIZE);
      p.deviceIndex = device;
      if (auto why = pm_call_failure(api, "cuptiPmSamplingEnable", api.enable(&p)); !why.empty()) return why;
      object_ = p.pPmSamplingObject;
    }
    auto p = cupti_params<CUpti_PmSampling_SetConfig_Params>(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
    p.pPmSamplingObject = object_;
    p.configSize = config_image_.size();
    p.pConfig = config_image_.data();
    p.hardwareBufferSize = opt.hardware_buffer_bytes;
    p.samplingInterval = static_cast<std::uint64_t>(opt.interval_ns);
    p.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    // A full buffer overwrites its oldest records (counted as overflows) rather than stopping the
    // sampler in an error state that would need a restart.
    p.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
    return pm_call_failure(api, "cuptiPmSamplingSetConfig", api.set_config(&p));
  }

  std::string chip_;
  std::vector<std::uint8_t> availability_;
  // CUPTI keeps using the configuration image after SetConfig (decoding reads it): it must live as
  // long as the sampling object.
  std::vector<std::uint8_t> config_image_;
  std::vector<std::string> metric_names_;
  sample_layout layout_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_PmSampling_Object* object_ = nullptr;
  bool profiler_initialized_ = false;
};
#endif

}  // namespace detail
TRACEML_END_NAMESPACE
