// traceml: the profiler. One object per run: it collects the records of every step (from scopes or
// trainer callbacks), takes the GPU source's raw activity (if any) through the attribution stage
// (gpu/attribution_stage.hpp: the one place GPU facts are computed), computes statistics and
// writes the outputs. It is itself a trainer callback.
//
//   traceml::profiler_options opts;
//   opts.run_name = "mlp";
//   opts.json_path = "summary.json";          // every output is optional
//   traceml::profiler prof(opts);
//   for (...) { TRACEML_STEP(); ... }           // or drive prof's hooks from a callback_list
//   prof.finish();                              // prints the table, writes the files
//
// Cost: nothing on the hot path beyond the scopes themselves; at each step end, on the training
// thread, the GPU source's step_closed() (a memory sample) and a hand-off to the step worker (a few
// stores: detail/step_worker.hpp). The worker, a background thread, does the rest: one drain of the
// per-thread rings (bounded: the closing thread's own records and at most max_other_thread_records of
// other threads' per step, whatever they record), the step's statistics, one flushed JSONL line, the
// GPU source's step_ended() and collect() and the hand-off to the attribution worker (its own thread),
// and the live view's publish. profiler_options::background_step_end = false does it all at the step's
// end on the training thread instead.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "traceml/analysis/run_accumulator.hpp"
#include "traceml/analysis/summary.hpp"
#include "traceml/callback.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/activation.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/detail/output_file.hpp"
#include "traceml/detail/step_worker.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/attribution_worker.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/phase.hpp"
#include "traceml/recording_window.hpp"
#include "traceml/sinks/chrome_trace.hpp"
#include "traceml/sinks/html_report.hpp"
#include "traceml/sinks/json_summary.hpp"
#include "traceml/sinks/live_view.hpp"
#include "traceml/sinks/report_table.hpp"
#include "traceml/sinks/run_output.hpp"
#include "traceml/sinks/run_trace.hpp"
#include "traceml/stop_signal.hpp"

TRACEML_BEGIN_NAMESPACE

/// What a run is called and where its outputs go. Empty paths switch an output off.
struct profiler_options {
  std::string run_name = "run";
  std::size_t warmup_steps = 5;  ///< excluded from statistics (never more than half the run)
  double tokens_per_step = 0;    ///< for tokens/s; 0 = not reported
  double samples_per_step = 0;   ///< for samples/s; 0 = not reported
  std::string json_path;         ///< JSON summary, written by finish()
  std::string jsonl_path;        ///< one line per step, appended and flushed as each step ends
  std::string trace_path;        ///< Chrome/Perfetto trace, written by finish()
  std::string html_path;         ///< self-contained HTML report with charts, written by finish()
  /// The program's own outputs, written by finish() after the files above, each handed the finished
  /// run (sinks/run_output.hpp); a target not written is in failed_outputs().
  std::vector<run_output> outputs;
  bool print_table = true;  ///< print the terminal table at finish()
  bool live = false;  ///< live view on a terminal while the run goes on (also TRACEML_LIVE=1; sinks/live_view.hpp)
  std::size_t expected_steps = 0;  ///< steps the run will take, for the live view's "of N" and ETA; 0 = not known
  /// Steps kept in memory for result().steps and the JSON summary's "steps" (the JSONL has every
  /// step anyway). A longer run drops them once it passes this count, so that the profiler's memory
  /// does not grow with the run; statistics stream either way (summary.hpp).
  std::size_t keep_steps = exact_quantile_limit;
  /// Records a step's end takes, in all, from threads other than the one that closes the step (that
  /// thread's own are always taken whole): shared so that a thread that recorded at most its equal
  /// part loses nothing (detail::drain_step_end). Beyond it, other threads' records are left out and
  /// counted (summary.capped_records, said once): threads that record phases non-stop cannot slow the
  /// training loop. Each record taken costs the step end ~0.1-0.2 us; raise it for worker threads
  /// that record many phases per step.
  std::size_t max_other_thread_records = 256;
  /// A step's end work (draining the records, the step's statistics, its JSONL line, the GPU
  /// hand-off, the live view) runs on a background thread, the step worker, so that the training
  /// thread's step end only publishes the step (about 0.1 us; benchmarks/cpu_step_cost). The work
  /// is done within 250 ms of the step's end (detail/step_worker.hpp), and the training thread does
  /// it itself when the worker falls 1024 steps behind or the thread's record ring is half full (a step of
  /// thousands of phases), so nothing is dropped for want of a drain. false: at each step's end, on
  /// the thread that ends it (each step end then drains exactly that step's records: what
  /// max_other_thread_records bounds is a step end, not a drain of several steps; the worker's drain
  /// of N steps takes N + 1 times it, the one more for the step the training thread has open).
  bool background_step_end = true;
  std::size_t trace_last_steps = 200;                       ///< the Chrome trace keeps the last this many steps ...
  std::size_t trace_recorded_steps = 8;                     ///< ... and, before them, this many with GPU kernel records
  std::vector<std::pair<std::string, std::string>> config;  ///< echoed into the outputs
  /// This process's rank in a data-parallel run, written into every output (rank_identity.hpp);
  /// unset: RANK and WORLD_SIZE of the environment, as torchrun sets them (neither set: no rank).
  std::optional<rank_identity> rank;
  /// Called once per window of a recording schedule (gpu_source_options::cupti_opts.schedule), as
  /// torch.profiler's on_trace_ready: on the training thread, at the first step end after the
  /// window's last step came back from attribution (on the step worker), outside the profiler's lock; a window the run
  /// ended inside comes at finish() with complete = false. Without a schedule it is never called.
  ///   opts.on_trace_ready = [](const traceml::recording_window& w) {
  ///     w.write_chrome_trace("trace_" + std::to_string(w.cycle) + ".json"); };
  std::function<void(const recording_window&)> on_trace_ready;
  /// SIGINT or SIGTERM (Ctrl-C, kill, a batch scheduler's notice) no longer ends the process in the
  /// middle of a step, losing the summary, trace and report of every finished step. Instead the
  /// step running when the signal came goes on to its end; there, on the thread that ends the step,
  /// finish() writes every output of the finished steps (the summary's config gains "stopped_by":
  /// "SIGINT" or "SIGTERM"), on_signal_finish runs, and the process ends by the same signal (a
  /// shell sees status 130 or 143). A signal that comes after the last step is acted on at the end
  /// of finish(). A step that does not end (a hung collective, a kernel that never returns) is not
  /// interrupted: a second signal ends the process at once, by the default action, and then only
  /// the JSONL (each line flushed within about a millisecond of its step's end) has the finished steps. Off by default,
  /// since signal handlers belong to the program; where it is off, or the program ignores the signal, nothing changes.
  /// The handlers exist from the profiler's construction to the end of finish() (stop_signal.hpp);
  /// compiled out (TRACEML_DISABLE), no handler is installed.
  bool finish_on_signal = false;
  /// With finish_on_signal: called once the outputs are written, before the process ends, with the
  /// finished run and the signal number, on the thread that ended the step (write outputs of your
  /// own here; the process ends when it returns).
  std::function<void(const run_result&, int signal)> on_signal_finish;

