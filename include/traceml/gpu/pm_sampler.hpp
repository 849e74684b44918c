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
// This class owns the sampling's lifecycle (start, pause, resume, stop) and its decoding thread; it
// composes the configuration (pm_sampling_config.hpp: which counters, the config image, the sampling
// object) and the decoding (pm_sample_decoder.hpp: passes of the counter-data image into pm_samples).
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
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/cuda_runtime.hpp"
#include "traceml/gpu/device_check.hpp"
#include "traceml/gpu/pm_sample_decoder.hpp"
#include "traceml/gpu/pm_samples.hpp"
#include "traceml/gpu/pm_sampling_api.hpp"
#include "traceml/gpu/pm_sampling_config.hpp"
#include "traceml/thread_identity.hpp"

TRACEML_BEGIN_NAMESPACE

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
    if (detail::rt::cudaGetDevice(&current) != cudaSuccess) current = 0;
    const int dev = opt_.device < 0 ? current : opt_.device;
    detail::rt::cudaSetDevice(dev);
    detail::rt::cudaFree(nullptr);       // the primary context must exist before the profiler attaches to it
    detail::rt::cudaSetDevice(current);  // the caller's device stays its own
    detail::rt::cudaGetLastError();
    device_ = static_cast<std::size_t>(dev);
    std::string why;
    if (!api_.load(why)) return fail(why);
    if (std::string failed = configure(); !failed.empty()) return fail(failed);
    if (std::string failed = detail::pm_call_failure(api_, "cuptiPmSamplingStart", start_hardware()); !failed.empty())
      return fail(failed);
    running_ = true;
    detail::pm_sampling_live().store(true);
    // One decode here, on the caller's thread: whatever CUPTI sets up for decoding exists before
    // process_pm_sampler() registers the worker's end at exit (exit handlers run in reverse order).
    decode_all();
    if (opt_.decode_period_ms > 0)
      worker_ = std::thread([this] {
        detail::name_this_thread("traceml counters");
        decode_loop();
      });
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
        detail::lock_guard lock(wake_mu_);
        stopping_ = true;
      }
      wake_.notify_all();
      if (worker_.joinable()) worker_.join();
      if (!paused_now()) {
        {
          detail::lock_guard lock(cupti_mu_);
          if (!in_gap_) stop_hardware();
          in_gap_ = false;
        }
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
      detail::lock_guard lock(cupti_mu_);  // no decode pass runs while the state changes
      detail::lock_guard wake(wake_mu_);
      if (paused_) return;
      if (const CUptiResult r = in_gap_ ? CUPTI_SUCCESS : stop_hardware(); r != CUPTI_SUCCESS) {
        detail::lock_guard out(out_mu_);
        if (decode_failure_.empty())
          decode_failure_ = "hardware counters could not pause: " +
                            detail::describe_pm_failure("cuptiPmSamplingStop", static_cast<int>(r), api_.describe(r));
        return;  // still sampling: keep decoding, and dropping
      }
      paused_ = true;
      in_gap_ = false;
      detail::lock_guard out(out_mu_);
      stats_.gap_from_ns = -1;
    }
    decode_all();  // empties the hardware buffer; nothing is kept while paused
    detail::lock_guard out(out_mu_);
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
      detail::lock_guard lock(cupti_mu_);
      detail::lock_guard wake(wake_mu_);
      if (paused_) {
        if (!start_again("hardware counters could not start again: ")) return false;
        paused_ = false;
        budget_.open_window();
      }
    }
    wake_.notify_all();
    detail::lock_guard out(out_mu_);
    keep_ = true;
    return true;
#else
    return false;
