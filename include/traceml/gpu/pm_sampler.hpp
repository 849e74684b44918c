// traceml: GPU hardware counters read at a fixed interval (CUPTI PM sampling), decoded on a worker
// thread into pm_sample values (pm_samples.hpp).
//
// Why: CUPTI kernel records cost ~4 us of CPU per launch inside the driver, so they can only be taken
// on a few steps. The GPU's performance monitors sample their counters into a hardware buffer with
// no per-launch cost at all; this class configures them (the profiler host API turns metric names
// into a one-pass configuration), starts them, and a worker decodes the buffer every
// `decode_period_ms` and evaluates each sample's metrics. Everything on the training thread is
// untouched: the sampler sees the whole GPU, and the windows come from elsewhere
// (pm_sampling_source.hpp).
//
// Failures are reported once, with the cause and the fix, and leave the sampler unavailable:
// insufficient privileges (profiling restricted to admin users by the driver), an unsupported GPU,
// counters already taken by another tool (Nsight Compute/Systems, DCGM), no device or no CUPTI.
//
//   traceml::pm_sampler s;                      // needs a CUDA device; says why not otherwise
//   if (s.start()) { ...; auto v = s.take(); }  // samples decoded since the previous take()
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/gpu/device_check.hpp"
#include "traceml/gpu/pm_samples.hpp"
#include "traceml/gpu/pm_sampling_api.hpp"

TRACEML_BEGIN_NAMESPACE

struct pm_sampler_options {
  int device = -1;                     ///< CUDA device index; -1: the current device
  /// Sampling interval: 1 ms, as Kineto samples. Decoding costs a fixed part per pass plus about
  /// 25 us per sample on an H200 with the five default counters (small_steps, counters mode): at
  /// 100 us it kept 38-49% of one core busy, at 500 us 11%, at 1 ms 5%, and on a host with few cores
  /// per GPU that core is the trainer's own (data loading, launches). 1 ms still gives 10 samples in a
  /// 10 ms phase and hundreds per phase over a run; a phase's edges are blurred by up to one sample,
  /// so for phases under ~10 ms per step set 100-500 us and pay the decoding.
  std::int64_t interval_ns = 1000000;
  /// The GPU-side ring of raw samples (taken from device memory): at 1 ms, minutes of samples.
  std::size_t hardware_buffer_bytes = std::size_t{64} << 20;
  /// Samples one decode pass can hold (the host counter-data image, initialized again after every
  /// pass, which is most of a pass's fixed cost). 256 hold 256 ms at 1 ms, one decode period and a
  /// margin; a fuller buffer takes more passes.
  std::uint32_t max_samples = 256;
  /// How often the worker decodes the hardware buffer (0: no worker; flush() decodes). Fewer, fuller
  /// passes cost less: at 1 ms, 200 ms passes took 5% of a core where 20 ms passes at 100 us took 49%.
  int decode_period_ms = 200;
  bool tensor = true;                  ///< add the tensor-pipe counter when one pass allows it
  bool dram = true;                    ///< add the DRAM-throughput counter when one pass allows it
};

/// Counts of what the sampler did (read any time).
struct pm_sampler_stats {
  std::uint64_t samples = 0;           ///< decoded and evaluated
  std::uint64_t decode_passes = 0;
  std::uint64_t overflows = 0;         ///< hardware buffer or counter-data image full: samples lost
  std::uint64_t irregular = 0;         ///< the session's first, longer than 4 intervals, or not finite: dropped
  std::int64_t decode_cpu_ns = 0;      ///< wall time of the worker's decode passes
  std::int64_t first_ns = 0, last_ns = 0;  ///< first sample's begin, last sample's end (GPU clock)
  double mean_interval_ns = 0;         ///< mean sample length achieved
};

namespace detail {

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
      return why + ": GPU performance counters are restricted to admin users; run as root, or load the "
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
      return why + ": the counters are taken by another tool (Nsight Compute or Systems, DCGM, a second "
                   "profiler in this process); end it, or run without it";
    case CUPTI_ERROR_INVALID_METRIC_NAME:
      return why + ": a counter name is not known on this GPU";
    default: break;
  }
#else
  (void)result;
#endif
  return why;
}

}  // namespace detail

class pm_sampler {
 public:
  explicit pm_sampler(pm_sampler_options o = {}) : opt_(std::move(o)) {}
  ~pm_sampler() { stop(); }
  pm_sampler(const pm_sampler&) = delete;
  pm_sampler& operator=(const pm_sampler&) = delete;