  /// Options for a run called `name`:  traceml::profiler p(traceml::profiler_options::named("mlp"));
  static profiler_options named(std::string name) {
    profiler_options o;
    o.run_name = std::move(name);
    return o;
  }
  /// Every file output in `dir`, named after the run: <run>_summary.json, <run>_steps.jsonl,
  /// <run>_trace.json, <run>_report.html. The folder must exist.
  profiler_options& write_all_to(const std::string& dir) {
    return write_all_as((dir.empty() ? std::string(".") : dir) + "/" + run_name);
  }
  /// Every file output at `base`: <base>_summary.json, <base>_steps.jsonl, <base>_trace.json,
  /// <base>_report.html (the TRACEML_OUT session's base carries the rank and a suffix for a name taken).
  profiler_options& write_all_as(const std::string& base) {
    json_path = base + "_summary.json";
    jsonl_path = base + "_steps.jsonl";
    trace_path = base + "_trace.json";
    html_path = base + "_report.html";
    return *this;
  }
};

#if TRACEML_ENABLED  // the profiler's parts; compiled out, the profiler below records nothing
namespace detail {

/// Why a second profiler records nothing (the first one is still attached).
inline std::string profiler_busy_message(const std::string& run_name) {
  return "a traceml::profiler is already active; '" + run_name +
         "' records nothing (finish the first one before starting another)" +
         (environment_out_dir() ? std::string("; with TRACEML_OUT set, the active one is likely the TRACEML_OUT "
                                              "session's, started by the first step no profiler observed: it "
                                              "collects, so create this profiler before the first step, or unset "
                                              "TRACEML_OUT")
                                : std::string());
}

/// TRACEML_OUT set while the program attaches a profiler of its own: that profiler collects, and
/// the session is not started (it would start only on a step no profiler observes, and two runs
/// would then split the steps). Said once, naming where this run's outputs go instead.
inline void say_which_collects(const profiler_options& o) {
  const char* out = environment_out_dir();
  if (!out) return;
  for (const auto& [key, value] : o.config)
    if (key == "started_by" && value == "TRACEML_OUT") return;  // the session's own profiler
  activation().decided.store(true, std::memory_order_release);
  std::string where;
  for (const std::string* p : {&o.json_path, &o.jsonl_path, &o.trace_path, &o.html_path})
    if (!p->empty()) where += (where.empty() ? "" : ", ") + *p;
  for (const run_output& own : o.outputs) where += (where.empty() ? "" : ", ") + own.target;
  report_once("out-beside-profiler",
              std::string("TRACEML_OUT=") + out + " is set, but the program attached its own traceml::profiler ('" +
                  o.run_name + "'): that profiler collects, writing " +
                  (where.empty() ? std::string("no file (its profiler_options name none)") : where) +
                  "; TRACEML_OUT is not used (unset it, or give the profiler profiler_options::write_all_to(\"" + out +
                  "\"))");
}

/// finish()'s table on stdout, and the profiler's own start-up and finish times on stderr, beside the
/// other status lines: the table stays what `traceml show` prints.
inline void print_finished_run(const run_result& result) {
  std::fputs(format_table(result).c_str(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "traceml: %s: %s\n", printable(result.name).c_str(),
               profiler_edges_line(result.summary).c_str());
}

/// Hands finished recording windows to on_trace_ready, in order; a throwing callback is said once.
inline void deliver_windows(const profiler_options& o, const std::vector<recording_window>& ready) noexcept {
  for (const auto& w : ready) {
    try {
      o.on_trace_ready(w);
    } catch (const std::exception& e) {
      report_once("on-trace-ready-threw", std::string("profiler_options::on_trace_ready threw: ") + e.what());
    } catch (...) {
      report_once("on-trace-ready-threw", "profiler_options::on_trace_ready threw (unknown exception)");
    }
  }
}

/// finish_on_signal, after finish() wrote the outputs: says so, runs on_signal_finish, ends.
[[noreturn]] inline void end_by_stop_signal(const profiler_options& o, const run_result& result, int sig) noexcept {
  report_once("stopped-by-signal", std::string(stop_signal_name(sig)) + ": run '" + result.name + "' stopped after " +
                                       std::to_string(result.summary.steps) +
                                       " steps; the outputs of those steps are written");
  if (o.on_signal_finish) {
    try {
      o.on_signal_finish(result, sig);
    } catch (const std::exception& e) {
      report_once("on-signal-finish-threw", std::string("profiler_options::on_signal_finish threw: ") + e.what());
    } catch (...) {
      report_once("on-signal-finish-threw", "profiler_options::on_signal_finish threw (unknown exception)");
    }
  }
  end_by_signal(sig);
}

/// Says once what a step end's drain lost: records dropped by full rings (of step `step`; -1: after
/// the last step), and other threads' records beyond `others_limit` per step.
inline void report_drain_losses(const drain_counts& counts, std::int32_t step, std::size_t others_limit) {
  if (counts.ring_full)
    report_once("ring-full", (step >= 0 ? "step " + std::to_string(step) + " lost " + std::to_string(counts.ring_full) +
                                              " phase records to a full ring"
                                        : std::to_string(counts.ring_full) + " CPU records were dropped after the last "
                                                                             "step, to a full ring") +
                                 ": a thread recorded more than " + std::to_string(thread_ring::phase_room) +
                                 " phases between two step ends (its ring holds " +
                                 std::to_string(thread_ring::capacity) + " records, " +
                                 std::to_string(thread_ring::reserved) +
                                 " of them kept for step and "
                                 "micro-batch ends; the thread never waits for room). Such a step is kept with the "
                                 "phases that fit, so its phase times are undercounted; each one says how many it "
                                 "lost (lost_phases in its JSONL line and in the summary's steps), the table counts "
                                 "them, and the run's count is the summary's dropped_records");
  if (counts.capped)
    report_once("drain-capped",
                std::to_string(counts.capped_rings) +
                    " threads other than the training thread "
                    "recorded more than a step end takes from them (profiler_options::"
                    "max_other_thread_records: " +
                    std::to_string(others_limit) +
                    " records per step in all, shared evenly; a thread within its equal part loses "
                    "none): " +
                    std::to_string(counts.capped) +
                    " of their records were left out, so "
                    "that the step end's cost stays bounded; their phases are undercounted in the "
                    "step statistics from here on, and the run's count is the summary's capped_records");
}

/// A step that ended, as the training thread hands it over to the profiler's step worker: its
/// record, and what its thread's ring had lost to being full by then (the step's own loss is the
/// difference to the last one).
struct ended_step {
  span_record step;
  const thread_ring* ring = nullptr;
  std::uint64_t dropped_total = 0;
};

/// What a profiler writes as each step is emitted (its CPU and GPU facts in): the step's JSONL line,
/// the live view, the Chrome trace's window (run_trace) and on_trace_ready's recording windows. The
/// profiler holds one and calls it under its lock.
class step_outputs {
 public:
  explicit step_outputs(const profiler_options& o)
      : o_(o), trace_(o.trace_last_steps, o.trace_recorded_steps), windows_(o.run_name) {}

  /// Opens the JSONL and starts the live view: once the profiler is attached.
  void open() {
    if (!o_.jsonl_path.empty())
      jsonl_ = std::make_unique<output_file>(o_.jsonl_path, "step JSONL", "w", " (training continues without it)");
    if (live_view_requested(o_.live)) {
      live_view_options lv;
      lv.run_name = o_.run_name;
      lv.expected_steps = o_.expected_steps;
      live_ = std::make_unique<live_view>(std::move(lv));
    }
  }

  /// Steps' spans and GPU activities are kept past their step for the Chrome trace or for windows.
  bool keeps_trace_data() const noexcept { return !o_.trace_path.empty() || o_.on_trace_ready; }
  bool writes_trace() const noexcept { return !o_.trace_path.empty(); }
  run_trace& trace() noexcept { return trace_; }
  /// The GPU source's kernel-name table, kept by the trace and the windows past the source.
  void keep_kernel_names(const std::shared_ptr<const kernel_name_table>& names) {
    trace_.keep_kernel_names(names);
    windows_.keep_kernel_names(names);
  }

  /// One step, complete: its JSONL line, its spans and activities into the trace and the windows,
  /// the live view. Leaves `st` without its activities (the statistics do not need them).
  void emit(step_result& st, const std::string& run_name, const rank_identity& rank) {
    if (jsonl_ && jsonl_->ok()) jsonl_lines_ += step_jsonl_line(run_name, st, rank);
    if (keeps_trace_data()) {
      std::vector<span_record> spans = trace_.take_spans(st.step);
      std::vector<gpu_activity> activities;
      step_memory_sample memory;
      if (st.gpu) {
        activities.swap(st.gpu->activities);
        memory = {st.step, st.begin_ns, {st.gpu->peak_allocated_bytes, st.gpu->peak_reserved_bytes}};
      }
      if (o_.on_trace_ready) windows_.add(st, spans, activities, ready_);
      if (writes_trace())
        trace_.add_step(st.step, std::move(spans), std::move(activities), st.gpu && st.gpu->kernels_measured, memory);
    }
    if (st.gpu) st.gpu->activities.clear();
    if (live_) live_->publish(st);
  }

  bool has_ready_windows() const noexcept { return !ready_.empty(); }
  std::vector<recording_window> take_ready_windows() {
    std::vector<recording_window> ready;
    ready.swap(ready_);
    return ready;
  }

  /// After the last step: the live view joined and erased (before the table is printed), the last
  /// recording window closed (said once when a run with on_trace_ready never closed one).
  void steps_done() {
    live_.reset();
    if (!o_.on_trace_ready) return;
    windows_.finish(ready_);
    if (!windows_.windows())
      report_once("on-trace-ready",
                  "profiler_options::on_trace_ready was never called: no step was recorded by a "
                  "schedule (gpu_source_options::cupti_opts.schedule)");
  }

  /// Writes the JSONL lines emitted since the last call, in one write and one flush: the profiler
  /// calls it once per batch of steps it processed (a write and a flush per step cost the step
  /// worker a system call each; a batch is at most what one wake-up took, within a step period or
  /// so of its steps' ends, and a process killed afterwards keeps it).
  void flush_jsonl() {
    if (!jsonl_ || jsonl_lines_.empty()) return;
    jsonl_->write(jsonl_lines_);
    jsonl_lines_.clear();  // keeps its capacity: the next batch's lines need no allocation
  }

  /// Closes the JSONL (its last lines written first); its path into `failed` when it is missing or
  /// incomplete.
  void close_jsonl(std::vector<std::string>& failed) {
    if (!jsonl_) return;
    flush_jsonl();
    jsonl_->close();
    if (jsonl_->failed()) failed.push_back(jsonl_->path());
  }

 private:
  const profiler_options& o_;  // the profiler's, which outlives this
  std::unique_ptr<output_file> jsonl_;
  std::string jsonl_lines_;          // emitted, not yet written (flush_jsonl)
  std::unique_ptr<live_view> live_;  // its own thread draws; publish() takes only the view's lock
  run_trace trace_;
  window_collector windows_;
  std::vector<recording_window> ready_;  // closed, not yet handed to on_trace_ready
};

}  // namespace detail
#endif

TRACEML_BEGIN_MODE_NAMESPACE
#if TRACEML_ENABLED
class profiler : public recording_callback, private recorder_observer {
 public:
  explicit profiler(profiler_options options = {})
      : constructed_ns_(now_ns()),
        options_(std::move(options)),
        acc_(options_.warmup_steps, options_.tokens_per_step, options_.samples_per_step),
        outputs_(options_) {
    result_.name = options_.run_name;
    result_.config = options_.config;
    result_.rank = resolve_rank(options_.rank);
    auto& R = detail::recorder();
    recorder_observer* expected = nullptr;
    if (!R.observer.compare_exchange_strong(expected, this)) {
      report_once("profiler-active", detail::profiler_busy_message(options_.run_name));
      return;
    }
    attached_ = true;
    detail::say_which_collects(options_);
    (void)now_ns();  // the clock calibrates on first use (milliseconds): here, not inside step 0
    // Each run numbers its steps from 0; records left over from before the run are discarded.
    R.next_step.store(0, std::memory_order_relaxed);
    R.overlapping_steps.store(0, std::memory_order_relaxed);
    detail::drain_all([](const span_record&) {});
    (void)detail::take_epoch_marks();  // marks made before the run are not its own
    if (options_.finish_on_signal) stop_guard_.emplace();
    stop_on_signal_ = options_.finish_on_signal;
    outputs_.open();
    startup_ns_ = now_ns() - constructed_ns_;
  }

