// traceml: kernel attribution with CUPTI activity records, and GPU time per phase on every step.
//
// Composed of four pieces: the activity reader (cupti_reader.hpp: CUPTI loaded with dlopen,
// buffers, parsing, clock); boundary markers (boundary_markers.hpp: a tiny memset per boundary of a
// step with records on, so that attribution knows by stream order which phase launched each kernel); the
// record switch (record_switch.hpp: which steps are recorded, records on and off around them); the
// step-readiness rule (step_readiness.hpp, pure: which steps' records are complete). Besides, every
// step and phase is timed with CUDA events (event_timer.hpp): GPU time per phase on every step.
//
// The source only measures: collect() delivers raw activity (activity.hpp) and the profiler turns
// it into reports in one place (attribution_stage.hpp). Threads: CUPTI hands full buffers to its
// own thread (parsed there); a worker of ours flushes CUPTI periodically and switches records off
// behind recorded steps; the training thread enqueues markers and events and, at step end, copies
// the step's spans. Every failure (no library, insufficient privileges, another CUPTI client such
// as Nsight Systems) is reported once, and make_best_gpu_source() (source_factory.hpp) falls back
// to CUDA events.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/detail/scope_pairing.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/boundary_markers.hpp"
#include "traceml/gpu/cuda_runtime.hpp"
#include "traceml/gpu/cupti_reader.hpp"
#include "traceml/gpu/device_check.hpp"
#include "traceml/gpu/event_sampling.hpp"
#include "traceml/gpu/event_timer.hpp"
#include "traceml/gpu/gpu_memory.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/gpu/record_switch.hpp"
#include "traceml/gpu/recording_schedule.hpp"
#include "traceml/gpu/step_readiness.hpp"
#include "traceml/thread_identity.hpp"

TRACEML_BEGIN_NAMESPACE

struct cupti_options {
  std::size_t buffer_bytes = std::size_t{4} << 20;  ///< one activity buffer (~20k kernel records)
  std::size_t buffer_count = 16;                    ///< preallocated; none is allocated later
  bool markers = true;                              ///< boundary markers (exact attribution); off: by time only
  bool memcpy = true;                               ///< MEMCPY records
  int flush_period_ms = 100;                        ///< how often the worker asks CUPTI for finished records
  bool timestamp_callback = true;                   ///< let CUPTI stamp records with now_ns() directly when it can
  bool finalize = true;   ///< cuptiFinalize on destruction (not after recording only some steps: stop())
  int max_lag_steps = 8;  ///< a recorded step is complete after this many later steps ended
  /// CUDA-event timing of every step and phase (span_ns on every step, recorded or not; measured
  /// +0.13% step time on the graphed Qwen3 trainer). Off: unrecorded steps carry no GPU time.
  bool phase_events = true;
  /// The share of the run the events may cost the training thread: on steps too short for that,
  /// one step in N is timed, and every step CUPTI records (event_sampling.hpp). 0: every step.
  double event_budget = default_event_budget;
  std::size_t event_pool = 4096;  ///< events created up front (two per step/phase scope in flight)
  /// Which steps CUPTI records (record_switch.hpp; costs measured in docs/attribution.md). Other
  /// steps run as if untraced and report kernels_measured = false, with span_ns from the events.
  /// overhead_budget > 0: as many steps as keep CUPTI's measured cost under this share of the run
  /// time (recording_budget.hpp); the first recording comes right after 3 warm-up and 3 baseline
  /// steps. 0.25% by default: with the events' 0.1% (event_sampling.hpp) and the rest of the
  /// hooks the whole stays under 0.5% of a step whose GPU work is the bottleneck (the graphed Qwen3
  /// trainer on an H100 measured +0.52% and +0.58% at the earlier 0.5%, of which the recordings
  /// took 0.42-0.47%; benchmarks/qwen3_overhead --modes defaults). 0: every step (CUPTI's full
  /// cost), or one in sample_every.
  double overhead_budget = default_recording_budget;
  int sample_every = 1;
  /// Instead of the budget and sample_every: windows of consecutive recorded steps, as
  /// torch.profiler.schedule lays them out (recording_schedule.hpp). Warm-up steps run with records
  /// on and their kernels are discarded; each finished window reaches
  /// profiler_options::on_trace_ready. Warm-up and active steps pay CUPTI's full per-launch cost,
  /// whatever the budget says.
  std::optional<recording_schedule> schedule;
  const char* library = nullptr;   ///< CUPTI library path; default: the one found at build time
  stream_provider current_stream;  ///< see cuda_stream.hpp
  memory_sampler memory;           ///< called at each step end
};