#endif
  }
  /// Whether the hardware is sampling now (started and not paused).
  bool sampling_now() const {
#if TRACEML_HAS_PM_SAMPLING
    detail::lock_guard wake(wake_mu_);
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
      detail::lock_guard lock(wake_mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (worker_.joinable()) worker_.join();
#endif
  }

  /// The decoding's budget for the profiler that takes the sampler (pm_decode_budget.hpp): `budget`
  /// of one core, windows of `window_ms`. A window opens now.
  void set_decode_budget(double budget, int window_ms) {
#if TRACEML_HAS_PM_SAMPLING
    detail::lock_guard lock(cupti_mu_);
    budget_.set(budget, detail::decode_window_passes(window_ms, opt_.decode_period_ms));
#else
    (void)budget, (void)window_ms;
#endif
  }

  /// Decodes now on the caller's thread (the worker's pass may run as well: serialised) and opens a
  /// window of the budget, starting the hardware again if a gap had stopped it: the caller wants the
  /// samples from here on (a clock calibration, the end of a run).
  void flush() {
#if TRACEML_HAS_PM_SAMPLING
    if (running_) decode_all();
#endif
  }

  bool running() const noexcept { return running_; }
  std::int64_t interval_ns() const noexcept { return opt_.interval_ns; }
  /// The samples decoded since the previous take(), in time order.
  std::vector<pm_sample> take() {
    detail::lock_guard lock(out_mu_);
    return std::exchange(out_, {});
  }
  pm_sampler_stats stats() const {
    detail::lock_guard lock(out_mu_);
    return stats_;
  }
  /// The metric names in use, in the order they are evaluated.
  const std::vector<std::string>& metrics() const noexcept {
#if TRACEML_HAS_PM_SAMPLING
    return config_.metric_names();
#else
    static const std::vector<std::string> none;
    return none;
#endif
  }
  /// "" while fine; otherwise why there are no samples.
  const std::string& why() const noexcept { return why_; }
  /// "" while decoding works; otherwise why samples stopped coming during the run.
  std::string decode_failure() const {
    detail::lock_guard lock(out_mu_);
    return decode_failure_;
  }
  std::string status() const {
    if (!why_.empty()) return why_;
    std::string s = "hardware counters sampled every " + std::to_string(opt_.interval_ns / 1000) + " us:";
    for (const auto& m : metrics()) s += " " + m;
    const std::string failed = decode_failure();
    return failed.empty() ? s : s + "; " + failed;
  }
  /// What the decoding budget chose and why ("" without a budget, or before its first window closed).
  std::string budget_status() const {
    detail::lock_guard lock(out_mu_);
    return budget_text_;
  }

 private:
  bool fail(const std::string& why) {
    why_ = "hardware counters (CUPTI PM sampling) unavailable: " + why;
    release();
    return false;
  }

#if TRACEML_HAS_PM_SAMPLING
  /// The counters chosen and configured, the decoder's image sized for them; "" or why not.
  std::string configure() {
    if (std::string why = config_.configure(api_, device_, opt_); !why.empty()) return why;
    detail::lock_guard lock(cupti_mu_);
    return decoder_.prepare(api_, config_, detail::samples_per_pass(opt_));
  }

  /// Whether pause() stopped the hardware (read under wake_mu_: pause() and resume() may run on
  /// another thread).
  bool paused_now() {
    detail::lock_guard lock(wake_mu_);
    return paused_;
  }

  CUptiResult start_hardware() {
    auto p = detail::cupti_params<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
    p.pPmSamplingObject = config_.object();
    return api_.start(&p);
  }

  CUptiResult stop_hardware() {
    auto p = detail::cupti_params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
    p.pPmSamplingObject = config_.object();
    return api_.stop(&p);
  }

  /// A decode on demand (start, flush, pause, stop): a gap ends unless the sampler is paused, what
  /// the hardware holds is decoded, and a window of the budget opens. Serialised with the worker's
  /// passes. A failure here only stops decoding (said once through decode_failure()); the sampling
  /// object is torn down by stop(), on the thread that owns it, never by the worker.
  void decode_all() {
    detail::lock_guard lock(cupti_mu_);
    if (decode_failed_) return;
    if (!paused_now()) end_gap();
    decode_now();
    budget_.open_window();
  }

  /// The worker's pass (pm_decode_budget.hpp): in a window, the hardware buffer decoded and its
  /// samples evaluated; when the window closes, the hardware stopped for the gap; in the gap, nothing
  /// at all; when the gap ends, the hardware started again and a window begins.
  void periodic_pass() {
    detail::lock_guard lock(cupti_mu_);
    if (decode_failed_ || paused_now()) return;
    const std::int64_t period_ns = std::int64_t{opt_.decode_period_ms} * 1000000;
    const bool window = budget_.evaluating();
    // CPU time, not wall time: the budget is a share of a core, and a busy host would otherwise
    // charge the decoder for the time it waited to run.
    const std::int64_t t0 = thread_cpu_ns();
    if (window && end_gap()) decode_now();
    budget_.passed(window, thread_cpu_ns() - t0, period_ns);
    if (window && !budget_.evaluating()) begin_gap();
    std::string chosen = budget_.describe(period_ns);
    detail::lock_guard out(out_mu_);
    budget_text_ = std::move(chosen);
  }

  /// One decode of what the hardware holds, its samples kept (unless paused) and counted.
  void decode_now() TRACEML_REQUIRES(cupti_mu_) {
    const std::int64_t t0 = thread_cpu_ns();
    detail::pm_decoded got = decoder_.decode(api_, config_);
    const std::int64_t spent = thread_cpu_ns() - t0;
    if (!got.failure.empty()) decode_failed_ = true;
    detail::lock_guard out(out_mu_);
    if (!got.failure.empty()) decode_failure_ = "hardware counters stopped: " + got.failure;
    detail::add_decoded(stats_, got, spent);
    if (keep_) out_.insert(out_.end(), got.samples.begin(), got.samples.end());
  }

  /// A window closed with a gap chosen: the hardware stops (no counter traffic, nothing to decode)
  /// and the window's last samples are decoded. Where it cannot stop, the budget is dropped: every
  /// sample is evaluated from then on, and decode_failure() says why.
  void begin_gap() TRACEML_REQUIRES(cupti_mu_) {
    if (const CUptiResult r = stop_hardware(); r != CUPTI_SUCCESS) {
      budget_.set(0, budget_.window_passes());
      detail::lock_guard out(out_mu_);
      if (decode_failure_.empty())
        decode_failure_ = "hardware counters could not stop between the decoding budget's windows (" +
                          detail::describe_pm_failure("cuptiPmSamplingStop", static_cast<int>(r), api_.describe(r)) +
                          "): every sample is evaluated";
      return;
    }
    in_gap_ = true;
    decode_now();
    detail::lock_guard out(out_mu_);
    stats_.gap_from_ns = stats_.decoded_to_ns;
    ++stats_.gaps;
  }

  /// The gap ends: the hardware samples again (its first sample spans the gap and is dropped). False
  /// when CUPTI refuses to start (decoding stops, decode_failure() says why).
  bool end_gap() TRACEML_REQUIRES(cupti_mu_) {
    if (!in_gap_) return true;
    if (!start_again("hardware counters could not start again after a gap of the decoding budget: ")) {
      decode_failed_ = true;
      return false;
    }
    in_gap_ = false;
    detail::lock_guard out(out_mu_);
    stats_.gap_from_ns = -1;
    return true;
  }

  /// The hardware started again after a pause or a gap: its first sample, which spans the stop, is
  /// dropped. On a refusal, decode_failure() is `why` and the CUPTI failure; false.
  bool start_again(const char* why) TRACEML_REQUIRES(cupti_mu_) {
    if (const CUptiResult r = start_hardware(); r != CUPTI_SUCCESS) {
      detail::lock_guard out(out_mu_);
      decode_failure_ =
          why + detail::describe_pm_failure("cuptiPmSamplingStart", static_cast<int>(r), api_.describe(r));
      return false;
    }
    decoder_.new_session();
    return true;
  }

  void decode_loop() {
    // Decoding needs the device's context current on this thread (without it CUPTI crashes).
    detail::rt::cudaSetDevice(static_cast<int>(device_));
    detail::rt::cudaGetLastError();
    detail::unique_lock lock(wake_mu_);
    while (!stopping_) {
      wake_.wait_for(lock.native(), std::chrono::milliseconds(opt_.decode_period_ms),
                     [this]() TRACEML_REQUIRES(wake_mu_) { return stopping_; });
      // Paused: nothing arrives, so sleep until resumed (or stopped) instead of polling.
      wake_.wait(lock.native(), [this]() TRACEML_REQUIRES(wake_mu_) { return stopping_ || !paused_; });
      if (stopping_) break;
      lock.unlock();
      periodic_pass();
      lock.lock();
    }
  }
#endif

  void release() {
#if TRACEML_HAS_PM_SAMPLING
    config_.release(api_);
#endif
  }

  pm_sampler_options opt_;
  std::string why_;
  bool running_ = false;
#if TRACEML_HAS_PM_SAMPLING
  detail::pm_sampling_api api_;
  std::size_t device_ = 0;
  detail::pm_sampling_config config_;  // written by start() before the worker exists, then only read
  detail::pm_sample_decoder decoder_ TRACEML_GUARDED_BY(cupti_mu_);
  std::thread worker_;
  mutable detail::mutex wake_mu_;
  std::condition_variable wake_;
  bool stopping_ TRACEML_GUARDED_BY(wake_mu_) = false;
  bool paused_ TRACEML_GUARDED_BY(wake_mu_) = false;  // changed with cupti_mu_ held too
  detail::mutex cupti_mu_;                            // serialises decode passes (worker and flush())
  bool decode_failed_ TRACEML_GUARDED_BY(cupti_mu_) = false;
  bool in_gap_ TRACEML_GUARDED_BY(cupti_mu_) = false;  // the budget stopped the hardware between windows
  pm_decode_budget budget_ TRACEML_GUARDED_BY(cupti_mu_){
      opt_.decode_budget, detail::decode_window_passes(opt_.decode_window_ms, opt_.decode_period_ms)};
#endif
  mutable detail::mutex out_mu_;
  std::vector<pm_sample> out_ TRACEML_GUARDED_BY(out_mu_);
  pm_sampler_stats stats_ TRACEML_GUARDED_BY(out_mu_);
  std::string decode_failure_ TRACEML_GUARDED_BY(out_mu_);
  bool keep_ TRACEML_GUARDED_BY(out_mu_) = true;
  std::string budget_text_ TRACEML_GUARDED_BY(out_mu_);  // budget_.describe() after the last periodic pass
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