  ~profiler() override {
    // Destroyed by an exception (out of memory inside a step): the step it interrupted is abandoned,
    // so that hooks left open on this thread do not swallow the next run's steps.
    if (std::uncaught_exceptions() > uncaught_at_start_) abandon_step();
    try {
      finish();
    } catch (...) {
      report_once("profiler-finish", "profiler::finish() failed while the profiler was destroyed");
    }
  }

  profiler(const profiler&) = delete;
  profiler& operator=(const profiler&) = delete;

  /// Attach a GPU time source (CUPTI, CUDA events). Call before the first step.
  void set_gpu_source(std::unique_ptr<gpu_source> source) {
    detail::lock_guard lock(mu_);
    // Start-up runs to here when the source comes before the first step (made after the profiler,
    // its own start-up counts too).
    if (acc_.steps() == 0 && waiting_.empty()) startup_ns_ = now_ns() - constructed_ns_;
    gpu_ = std::move(source);
    attribution_.keep_activities(outputs_.keeps_trace_data());
    if (gpu_ && outputs_.keeps_trace_data()) outputs_.keep_kernel_names(gpu_->kernel_names());
    attribution_.counter_view(gpu_ ? gpu_->counter_view() : records_as_counted{});
    detail::recorder().observe_phases.store(attached_ && gpu_ && gpu_->wants_scope_hooks(), std::memory_order_relaxed);
  }
  gpu_source* gpu() const noexcept { return gpu_.get(); }
  /// Diagnostics and tests: `tap` sees every attribution round (input and output), on the
  /// attribution worker's thread; what it gathers is safe to read after finish(). Call before the
  /// first step.
  void set_attribution_tap(attribution_stage::round_tap tap) {
    detail::lock_guard lock(mu_);
    attribution_.set_round_tap(std::move(tap));
  }
  const profiler_options& options() const noexcept { return options_; }