/// Kernel attribution with CUPTI plus CUDA-event phase timing. Construct, check ok() (or use
/// make_best_gpu_source), hand it to the profiler. One per process at a time (CUPTI has one
/// activity client).
///
/// Locks. Each piece's lock is a leaf, never held while another is taken, except: the worker holds
/// state_mu_ while it asks the record switch whether a switch-off is pending (order: state_mu_,
/// then record_switch's). hook_mu_ (what each closed scope left on the stream, until its step
/// ends; open scopes sit in per-thread stacks that need no lock) and state_mu_ (pending steps,
/// flush counts, seen markers, the worker's stop flag) are never held together.
class cupti_source : public gpu_source {
 public:
  explicit cupti_source(cupti_options o = {})
      : opt_(std::move(o)),
        markers_(opt_.markers),
        reader_(markers_),
        switch_(opt_.overhead_budget, opt_.sample_every, opt_.schedule, reader_) {
    start();
  }
  ~cupti_source() override { stop(); }
  cupti_source(const cupti_source&) = delete;
  cupti_source& operator=(const cupti_source&) = delete;

  /// True when CUPTI tracing is running; otherwise why() says what failed.
  bool ok() const noexcept { return running_; }
  const std::string& why() const noexcept { return why_; }

  const char* name() const noexcept override { return "cupti"; }
  bool wants_scope_hooks() const noexcept override {
    return running_ && (opt_.markers || switch_.sampling() || events_ != nullptr);
  }

  /// Hot: on a recorded step a marker (one ~20 KB cudaMemsetAsync, a few microseconds of CPU), on
  /// every step one event record (~1-2 us); no lock but the record switch's at a step's begin. The
  /// marker goes before the event, so that event times do not contain it. Micro-batches get neither.
  void on_scope_begin(phase_kind kind, const char*, std::int32_t step, std::int32_t) noexcept override {
    if (kind == phase_kind::microbatch || !running_) return;
    if (kind == phase_kind::step) {
      switch_.begin_step(step);
      sampling_.begin_step();
    }
    const bool recorded = switch_.current();
    const bool timed = events_ && (recorded || sampling_.timing());
    if (!recorded && !timed) {
      scopes_.begin(open_scope{});  // keeps begins and ends paired
      return;
    }
    const cudaStream_t s = detail::stream_of(opt_.current_stream);
    // Steps without records get no markers: an entry with marker 0 keeps begins and ends paired.
    // A schedule's warm-up steps do get them, so that their kernels are claimed exactly by them
    // (and discarded) rather than spilling by time into the first active step.
    open_scope o{recorded ? markers_.enqueue(s) : 0, s, nullptr};
    if (timed) o.event = timed_record(s);
    if (!scopes_.begin(o) && events_) events_->release(o.event);  // not kept: this scope stays unmeasured
  }
  bool step_timed() const noexcept override { return events_ && (switch_.current() || sampling_.timing()); }

  /// Hot: as on_scope_begin, on the stream of the matching begin (the event before the marker),
  /// plus an uncontended lock to keep what the scope left until its step ends.
  void on_scope_end(const span_record& r) noexcept override {
    if (r.kind == phase_kind::microbatch || !running_) return;
    open_scope b{};
    if (!scopes_.end(b)) return;
    event_pair ev{b.event, b.event ? timed_record(b.stream) : nullptr};
    if (!ev.end && events_) events_->release(ev);  // half a pair times nothing
    const std::uint64_t end_marker = b.marker ? markers_.enqueue(b.stream) : 0;
    if (r.kind == phase_kind::step) {
      switch_.end_step(b.stream, end_marker, r.end_ns - r.begin_ns);
      sampling_.end_step(r.end_ns - r.begin_ns);
    }
    bool kept = false;
    {
      detail::lock_guard lock(hook_mu_);
      kept = scopes_.closed(r, closed_scope{b.marker, end_marker, ev});
    }
    if (!kept && events_) events_->release(ev);
  }

