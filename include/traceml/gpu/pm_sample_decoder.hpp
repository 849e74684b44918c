// traceml: decoding of CUPTI PM sampling for pm_sampler (pm_sampler.hpp): passes of the hardware
// buffer into the host counter-data image, each sample's metrics evaluated into a pm_sample value
// (pm_samples.hpp), and the sampler's counts of what decoding did.
//
// Why apart from the sampler: a decode pass is the same sequence of CUPTI calls whichever thread runs
// it (the sampler's worker, or flush() on the caller's); the sampler serialises the passes and decides
// what happens to the samples (kept for take(), or dropped while paused). The decoder only reads the
// configuration (pm_sampling_config.hpp) it was prepared for.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/gpu/pm_samples.hpp"
#include "traceml/gpu/pm_sampling_api.hpp"
#include "traceml/gpu/pm_sampling_config.hpp"

TRACEML_BEGIN_NAMESPACE

/// Counts of what the sampler did (read any time).
struct pm_sampler_stats {
  std::uint64_t samples = 0;  ///< decoded and evaluated
  std::uint64_t gaps = 0;     ///< times the hardware stopped between the budget's windows (pm_decode_budget.hpp)
  std::uint64_t decode_passes = 0;
  std::uint64_t overflows = 0;             ///< hardware buffer or counter-data image full: samples lost
  std::uint64_t irregular = 0;             ///< the session's first, longer than 4 intervals, or not finite: dropped
  std::int64_t decode_cpu_ns = 0;          ///< CPU time of the decode passes (of the threads that ran them)
  std::int64_t first_ns = 0, last_ns = 0;  ///< first sample's begin, last sample's end (GPU clock)
  /// The end of the last sample decoded (the samples' clock): no sample before it is still to come.
  std::int64_t decoded_to_ns = 0;
  /// While the hardware is stopped between the budget's windows: where its samples end (the samples'
  /// clock); -1 while it samples. No sample after it comes until the next window.
  std::int64_t gap_from_ns = -1;
  double mean_interval_ns = 0;  ///< mean sample length achieved
};

namespace detail {

/// What one decode() call found: the samples in time order and the counts of its passes.
struct pm_decoded {
  std::vector<pm_sample> samples;
  std::uint64_t passes = 0, overflows = 0, irregular = 0;
  std::int64_t decoded_to_ns = 0;  ///< end of the last sample decoded (0: none)
  std::string failure;             ///< "" while decoding works; otherwise the failed step, in words
};

/// `d`'s counts and samples added to `stats`, `spent_ns` to its decode time.
inline void add_decoded(pm_sampler_stats& stats, const pm_decoded& d, std::int64_t spent_ns) {
  stats.decode_passes += d.passes;
  stats.overflows += d.overflows;
  stats.irregular += d.irregular;
  stats.decode_cpu_ns += spent_ns;
  stats.decoded_to_ns = std::max(stats.decoded_to_ns, d.decoded_to_ns);
  if (d.samples.empty()) return;
  if (stats.samples == 0) stats.first_ns = d.samples.front().begin_ns;
  stats.last_ns = d.samples.back().end_ns;
  const auto n = static_cast<double>(stats.samples);
  double sum = 0;
  for (const auto& s : d.samples) sum += static_cast<double>(s.end_ns - s.begin_ns);
  stats.mean_interval_ns = (stats.mean_interval_ns * n + sum) / (n + static_cast<double>(d.samples.size()));
  stats.samples += d.samples.size();
}

#if TRACEML_HAS_PM_SAMPLING
/// The host counter-data image and the passes that fill and evaluate it. Not thread-safe: the
/// sampler runs one pass at a time.
class pm_sample_decoder {
 public:
  /// Sizes the image for `max_samples` samples of `config`'s metrics and initializes it. "" when
  /// done; otherwise why not.
  std::string prepare(const pm_sampling_api& api, const pm_sampling_config& config, std::uint32_t max_samples) {
    auto p = cupti_params<CUpti_PmSampling_GetCounterDataSize_Params>(
        CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE);
    std::vector<const char*> c;
    for (const auto& n : config.metric_names()) c.push_back(n.c_str());
    p.pPmSamplingObject = config.object();
    p.pMetricNames = c.data();
    p.numMetrics = c.size();
    p.maxSamples = max_samples;
    if (auto why = pm_call_failure(api, "cuptiPmSamplingGetCounterDataSize", api.counter_data_size(&p)); !why.empty())
      return why;
    counter_data_.assign(p.counterDataSize, 0);
    return pm_call_failure(api, "cuptiPmSamplingCounterDataImageInitialize", initialize_image(api, config));
  }