  /// Steps finished so far (GPU facts attached where the source has delivered them).
  std::size_t steps_recorded() const {
    detail::lock_guard lock(mu_);
    return acc_.steps() + waiting_.size() + ended_.size();  // the last: ended, not yet processed
  }

  /// End the run: resolve outstanding GPU facts, compute the summary, write the outputs, print the
  /// table, release the GPU source. Idempotent; also called by on_train_end() and the destructor.
  /// Call it once the loop is done: scopes still running on other threads while it runs may reach
  /// a GPU source that finish() is releasing. With finish_on_signal and a signal pending, it does
  /// not return: the process ends by the signal once the outputs are written.
  const run_result& finish() {
    const std::int64_t finish_begin_ns = now_ns();
    worker_.stop();  // before the lock, which its work takes; the steps it left are processed below
    detail::unique_lock lock(mu_);
    if (finished_) return result_;
    finished_ = true;
    finishing_.store(true, std::memory_order_relaxed);
    if (!attached_) return result_;
    if (const int sig = stop_guard_ ? pending_stop_signal() : 0)
      result_.config.emplace_back("stopped_by", stop_signal_name(sig));
    auto& R = detail::recorder();
    R.observe_phases.store(false, std::memory_order_relaxed);
    process_ended(nullptr);
    absorb_records(detail::own_ring(), 1);
    std::vector<gpu_activity> activities;
    if (gpu_) {
      try {
        attach_reports(attribution_.finish(gpu_->collect(true)));
      } catch (const std::exception& e) {
        report_once("gpu-collect", std::string("GPU source failed at the end of the run: ") + e.what());
      }
      result_.summary.gpu_status = gpu_->status();
    } else if (std::string why = detail::noted_no_gpu_source(); !why.empty()) {
      result_.summary.gpu_status = std::move(why);  // the reason no source was made, and its fix
    }
    while (!waiting_.empty()) emit_front();
    outputs_.steps_done();
    if (options_.on_trace_ready) {
      const std::vector<recording_window> ready = outputs_.take_ready_windows();
      lock.unlock();  // as at a step's end
      detail::deliver_windows(options_, ready);
      lock.lock();
    }
    const std::string gpu_status = result_.summary.gpu_status;
    result_.summary = acc_.summary();
    result_.summary.gpu_status = gpu_status;
    if (const records_as_counted view = gpu_ ? gpu_->counter_view() : records_as_counted{}; view.on()) {
      result_.summary.counted_interval_us = static_cast<double>(view.sample_interval_ns) / 1e3;
      result_.summary.launch_engine_us = static_cast<double>(view.launch_engine_ns) / 1e3;
    }
    result_.summary.dropped_records = dropped_;
    result_.summary.startup_ms = static_cast<double>(startup_ns_) / 1e6;
    result_.summary.capped_records = capped_;
    result_.summary.overlapping_steps = R.overlapping_steps.load(std::memory_order_relaxed);
    result_.summary.outside_steps = outside_.summary();
    // Shuts CUPTI down before the files are written: nothing below needs the source (the kernel
    // names the trace points at are in the table the trace keeps).
    gpu_.reset();
    const finished_run run{result_, outputs_.writes_trace() ? &outputs_.trace() : nullptr, detail::thread_identities()};
    detail::write_outputs(
        detail::outputs_to_write(options_.trace_path, options_.json_path, options_.html_path, options_.outputs), run,
        failed_outputs_);
    outputs_.close_jsonl(failed_outputs_);
    result_.summary.finish_ms = static_cast<double>(now_ns() - finish_begin_ns) / 1e6;
    if (options_.print_table) detail::print_finished_run(result_);
    R.observer.store(nullptr, std::memory_order_release);
    attached_ = false;
    if (stop_guard_) {
      lock.unlock();  // on_signal_finish may ask the profiler
      if (const int sig = pending_stop_signal()) detail::end_by_stop_signal(options_, result_, sig);
      stop_guard_.reset();
    }
    return result_;
  }