  /// Training thread, as the step closes (before the next step begins): the step's recording
  /// decision and a memory sample, kept for step_ended(). Cost: the memory sampler, a short lock,
  /// and on a recorded step the worker's wake-up.
  void step_closed(const span_record& step) noexcept override {
    if (!running_) return;
    try {
      closed_step c{step.step, switch_.current(), switch_.current_slot(), {}};
      if (opt_.memory) c.memory = opt_.memory();
      {
        detail::lock_guard lock(hook_mu_);
        closed_steps_.push_back(c);
      }
      // A recorded step's switch-off is pending: the worker polls it from now on. Only recorded
      // steps pay this wake-up (a system call).
      if (c.recorded) wake_.notify_one();
    } catch (const std::exception& e) {
      report_once("cupti-step-closed", std::string("a step's memory sample failed: ") + e.what());
    }
  }

  /// Once per step, on the profiler's step worker (later steps may have begun): takes what
  /// step_closed() kept and the step's spans, marker numbers and events until its records are
  /// complete.
  void step_ended(std::int32_t step, const std::vector<span_record>& spans) override {
    if (!running_) return;
    pending_step p;
    p.step = step;
    closed_step c{step, switch_.current(), switch_.current_slot(), {}};  // without step_closed(): now
    bool closed_seen = false;
    {
      detail::lock_guard lock(hook_mu_);
      while (!closed_steps_.empty() && closed_steps_.front().step <= step) {
        if (closed_steps_.front().step == step) {
          c = closed_steps_.front();
          closed_seen = true;
        }
        closed_steps_.pop_front();
      }
      for (auto& s : spans) {
        if (s.step != step || s.kind == phase_kind::microbatch) continue;
        const closed_scope cs = scopes_.take(s);
        p.spans.push_back(marked_span{s, cs.begin_marker, cs.end_marker});
        p.events.push_back(cs.events);
        if (s.kind == phase_kind::step) p.end_marker = cs.end_marker;
      }
      // Scopes of this step or earlier ones that no span claimed: nothing to attribute them to;
      // their events go back. Later steps' scopes stay for their own step end.
      scopes_.drop_through(step, [this](closed_scope& cs) {
        if (events_) events_->release(cs.events);
      });
    }
    p.recorded = c.recorded;  // the step's own decision (readiness waits for its records)
    p.slot = c.slot;
    p.memory = closed_seen || !opt_.memory ? c.memory : opt_.memory();
    {
      detail::lock_guard lock(state_mu_);
      p.flushes_at_end = flushes_done_;
      steps_.push_back(std::move(p));
    }
    if (!closed_seen) wake_.notify_one();  // step_closed() did not wake the worker for a switch-off
  }