  /// The next sample is the first of a session (sampling started again): it spans the gap, so it is
  /// dropped as irregular.
  void new_session() noexcept { seen_first_ = false; }

  /// One decode pass per call until the hardware buffer is empty, at most 64 (a runaway buffer cannot
  /// hold the caller forever). A failure ends the passes, with `failure` set.
  pm_decoded decode(const pm_sampling_api& api, const pm_sampling_config& config) {
    pm_decoded out;
    for (int pass = 0; pass < 64; ++pass) {
      if (!decode_pass(api, config, out)) break;
    }
    return out;
  }

 private:
  CUptiResult initialize_image(const pm_sampling_api& api, const pm_sampling_config& config) {
    auto p = cupti_params<CUpti_PmSampling_CounterDataImage_Initialize_Params>(
        CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    p.pPmSamplingObject = config.object();
    p.counterDataSize = counter_data_.size();
    p.pCounterData = counter_data_.data();
    return api.counter_data_initialize(&p);
  }

  /// One pass: the hardware buffer into the image, its samples evaluated into `out`, the image
  /// initialized again. True when the image filled up and another pass may find more.
  bool decode_pass(const pm_sampling_api& api, const pm_sampling_config& config, pm_decoded& out) {
    auto d = cupti_params<CUpti_PmSampling_DecodeData_Params>(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
    d.pPmSamplingObject = config.object();
    d.pCounterDataImage = counter_data_.data();
    d.counterDataImageSize = counter_data_.size();
    const CUptiResult r = api.decode(&d);
    ++out.passes;
    if (r == CUPTI_ERROR_OUT_OF_MEMORY || d.overflow) ++out.overflows;
    if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_OUT_OF_MEMORY) {
      out.failure = pm_call_failure(api, "cuptiPmSamplingDecodeData", r);
      return false;
    }
    auto info = cupti_params<CUpti_PmSampling_GetCounterDataInfo_Params>(
        CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE);
    info.pCounterDataImage = counter_data_.data();
    info.counterDataImageSize = counter_data_.size();
    if (api.counter_data_info(&info) != CUPTI_SUCCESS) return false;
    evaluate(api, config, info.numCompletedSamples, out);
    if (const CUptiResult ri = initialize_image(api, config); ri != CUPTI_SUCCESS) {
      out.failure = pm_call_failure(api, "cuptiPmSamplingCounterDataImageInitialize", ri);
      return false;
    }
    // Out of memory: the samples CUPTI could not hold are lost (counted); decoding again at once
    // would only repeat it.
    return r == CUPTI_SUCCESS && d.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
  }

  /// The image's first `completed` samples: their times and metric values into pm_samples; a sample
  /// CUPTI cannot describe or evaluate is skipped, an irregular one counted and dropped.
  void evaluate(const pm_sampling_api& api, const pm_sampling_config& config, std::size_t completed, pm_decoded& out) {
    std::vector<const char*> names;
    for (const auto& n : config.metric_names()) names.push_back(n.c_str());
    std::vector<double> values(names.size());
    for (std::size_t i = 0; i < completed; ++i) {
      auto si = cupti_params<CUpti_PmSampling_CounterData_GetSampleInfo_Params>(
          CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE);
      si.pPmSamplingObject = config.object();
      si.pCounterDataImage = counter_data_.data();
      si.counterDataImageSize = counter_data_.size();
      si.sampleIndex = i;
      if (api.sample_info(&si) != CUPTI_SUCCESS) continue;
      auto ev = cupti_params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
          CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
      ev.pHostObject = config.host();
      ev.pCounterDataImage = counter_data_.data();
      ev.counterDataImageSize = counter_data_.size();
      ev.rangeIndex = i;
      ev.ppMetricNames = names.data();
      ev.numMetrics = names.size();
      ev.pMetricValues = values.data();
      if (api.host_evaluate(&ev) != CUPTI_SUCCESS) continue;
      const bool first = !seen_first_;
      seen_first_ = true;
      out.decoded_to_ns = std::max(out.decoded_to_ns, static_cast<std::int64_t>(si.endTimestamp));
      if (auto sample = sample_from_values(si.startTimestamp, si.endTimestamp, values, config.layout(), first))
        out.samples.push_back(*sample);
      else
        ++out.irregular;
    }
  }

  std::vector<std::uint8_t> counter_data_;  // the host counter-data image one pass fills
  bool seen_first_ = false;                 // the session's first sample was seen (and dropped)
};
#endif

}  // namespace detail
TRACEML_END_NAMESPACE