  /// The outputs that could not be written, or are incomplete (each said once on stderr with its
  /// reason): empty when every output asked for is on disk. Complete after finish().
  const std::vector<std::string>& failed_outputs() const noexcept { return failed_outputs_; }

  /// The run's result; complete after finish().
  const run_result& result() const noexcept { return result_; }

  void on_train_end() override {
    recording_callback::on_train_end();
    finish();
  }
  /// The trainer-callback hook, kept callable on a profiler: the observer's on_step_end(span_record)
  /// below would hide it (clang's -Woverloaded-virtual).
  using recording_callback::on_step_end;

 private:
  // recorder_observer: runs on the thread that closed the step. Publishes the step for the step
  // worker and returns; does the work itself only when the worker cannot take it (see
  // profiler_options::background_step_end).
  void on_step_end(const span_record& step) noexcept override {
    if (finishing_.load(std::memory_order_relaxed)) return;
    if (auto* g = gpu_.get()) g->step_closed(step);
    const detail::ended_step handed{step, detail::own_ring(), detail::own_dropped_total()};
    const bool background = options_.background_step_end &&
                            detail::own_ring_backlog() < detail::thread_ring::capacity / 2 && ended_.push(handed);
    if (background) {
      worker_.poke();
    } else {
      try {
        detail::lock_guard lock(mu_);
        if (!finished_) process_ended(&handed);
      } catch (const std::exception& e) {
        report_once("step-end", std::string("could not process a step: ") + e.what());
      } catch (...) {
        report_once("step-end", "could not process a step (unknown error)");
      }
    }
    if (windows_waiting_.load(std::memory_order_acquire)) {
      std::vector<recording_window> ready;
      {
        detail::lock_guard lock(mu_);
        ready = outputs_.take_ready_windows();
        windows_waiting_.store(false, std::memory_order_relaxed);
      }
      detail::deliver_windows(options_, ready);  // outside the lock: the callback may ask the profiler
    }
    // finish_on_signal: a step end is the safe point at which a noted signal is acted on.
    if (const int sig = stop_on_signal_ ? pending_stop_signal() : 0) {
      try {
        finish();  // does not return (unless another thread is finishing the run: that one ends it)
      } catch (...) {
        report_once("stop-signal-finish", "writing the outputs after a signal failed");
        end_by_signal(sig);
      }
    }
  }