  /// Raw activity: every record and marker time parsed since the last call, and the steps that are
  /// complete (step_readiness.hpp). With `final`: synchronizes the device, flushes CUPTI and
  /// delivers every step.
  gpu_delivery collect(bool final) override {
    gpu_delivery d;
    d.final = final;
    if (!running_) return d;
    if (final) {
      detail::rt::cudaDeviceSynchronize();
      detail::rt::cudaGetLastError();
      reader_.flush(/*forced=*/true);
    }
    reader_.take(d.records, d.markers);
    if (reader_.take_refused())
      report_once("cupti-buffers",
                  "CUPTI activity buffers exhausted: records are being dropped (raise "
                  "cupti_options::buffer_count or buffer_bytes); steps report dropped_records");
    detail::lock_guard lock(state_mu_);
    for (const auto& m : d.markers) seen_markers_.insert(m.seq);
    // Events are read as soon as they completed, whether or not the step's records are complete:
    // they go back to the pool while a recorded step waits for its flush.
    bool events_done = true;  // in order: one unfinished step holds back the rest
    for (auto& p : steps_) {
      if (!p.events_read && events_done) {
        for (const auto& e : p.events) events_done = events_done && event_timer::done(e, final);
        if (events_done) read_events(p);
      }
      p.events_done = events_done && p.events_read;
    }
    const readiness_facts f{final, switch_.sampling(), flushes_done_, off_flushed_marker_, opt_.max_lag_steps};
    const std::size_t n = ready_prefix(steps_, f, seen_markers_);
    std::uint64_t newest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      newest = std::max(newest, steps_[i].end_marker);
      d.steps.push_back(deliver(steps_[i]));
    }
    if (n) d.steps.front().dropped_records = reader_.take_dropped();
    steps_.erase(steps_.begin(), steps_.begin() + static_cast<std::ptrdiff_t>(n));
    for (auto it = seen_markers_.begin(); it != seen_markers_.end();)
      it = *it <= newest ? seen_markers_.erase(it) : std::next(it);
    return d;
  }

  std::string status() const override {
    if (!running_) return "kernel attribution off: " + why_;
    std::string s = "CUPTI kernel attribution on (";
    s += opt_.markers ? "stream-ordered boundary markers" : "by time, markers off";
    s += ", clock: ";
    s += reader_.clock_callback() ? "CUPTI stamps now_ns()" : "CUPTI clock mapped by offset";
    s += "; " + switch_.describe() + ")";
    s += events_ ? "; CUDA-event phase timing " + sampling_.describe() +
                       (sampling_.every() > 1 ? " and every recorded step" : "")
                 : "; CUDA-event phase timing off" + (events_why_.empty() ? std::string() : " (" + events_why_ + ")");
    return s;
  }

  std::shared_ptr<const kernel_name_table> kernel_names() const noexcept override { return reader_.kernel_names(); }

  /// Records CUPTI dropped (buffers full or refused) since the start.
  std::uint64_t dropped_records() const noexcept { return reader_.dropped_total(); }

  /// Sampling: how often CUPTI records were switched on, and the training thread's time spent
  /// doing it (cuptiActivityEnable calls), since the start.
  std::uint64_t record_switches() const noexcept { return switch_.switches(); }
  std::int64_t record_switch_ns() const noexcept { return switch_.switch_ns(); }
  /// With a recording budget: the share of the run's time the recordings cost so far, as the budget
  /// measured it (the status line's "N% spent": the steps' slowdown and their records' processing);
  /// 0 without one.
  double recordings_spent_share() const { return switch_.spent_share(); }
  /// Of recordings_spent_share(), the recorded steps' own slowdown (the processing is the
  /// attribution worker's CPU, measured as that thread's).
  double recordings_step_share() const { return switch_.step_share(); }
  /// The attribution worker's CPU, charged to the recording budget (charge_processing above).
  void charge_processing(std::int64_t cpu_ns) noexcept override { switch_.charge_processing(cpu_ns); }

 private:
  /// Hot: one event record, its time charged to the events' budget.
  cudaEvent_t timed_record(cudaStream_t s) noexcept {
    const std::int64_t t0 = now_ns();
    const cudaEvent_t e = events_->record(s);
    sampling_.add_cost(now_ns() - t0);
    return e;
  }

  struct open_scope {
    std::uint64_t marker = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t event = nullptr;
  };
  struct closed_scope {
    std::uint64_t begin_marker = 0, end_marker = 0;
    event_pair events;
  };
  /// What step_closed() took on the training thread, until step_ended() runs.
  struct closed_step {
    std::int32_t step = -1;
    bool recorded = false;
    schedule_slot slot;
    memory_sample memory;
  };

  struct pending_step : readiness_step {
    std::int32_t step = -1;
    memory_sample memory;
    schedule_slot slot;  // a schedule's warm-up step: records on, kernels discarded
    std::vector<marked_span> spans;
    std::vector<event_pair> events;             // parallel to spans, until read
    std::vector<std::int64_t> event_ns;         // parallel to spans, once read (-1: untimed)
    std::vector<std::int64_t> event_offset_ns;  // parallel: from the step's begin event
    bool events_read = false;
  };

  void read_events(pending_step& p) {  // state_mu_ held; the events completed
    p.event_ns.assign(p.spans.size(), -1);
    p.event_offset_ns.assign(p.spans.size(), -1);
    std::size_t step_index = p.spans.size();
    for (std::size_t i = 0; i < p.spans.size(); ++i)
      if (p.spans[i].span.kind == phase_kind::step) step_index = i;
    if (events_) events_->read_step(p.events, step_index, p.event_ns, p.event_offset_ns);
    p.events.clear();
    p.events_read = true;
  }

  static step_activity deliver(pending_step& p) {  // state_mu_ held; events read
    step_activity a;
    a.step = p.step;
    a.recorded = p.recorded && p.slot.phase != schedule_phase::warmup;
    a.discard_records = p.recorded && p.slot.phase == schedule_phase::warmup;
    a.schedule = p.slot;
    a.memory = p.memory;
    for (std::size_t i = 0; i < p.spans.size(); ++i)
      a.spans.push_back(timed_span{p.spans[i],
                                   i < p.event_ns.size() ? p.event_ns[i] : -1,
                                   i < p.event_offset_ns.size() ? p.event_offset_ns[i] : -1,
                                   {}});
    return a;
  }

  void start() {
    const cuda_device_check device = check_cuda_device();
    if (!device.ok()) {
      why_ = device.why;
      return;
    }
    cupti_reader_options ro;
    ro.buffer_bytes = opt_.buffer_bytes;
    ro.buffer_count = opt_.buffer_count;
    ro.memcpy = opt_.memcpy;
    ro.timestamp_callback = opt_.timestamp_callback;
    ro.drop_unfinished = switch_.sampling();
    ro.library = opt_.library;
    if (!reader_.start(ro, why_)) return;
    switch_.start();
    markers_.prepare();
    if (opt_.phase_events) {
      events_ = std::make_unique<event_timer>(opt_.event_pool);
      if (!events_->ok()) {
        events_.reset();
        events_why_ = "could not create CUDA events";
      }
    }
    running_ = true;
    worker_ = std::thread([this] {
      detail::name_this_thread("traceml cupti");
      worker_loop();
    });
  }

  void stop() {
    if (running_) {
      {
        detail::lock_guard lock(state_mu_);
        stopping_ = true;
      }
      wake_.notify_all();
      if (worker_.joinable()) worker_.join();
      running_ = false;
      detail::rt::cudaDeviceSynchronize();
      detail::rt::cudaGetLastError();
      reader_.flush(/*forced=*/true);
    }
    // Not after sampling: on an H200 (CUDA 13.0) a CUDA-graph replay after a sampling source had
    // been finalized failed with "unspecified launch failure", twice; an every-step source
    // finalized without trouble. With every kind disabled CUPTI stays loaded but idle.
    reader_.stop(opt_.finalize && !switch_.sampling());
    markers_.release();
  }

  /// Flushes CUPTI every flush_period_ms, and performs pending switch-offs as soon as the GPU
  /// passed the recorded step (polled every millisecond while one is pending).
  void worker_loop() {
    auto next_flush = std::chrono::steady_clock::now();
    detail::unique_lock lock(state_mu_);
    while (!stopping_) {
      const bool pending = switch_.off_pending();
      if (pending)
        wake_.wait_for(lock.native(), std::chrono::milliseconds(1));
      else if (opt_.flush_period_ms > 0)
        wake_.wait_until(lock.native(), next_flush);
      else
        wake_.wait_for(lock.native(), std::chrono::milliseconds(10));  // no periodic flush: only switch-offs to watch
      if (stopping_) break;
      if (pending) {
        lock.unlock();
        std::uint64_t marker = 0;
        const bool switched = switch_.switch_off_if_due(marker);
        lock.lock();
        if (switched) {
          ++flushes_done_;
          off_flushed_marker_ = std::max(off_flushed_marker_, marker);
        }
      }
      if (opt_.flush_period_ms > 0 && std::chrono::steady_clock::now() >= next_flush) {
        lock.unlock();
        reader_.flush(/*forced=*/false);  // delivers finished records through the reader, on this thread
        reader_.sample_clock_offset();
        lock.lock();
        ++flushes_done_;
        next_flush = std::chrono::steady_clock::now() + std::chrono::milliseconds(opt_.flush_period_ms);
      }
    }
  }

  cupti_options opt_;
  std::string why_, events_why_;
  std::atomic<bool> running_{false};
  boundary_markers markers_;
  cupti_reader reader_;                         // decodes markers_
  record_switch switch_;                        // switches reader_'s records
  event_sampling sampling_{opt_.event_budget};  // which steps the events time (training thread)
  std::unique_ptr<event_timer> events_;         // nullptr: phase_events off or no event could be made

  detail::mutex hook_mu_;  // also guards closed_steps_
  detail::scope_pairing<open_scope, closed_scope> scopes_;
  std::deque<closed_step> closed_steps_ TRACEML_GUARDED_BY(hook_mu_);  // step_closed() to step_ended(), in step order

  detail::mutex state_mu_;
  std::condition_variable wake_;
  bool stopping_ TRACEML_GUARDED_BY(state_mu_) = false;
  std::deque<pending_step> steps_ TRACEML_GUARDED_BY(state_mu_);
  std::uint64_t flushes_done_ TRACEML_GUARDED_BY(state_mu_) = 0;
  // records up to this end marker were force-flushed
  std::uint64_t off_flushed_marker_ TRACEML_GUARDED_BY(state_mu_) = 0;
  // marker times delivered, of steps not yet complete
  std::unordered_set<std::uint64_t> seen_markers_ TRACEML_GUARDED_BY(state_mu_);
  std::thread worker_;
};

TRACEML_END_NAMESPACE