  /// Configures and starts sampling; false (status() says why, once) when it cannot.
  bool start() {
#if TRACEML_HAS_PM_SAMPLING
    if (running_) return true;
    if (!why_.empty()) return false;
    const cuda_device_check device = check_cuda_device();
    if (!device.ok()) return fail(device.why);
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) current = 0;
    const int dev = opt_.device < 0 ? current : opt_.device;
    cudaSetDevice(dev);
    cudaFree(nullptr);  // the primary context must exist before the profiler attaches to it
    cudaSetDevice(current);  // the caller's device stays its own
    cudaGetLastError();
    device_ = static_cast<std::size_t>(dev);
    std::string why;
    if (!api_.load(why)) return fail(why);
    if (!configure()) return false;
    {
      auto p = detail::cupti_params<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
      p.pPmSamplingObject = object_;
      if (!call("cuptiPmSamplingStart", api_.start(&p))) return false;
    }
    running_ = true;
    detail::pm_sampling_live().store(true);
    // One decode here, on the caller's thread: whatever CUPTI sets up for decoding exists before
    // process_pm_sampler() registers the worker's end at exit (exit handlers run in reverse order).
    decode_all();
    if (opt_.decode_period_ms > 0) worker_ = std::thread([this] { decode_loop(); });
    return true;
#else
    return fail("the CUDA toolkit this program was built with has no PM sampling API (CUDA 12.6 or newer)");
#endif
  }

  /// Stops sampling, decodes what the hardware still holds, releases the counters. Idempotent.
  void stop() {
#if TRACEML_HAS_PM_SAMPLING
    if (running_) {
      {
        std::lock_guard<std::mutex> lock(wake_mu_);
        stopping_ = true;
      }
      wake_.notify_all();
      if (worker_.joinable()) worker_.join();
      if (!paused_) {
        auto p = detail::cupti_params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
        p.pPmSamplingObject = object_;
        api_.stop(&p);
        decode_all();
      }
      running_ = false;
    }
    release();
#endif
  }

  /// Stops the hardware sampling between profilers, decodes what the buffer still holds and lets the
  /// worker sleep: a paused sampler costs the training nothing (no counter traffic, no decoding).
  /// Its samples are dropped. The counters stay configured and claimed (no Disable: that tears down
  /// more of CUPTI than its own object), so resume() is cheap. Idempotent.
  void pause() {
#if TRACEML_HAS_PM_SAMPLING
    if (!running_) return;
    {
      std::lock_guard<std::mutex> lock(cupti_mu_);  // no decode pass runs while the state changes
      std::lock_guard<std::mutex> wake(wake_mu_);
      if (paused_) return;
      auto p = detail::cupti_params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
      p.pPmSamplingObject = object_;
      if (const CUptiResult r = api_.stop(&p); r != CUPTI_SUCCESS) {
        std::lock_guard<std::mutex> out(out_mu_);
        if (decode_failure_.empty())
          decode_failure_ = "hardware counters could not pause: " +
                            detail::describe_pm_failure("cuptiPmSamplingStop", static_cast<int>(r), api_.describe(r));
        return;  // still sampling: keep decoding, and dropping
      }
      paused_ = true;
    }
    decode_all();  // empties the hardware buffer; nothing is kept while paused
    std::lock_guard<std::mutex> out(out_mu_);
    keep_ = false;
    out_.clear();
#endif
  }

  /// Starts the hardware sampling again after pause(); samples are kept for take() from here on. The
  /// first sample after a start spans the pause and is dropped (as the session's first is). False
  /// (decode_failure() says why) when CUPTI refuses to start again.
  bool resume() {
#if TRACEML_HAS_PM_SAMPLING
    if (!running_) return false;
    {
      std::lock_guard<std::mutex> lock(cupti_mu_);
      std::lock_guard<std::mutex> wake(wake_mu_);
      if (paused_) {
        auto p = detail::cupti_params<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
        p.pPmSamplingObject = object_;
        if (const CUptiResult r = api_.start(&p); r != CUPTI_SUCCESS) {
          std::lock_guard<std::mutex> out(out_mu_);
          decode_failure_ = "hardware counters could not start again: " +
                            detail::describe_pm_failure("cuptiPmSamplingStart", static_cast<int>(r), api_.describe(r));
          return false;
        }
        paused_ = false;
        seen_first_ = false;
      }
    }
    wake_.notify_all();
    std::lock_guard<std::mutex> out(out_mu_);
    keep_ = true;
    return true;
#else
    return false;
#endif
  }
  /// Whether the hardware is sampling now (started and not paused).
  bool sampling_now() const {
#if TRACEML_HAS_PM_SAMPLING
    std::lock_guard<std::mutex> wake(wake_mu_);
    return running_ && !paused_;
#else
    return false;
#endif
  }

  /// Ends the decoding thread and leaves the counters sampling (for the end of the process: no
  /// CUPTI call is made after it). Idempotent.
  void stop_worker() {
#if TRACEML_HAS_PM_SAMPLING
    {
      std::lock_guard<std::mutex> lock(wake_mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (worker_.joinable()) worker_.join();
#endif
  }

  /// Decodes now on the caller's thread (the worker's pass may run as well: serialised). For the end
  /// of a run, when the samples up to now are needed at once.
  void flush() {
#if TRACEML_HAS_PM_SAMPLING
    if (running_) decode_all();
#endif
  }

  bool running() const noexcept { return running_; }
  std::int64_t interval_ns() const noexcept { return opt_.interval_ns; }
  /// The samples decoded since the previous take(), in time order.
  std::vector<pm_sample> take() {
    std::lock_guard<std::mutex> lock(out_mu_);
    return std::exchange(out_, {});
  }
  pm_sampler_stats stats() const {
    std::lock_guard<std::mutex> lock(out_mu_);
    return stats_;
  }
  /// The metric names in use, in the order they are evaluated.
  const std::vector<std::string>& metrics() const noexcept { return metric_names_; }
  /// "" while fine; otherwise why there are no samples.
  const std::string& why() const noexcept { return why_; }
  /// "" while decoding works; otherwise why samples stopped coming during the run.
  std::string decode_failure() const {
    std::lock_guard<std::mutex> lock(out_mu_);
    return decode_failure_;
  }
  std::string status() const {
    if (!why_.empty()) return why_;
    std::string s = "hardware counters sampled every " + std::to_string(opt_.interval_ns / 1000) + " us:";
    for (const auto& m : metric_names_) s += " " + m;
    const std::string failed = decode_failure();
    return failed.empty() ? s : s + "; " + failed;
  }

 private:
  bool fail(const std::string& why) {
    why_ = "hardware counters (CUPTI PM sampling) unavailable: " + why;
    release();
    return false;
  }

#if TRACEML_HAS_PM_SAMPLING
  bool call(const char* step, CUptiResult r) {
    if (r == CUPTI_SUCCESS) return true;
    return fail(detail::describe_pm_failure(step, static_cast<int>(r), api_.describe(r)));
  }

  /// A host object for `names`; its one-pass config image into `image`. False when a name is not
  /// known or the set needs more than one pass (PM sampling takes one pass only).
  bool build_config(const std::vector<std::string>& names, std::vector<std::uint8_t>& image, CUptiResult& r) {
    auto hi = detail::cupti_params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    hi.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    hi.pChipName = chip_.c_str();
    hi.pCounterAvailabilityImage = availability_.data();
    if ((r = api_.host_initialize(&hi)) != CUPTI_SUCCESS) return false;
    std::vector<const char*> c;
    for (const auto& n : names) c.push_back(n.c_str());
    auto am = detail::cupti_params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    am.pHostObject = hi.pHostObject;
    am.ppMetricNames = c.data();
    am.numMetrics = c.size();
    bool ok = (r = api_.host_add_metrics(&am)) == CUPTI_SUCCESS;
    if (ok) {
      auto sz = detail::cupti_params<CUpti_Profiler_Host_GetConfigImageSize_Params>(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
      sz.pHostObject = hi.pHostObject;
      ok = (r = api_.host_config_size(&sz)) == CUPTI_SUCCESS;
      if (ok) {
        image.assign(sz.configImageSize, 0);
        auto gi = detail::cupti_params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
        gi.pHostObject = hi.pHostObject;
        gi.configImageSize = image.size();
        gi.pConfigImage = image.data();
        ok = (r = api_.host_config_image(&gi)) == CUPTI_SUCCESS;
      }
      if (ok) {
        auto np = detail::cupti_params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
        np.configImageSize = image.size();
        np.pConfigImage = image.data();
        ok = (r = api_.host_passes(&np)) == CUPTI_SUCCESS && np.numOfPasses == 1;
        if (r == CUPTI_SUCCESS && np.numOfPasses != 1) r = CUPTI_ERROR_NOT_SUPPORTED;
      }
    }
    if (ok) {
      if (host_) {
        auto d = detail::cupti_params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
        d.pHostObject = host_;
        api_.host_deinitialize(&d);
      }
      host_ = hi.pHostObject;  // kept: it evaluates the samples
    } else {
      auto d = detail::cupti_params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
      d.pHostObject = hi.pHostObject;
      api_.host_deinitialize(&d);
    }
    return ok;
  }

  bool configure() {
    {
      auto p = detail::cupti_params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
      if (!call("cuptiProfilerInitialize", api_.profiler_initialize(&p))) return false;
      profiler_initialized_ = true;
    }
    {
      auto p = detail::cupti_params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
      p.deviceIndex = device_;
      if (!call("cuptiDeviceGetChipName", api_.chip_name(&p))) return false;
      chip_ = p.pChipName ? p.pChipName : "";
    }
    {
      auto p = detail::cupti_params<CUpti_PmSampling_GetCounterAvailability_Params>(CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
      p.deviceIndex = device_;
      if (!call("cuptiPmSamplingGetCounterAvailability", api_.counter_availability(&p))) return false;
      availability_.assign(p.counterAvailabilityImageSize, 0);
      p.pCounterAvailabilityImage = availability_.data();
      if (!call("cuptiPmSamplingGetCounterAvailability", api_.counter_availability(&p))) return false;
    }
    // Required: engine busy and SM activity (cycles active against cycles elapsed).
    metric_names_ = {"gr__cycles_active.avg", "gr__cycles_elapsed.max", "sm__cycles_active.avg"};
    std::vector<std::uint8_t>& image = config_image_;
    CUptiResult r = CUPTI_SUCCESS;
    if (!build_config(metric_names_, image, r)) return call("configuring the busy and SM counters", r);
    // Optional, each kept only when the set still fits one pass. Names differ between GPU generations.
    // A candidate name and what turns its value into a share.
    struct candidate {
      const char* name;
      double scale;
    };
    auto try_add = [&](int& slot, double& scale, std::initializer_list<candidate> candidates) {
      for (const candidate& c : candidates) {
        auto names = metric_names_;
        names.push_back(c.name);
        std::vector<std::uint8_t> img;
        CUptiResult rr = CUPTI_SUCCESS;
        if (build_config(names, img, rr)) {
          metric_names_ = std::move(names);
          image = std::move(img);
          slot = static_cast<int>(metric_names_.size()) - 1;
          scale = c.scale;
          return;
        }
      }
    };
    // PM sampling offers the "_realtime" tensor counters and the DRAM controller's (dramc__) throughput;
    // the other names are those of the range profiler, tried last. Scales as measured on an H200: the
    // tensor value is a percentage; dramc__throughput read 0.99 while 1 GiB memsets ran at 4.5 TB/s
    // (95% of the HBM's peak): a ratio, whatever its name says.
    if (opt_.tensor)
      try_add(layout_.tensor, layout_.tensor_scale,
              {{"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed", 0.01},
               {"sm__pipe_tensor_op_hmma_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed", 0.01},
               {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 0.01},
               {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed", 0.01}});
    if (opt_.dram)
      try_add(layout_.dram, layout_.dram_scale,
              {{"dramc__throughput.avg.pct_of_peak_sustained_elapsed", 1.0},
               {"dram__throughput.avg.pct_of_peak_sustained_elapsed", 0.01},
               {"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 0.01}});
    layout_.interval_ns = opt_.interval_ns;
    {
      auto p = detail::cupti_params<CUpti_PmSampling_Enable_Params>(CUpti_PmSampling_Enable_Params_STRUCT_SIZE);
      p.deviceIndex = device_;
      if (!call("cuptiPmSamplingEnable", api_.enable(&p))) return false;
      object_ = p.pPmSamplingObject;
    }
    {
      auto p = detail::cupti_params<CUpti_PmSampling_SetConfig_Params>(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
      p.pPmSamplingObject = object_;
      p.configSize = image.size();
      p.pConfig = image.data();
      p.hardwareBufferSize = opt_.hardware_buffer_bytes;
      p.samplingInterval = static_cast<std::uint64_t>(opt_.interval_ns);
      p.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
      // A full buffer overwrites its oldest records (counted as overflows) rather than stopping the
      // sampler in an error state that would need a restart.
      p.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
      if (!call("cuptiPmSamplingSetConfig", api_.set_config(&p))) return false;
    }
    {
      auto p = detail::cupti_params<CUpti_PmSampling_GetCounterDataSize_Params>(CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE);
      std::vector<const char*> c;
      for (const auto& n : metric_names_) c.push_back(n.c_str());
      p.pPmSamplingObject = object_;
      p.pMetricNames = c.data();
      p.numMetrics = c.size();
      p.maxSamples = opt_.max_samples;
      if (!call("cuptiPmSamplingGetCounterDataSize", api_.counter_data_size(&p))) return false;
      counter_data_.assign(p.counterDataSize, 0);
    }
    return reset_image();
  }

  bool reset_image() { return call("cuptiPmSamplingCounterDataImageInitialize", initialize_image()); }
  CUptiResult initialize_image() {
    auto p = detail::cupti_params<CUpti_PmSampling_CounterDataImage_Initialize_Params>(CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    p.pPmSamplingObject = object_;
    p.counterDataSize = counter_data_.size();
    p.pCounterData = counter_data_.data();
    return api_.counter_data_initialize(&p);
  }

  /// One decode pass per call until the hardware buffer is empty. Serialised (worker and flush()).
  /// A failure here only stops decoding (said once through decode_failure()); the sampling object is
  /// torn down by stop(), on the thread that owns it, never by the worker.
  void decode_all() {
    std::lock_guard<std::mutex> lock(cupti_mu_);
    if (decode_failed_) return;
    const std::int64_t t0 = now_ns();
    std::vector<pm_sample> got;
    std::uint64_t passes = 0, overflows = 0, irregular = 0;
    for (int pass = 0; pass < 64; ++pass) {  // bounded: a runaway buffer cannot hold the worker forever
      auto d = detail::cupti_params<CUpti_PmSampling_DecodeData_Params>(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
      d.pPmSamplingObject = object_;
      d.pCounterDataImage = counter_data_.data();
      d.counterDataImageSize = counter_data_.size();
      const CUptiResult r = api_.decode(&d);
      ++passes;
      if (r == CUPTI_ERROR_OUT_OF_MEMORY || d.overflow) ++overflows;
      if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_OUT_OF_MEMORY) {
        fail_decoding("cuptiPmSamplingDecodeData", r);
        break;
      }
      auto info = detail::cupti_params<CUpti_PmSampling_GetCounterDataInfo_Params>(CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE);
      info.pCounterDataImage = counter_data_.data();
      info.counterDataImageSize = counter_data_.size();
      if (api_.counter_data_info(&info) != CUPTI_SUCCESS) break;
      std::vector<const char*> names;
      for (const auto& n : metric_names_) names.push_back(n.c_str());
      std::vector<double> values(names.size());
      for (std::size_t i = 0; i < info.numCompletedSamples; ++i) {
        auto si = detail::cupti_params<CUpti_PmSampling_CounterData_GetSampleInfo_Params>(CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE);
        si.pPmSamplingObject = object_;
        si.pCounterDataImage = counter_data_.data();
        si.counterDataImageSize = counter_data_.size();
        si.sampleIndex = i;
        if (api_.sample_info(&si) != CUPTI_SUCCESS) continue;
        auto ev = detail::cupti_params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
        ev.pHostObject = host_;
        ev.pCounterDataImage = counter_data_.data();
        ev.counterDataImageSize = counter_data_.size();
        ev.rangeIndex = i;
        ev.ppMetricNames = names.data();
        ev.numMetrics = names.size();
        ev.pMetricValues = values.data();
        if (api_.host_evaluate(&ev) != CUPTI_SUCCESS) continue;
        const bool first = !seen_first_;
        seen_first_ = true;
        if (auto sample = sample_from_values(si.startTimestamp, si.endTimestamp, values, layout_, first)) got.push_back(*sample);
        else ++irregular;
      }
      if (const CUptiResult ri = initialize_image(); ri != CUPTI_SUCCESS) {
        fail_decoding("cuptiPmSamplingCounterDataImageInitialize", ri);
        break;
      }
      // Out of memory: the samples CUPTI could not hold are lost (counted); decoding again at once
      // would only repeat it.
      if (r != CUPTI_SUCCESS || d.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) break;
    }
    const std::int64_t spent = now_ns() - t0;
    std::lock_guard<std::mutex> out(out_mu_);
    stats_.decode_passes += passes;
    stats_.overflows += overflows;
    stats_.irregular += irregular;
    stats_.decode_cpu_ns += spent;
    if (!got.empty()) {
      if (stats_.samples == 0) stats_.first_ns = got.front().begin_ns;
      stats_.last_ns = got.back().end_ns;
      const auto n = static_cast<double>(stats_.samples);
      double sum = 0;
      for (const auto& s : got) sum += static_cast<double>(s.end_ns - s.begin_ns);
      stats_.mean_interval_ns = (stats_.mean_interval_ns * n + sum) / (n + static_cast<double>(got.size()));
      stats_.samples += got.size();
      if (keep_) out_.insert(out_.end(), got.begin(), got.end());
    }
  }

  void fail_decoding(const char* step, CUptiResult r) {  // cupti_mu_ held
    decode_failed_ = true;
    std::lock_guard<std::mutex> out(out_mu_);
    decode_failure_ = "hardware counters stopped: " + detail::describe_pm_failure(step, static_cast<int>(r), api_.describe(r));
  }

  void decode_loop() {
    // Decoding needs the device's context current on this thread (without it CUPTI crashes).
    cudaSetDevice(static_cast<int>(device_));
    cudaGetLastError();
    std::unique_lock<std::mutex> lock(wake_mu_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(opt_.decode_period_ms), [this] { return stopping_; });
      // Paused: nothing arrives, so sleep until resumed (or stopped) instead of polling.
      wake_.wait(lock, [this] { return stopping_ || !paused_; });
      if (stopping_) break;
      lock.unlock();
      decode_all();
      lock.lock();
    }
  }
#endif

  void release() {
#if TRACEML_HAS_PM_SAMPLING
    if (object_) {
      auto p = detail::cupti_params<CUpti_PmSampling_Disable_Params>(CUpti_PmSampling_Disable_Params_STRUCT_SIZE);
      p.pPmSamplingObject = object_;
      api_.disable(&p);
      object_ = nullptr;
    }
    if (host_) {
      auto d = detail::cupti_params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
      d.pHostObject = host_;
      api_.host_deinitialize(&d);
      host_ = nullptr;
    }
    if (profiler_initialized_) {
      auto p = detail::cupti_params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
      api_.profiler_deinitialize(&p);
      profiler_initialized_ = false;
    }
#endif
  }

  pm_sampler_options opt_;
  std::string why_;
  std::vector<std::string> metric_names_;
  bool running_ = false;
#if TRACEML_HAS_PM_SAMPLING
  detail::pm_sampling_api api_;
  std::size_t device_ = 0;
  std::string chip_;
  std::vector<std::uint8_t> availability_, counter_data_;
  // CUPTI keeps using the configuration image after SetConfig (decoding reads it): it must live as
  // long as the sampling object.
  std::vector<std::uint8_t> config_image_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_PmSampling_Object* object_ = nullptr;
  bool profiler_initialized_ = false;
  sample_layout layout_;  // where each metric sits in a sample's values
  std::thread worker_;
  mutable std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stopping_ = false;     // guarded by wake_mu_
  bool paused_ = false;       // guarded by wake_mu_ (changed with cupti_mu_ held too)
  std::mutex cupti_mu_;       // serialises decode passes (worker and flush())
  bool decode_failed_ = false;  // guarded by cupti_mu_
  bool seen_first_ = false;     // guarded by cupti_mu_
#endif
  mutable std::mutex out_mu_;
  std::vector<pm_sample> out_;
  pm_sampler_stats stats_;
  std::string decode_failure_;  // guarded by out_mu_
  bool keep_ = true;            // guarded by out_mu_
  // Lock order where more than one is held: cupti_mu_, then wake_mu_, then out_mu_.
};

/// The process's one sampler, started at the first call with that call's options and never disabled:
/// disabling PM sampling tears down more of CUPTI than its own object (other users of the API skip it
/// for that reason), and CUPTI activity records must go on working after a profiler ends. Between
/// profilers it is paused (pm_sampler::pause: the hardware stops sampling, the decoder sleeps); its
/// decoding thread ends at exit, before CUDA's own teardown. Whether it runs: running(), else why().
inline pm_sampler& process_pm_sampler(const pm_sampler_options& first_options = {}) {
  static pm_sampler* const sampler = [&] {
    auto* s = new pm_sampler(first_options);  // never deleted: see above
    if (s->start()) std::atexit([] { process_pm_sampler().stop_worker(); });
    return s;
  }();
  return *sampler;
}

TRACEML_END_NAMESPACE