  /// The step worker's work: every step handed over so far. Returns how many steps and records it
  /// processed.
  detail::step_batch process_in_background() noexcept {
    try {
      detail::lock_guard lock(mu_);
      if (!finished_) return process_ended(nullptr);
    } catch (const std::exception& e) {
      report_once("step-end", std::string("could not process a step: ") + e.what());
    } catch (...) {
      report_once("step-end", "could not process a step (unknown error)");
    }
    return {};
  }

  /// Under mu_: the steps handed over (in order), then `also` (a step its thread processes itself):
  /// one drain of the rings for all of them, then each step's statistics and GPU hand-off. Returns
  /// how many steps and records it processed (the step worker paces itself by them).
  detail::step_batch process_ended(const detail::ended_step* also) TRACEML_REQUIRES(mu_) {
    std::vector<detail::ended_step> steps;
    for (detail::ended_step e; ended_.pop(e);) steps.push_back(e);
    if (also) steps.push_back(*also);
    if (steps.empty()) return {};
    // Each step's own loss: what its thread's ring lost since that thread's previous step end.
    std::vector<std::uint64_t> lost(steps.size(), 0);
    std::uint64_t own_lost = 0;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].ring && steps[i].ring == last_ring_) lost[i] = steps[i].dropped_total - last_dropped_total_;
      last_ring_ = steps[i].ring;
      last_dropped_total_ = steps[i].dropped_total;
      own_lost += lost[i];
    }
    // The step worker drains behind the training thread, which may have begun the next step: other
    // threads' records of that open step are in the rings too. They are taken (kept for their step)
    // within one more step's allowance, rather than counted against the ended steps and left out.
    const std::size_t allowance = steps.size() + (also ? 0 : 1);
    const std::uint64_t ring_full = absorb_records(steps.back().ring, allowance, steps.front().step.step);
    lost.front() += ring_full > own_lost ? ring_full - own_lost : 0;  // other threads' losses: the first step's
    // The records in step order (threads' rings interleave steps; most runs record on one thread,
    // already in order), so that each step takes its records from the front: one pass for the batch,
    // not one pass over every step's records per step.
    const auto by_step = [](const span_record& a, const span_record& b) { return a.step < b.step; };
    if (!std::is_sorted(pending_.begin(), pending_.end(), by_step))
      std::stable_sort(pending_.begin(), pending_.end(), by_step);
    std::size_t taken = 0;
    for (std::size_t i = 0; i < steps.size(); ++i) taken = process_step(steps[i].step, lost[i], taken);
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(taken));
    if (gpu_) {
      // The delivery goes to the attribution worker (a recorded step takes milliseconds to
      // attribute); reports of earlier steps come back from it.
      attribution_.submit(gpu_->collect(false));
      attach_reports(attribution_.take_ready());
      gpu_->charge_processing(attribution_.take_record_cpu_ns());  // attributing records: recording's cost too
      while (!waiting_.empty() && waiting_.front().gpu) emit_front();
    }
    outputs_.flush_jsonl();
    if (outputs_.has_ready_windows()) windows_waiting_.store(true, std::memory_order_release);
    return {steps.size(), taken};
  }

  /// Under mu_, records drained and pending_ in step order: one step's statistics, kept until its
  /// GPU facts are in (emitted at once without a GPU source). Takes the step's records (and those of
  /// earlier steps: late) from pending_[from] on, and returns where the next step's begin.
  std::size_t process_step(const span_record& step, std::uint64_t lost, std::size_t from) TRACEML_REQUIRES(mu_) {
    std::size_t next = from;
    while (next < pending_.size() && pending_[next].step <= step.step) ++next;
    std::vector<span_record> spans;     // the step's statistics
    std::vector<span_record> outlived;  // of this step, ended after it: the trace only
    spans.reserve(next - from + 1);
    bool has_step_record = false;
    for (std::size_t i = from; i < next; ++i) {
      const span_record& r = pending_[i];
      if (r.step < step.step) {
        ++late_;  // closed after its step was summarized (a worker outlived the step)
        continue;
      }
      // A phase of another thread that ends after its step: its time is not the step's (whenever
      // the step is processed, so the figures do not depend on when the worker drained).
      if (r.kind != phase_kind::step && r.end_ns > step.end_ns) {
        outlived.push_back(r);
        ++late_;
        continue;
      }
      spans.push_back(r);
      has_step_record = has_step_record || r.kind == phase_kind::step;
    }
    // The ring keeps room for step records (thread_ring::reserved); a thread without a ring (out
    // of memory) has none: the step is still the one the recorder closed.
    if (!has_step_record) spans.push_back(step);
    if (const auto gap = outside_.add_step(step.step, step.begin_ns, step.end_ns); gap && outputs_.writes_trace())
      outputs_.trace().add_gap(*gap);
    if (late_)
      report_once("late-records",
                  "phases on other threads ended after their step was summarized (after the "
                  "step's end): they are left out of the step statistics");
    auto st = compute_step(step.step, spans);
    if (!st) return next;
    st->lost_phases = lost;
    waiting_.push_back(std::move(*st));
    if (outputs_.keeps_trace_data()) {
      std::vector<span_record> traced = spans;
      traced.insert(traced.end(), outlived.begin(), outlived.end());
      outputs_.trace().hold_spans(step.step, std::move(traced));
    }
    if (gpu_)
      gpu_->step_ended(step.step, spans);
    else
      emit_front();
    return next;
  }

  void on_scope_begin(phase_kind kind, const char* name, std::int32_t step, std::int32_t micro) noexcept override {
    if (auto* g = gpu_.get()) g->on_scope_begin(kind, name, step, micro);
  }
  void on_scope_end(const span_record& r) noexcept override {
    if (auto* g = gpu_.get()) g->on_scope_end(r);
  }

  /// Takes the rings' records: `whole`'s (the ring of the thread that closed the steps) all of them,
  /// other threads' at most max_other_thread_records for each of the `steps` steps ended.
  /// Cost: the records taken. Returns the records full rings dropped since the previous drain (what
  /// step `first_step` on lost; -1: the run's end, after its last step).
  std::uint64_t absorb_records(const detail::thread_ring* whole, std::size_t steps, std::int32_t first_step = -1)
      TRACEML_REQUIRES(mu_) {
    const std::int32_t step = first_step;
    const auto counts = detail::drain_step_end(
        // Called by drain_step_end, inside this function (mu_ held): the analysis cannot see a lock through it.
        [this](const span_record& r) TRACEML_NO_THREAD_SAFETY_ANALYSIS {
          if (r.step < 0) {  // outside any step: the run's outside_steps, and the trace
            note_outside(r);
            return;
          }
          pending_.push_back(r);
        },
        options_.max_other_thread_records * steps, whole);
    dropped_ += counts.ring_full;
    capped_ += counts.capped;
    detail::report_drain_losses(counts, step, options_.max_other_thread_records);
    if (detail::recorder().overlapping_steps.load(std::memory_order_relaxed))
      report_once("overlapping-steps",
                  "a step began while another step was open (on another thread, or around "
                  "it on the same thread): traceml profiles one training loop, whose steps "
                  "follow one another, so that step and every later overlapping one are "
                  "ignored, and their phases count in the step that was open, as a worker "
                  "thread's do; the run's count is the summary's overlapping_steps");
    for (const std::int64_t t : detail::take_epoch_marks()) {
      outside_.add_epoch_mark(t);
      if (outputs_.writes_trace()) outputs_.trace().add_mark(t);
    }
    return counts.ring_full;
  }

  /// Under mu_: a record of no step, into the run's outside_steps (and the trace's last ones).
  void note_outside(const span_record& r) TRACEML_REQUIRES(mu_) {
    if (!is_phase(r.kind)) return;
    outside_.add_record(r);
    if (outputs_.writes_trace()) outputs_.trace().add_outside(r);
  }

  void attach_reports(std::vector<step_gpu_report> reports) TRACEML_REQUIRES(mu_) {
    for (auto& rep : reports)
      for (auto& st : waiting_)
        if (st.step == rep.step && !st.gpu) {
          st.gpu = std::move(rep);
          break;
        }
  }

  /// A step is complete (CPU and GPU): into the JSONL, the statistics, the trace window, and the
  /// kept steps while the run is short enough to keep them.
  void emit_front() TRACEML_REQUIRES(mu_) {
    step_result st = std::move(waiting_.front());
    waiting_.pop_front();
    outputs_.emit(st, result_.name, result_.rank);
    acc_.add(st);
    if (result_.steps.size() < options_.keep_steps && acc_.steps() == result_.steps.size() + 1) {
      result_.steps.push_back(std::move(st));
    } else if (!result_.steps.empty()) {
      result_.steps.clear();  // past keep_steps: per-step data lives in the JSONL
      result_.steps.shrink_to_fit();
    }
  }

  std::int64_t constructed_ns_;  // when construction began (start-up is measured from here)
  std::int64_t startup_ns_ TRACEML_GUARDED_BY(mu_) = 0;
  profiler_options options_;
  mutable detail::mutex mu_;
  std::unique_ptr<gpu_source> gpu_;
  attribution_worker attribution_;                             // raw GPU activity -> reports, on its own thread
  std::vector<span_record> pending_ TRACEML_GUARDED_BY(mu_);   // records of steps not yet closed
  run_accumulator acc_ TRACEML_GUARDED_BY(mu_);                // the run's statistics, step by step (bounded memory)
  outside_steps_accumulator outside_ TRACEML_GUARDED_BY(mu_);  // phases outside steps, gaps, epoch marks
  detail::step_outputs outputs_ TRACEML_GUARDED_BY(mu_);     // the JSONL, live view, trace and windows of emitted steps
  std::deque<step_result> waiting_ TRACEML_GUARDED_BY(mu_);  // closed on the CPU, GPU facts not yet in
  run_result result_;
  std::vector<std::string> failed_outputs_;
  std::optional<stop_signal_guard> stop_guard_;  // finish_on_signal: from construction to the end of finish()
  bool stop_on_signal_ = false;                  // the guard was made (read outside the lock: never changes)
  std::uint64_t dropped_ TRACEML_GUARDED_BY(mu_) = 0;
  // other threads' records a step end left out (max_other_thread_records)
  std::uint64_t capped_ TRACEML_GUARDED_BY(mu_) = 0;
  std::uint64_t late_ TRACEML_GUARDED_BY(mu_) = 0;  // records of steps already summarized
  bool attached_ = false;
  bool finished_ TRACEML_GUARDED_BY(mu_) = false;
  std::atomic<bool> finishing_{false};                  // finished_, for the training thread's step end (no lock)
  int uncaught_at_start_ = std::uncaught_exceptions();  // exceptions in flight when it was built
  // The step worker's side. ended_ goes from the thread that ends steps to the worker (or whoever
  // holds mu_); last_ring_ and last_dropped_total_ (under mu_) give each step its own loss.
  detail::handoff_queue<detail::ended_step, 1024> ended_;
  const detail::thread_ring* last_ring_ TRACEML_GUARDED_BY(mu_) = nullptr;
  std::uint64_t last_dropped_total_ TRACEML_GUARDED_BY(mu_) = 0;
  std::atomic<bool> windows_waiting_{false};  // outputs_ holds ready windows for the training thread
  detail::step_worker worker_{[this] { return process_in_background(); }};  // last: stopped before the rest goes
  static_assert(detail::step_worker::max_batch_records * 4 == detail::thread_ring::capacity,
                "a step worker's batch takes at most a quarter of a ring (on_step_end acts at half)");
};
#else
/// Compiled out (TRACEML_DISABLE): the same API, recording nothing.
class profiler : public recording_callback {
 public:
  explicit profiler(profiler_options options = {}) : options_(std::move(options)) {}
  void set_gpu_source(std::unique_ptr<gpu_source>) {}
  template <class Tap>
  void set_attribution_tap(Tap&&) {}
  gpu_source* gpu() const noexcept { return nullptr; }
  const profiler_options& options() const noexcept { return options_; }
  std::size_t steps_recorded() const { return 0; }
  const run_result& finish() { return result_; }
  const run_result& result() const noexcept { return result_; }
  const std::vector<std::string>& failed_outputs() const noexcept { return failed_outputs_; }

 private:
  profiler_options options_;
  run_result result_;
  std::vector<std::string> failed_outputs_;
};
#endif
TRACEML_END_MODE_NAMESPACE

TRACEML_END_NAMESPACE
