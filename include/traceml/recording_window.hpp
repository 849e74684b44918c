// traceml: one window of a recording schedule (gpu/recording_schedule.hpp) -- its active steps with
// their CPU phases, GPU reports and attributed kernels -- as profiler_options::on_trace_ready
// receives it, and the way to write it as a Chrome trace of its own (what torch.profiler's
// tensorboard_trace_handler does once per window).
//
//   opts.on_trace_ready = [](const traceml::recording_window& w) {
//     w.write_chrome_trace("trace_window_" + std::to_string(w.cycle) + ".json");
//   };
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/record.hpp"
#include "traceml/sinks/chrome_trace.hpp"

TRACEML_BEGIN_NAMESPACE

/// The active steps of one schedule cycle, in step order. Valid during the callback: kernel names
/// point into the GPU source, which the profiler releases at the end of the run, so write what you
/// need (the trace, figures) inside the callback rather than keeping the object.
struct recording_window {
  std::string run_name;
  std::int32_t cycle = -1;  ///< the schedule's cycle (0-based): the n-th window of the run
  /// Every active step of the cycle arrived. False when the run ended before the window's last
  /// step (delivered by finish()), or when a step of it never reached the profiler.
  bool complete = false;
  /// Per step: CPU phases and the GPU report (kernels_measured, facts and kernels per phase). The
  /// reports' activities are in `activities` below, not here.
  std::vector<step_result> steps;
  std::vector<span_record> spans;        ///< the steps' CPU records (steps, micro-batches, phases)
  std::vector<gpu_activity> activities;  ///< their attributed kernels, copies and memsets
  /// What the activities' kernel names point into, kept with them: a window stays readable after
  /// the run and its GPU source are gone.
  std::shared_ptr<const kernel_name_table> kernel_names;

  /// The window's step numbers, in order.
  std::vector<std::int32_t> step_numbers() const {
    std::vector<std::int32_t> out;
    out.reserve(steps.size());
    for (const auto& s : steps) out.push_back(s.step);
    return out;
  }

  /// "window 1: steps 7-9 (3 steps, complete)", the trace's otherData.steps.
  std::string describe() const {
    std::string s = "window " + std::to_string(cycle) + ": ";
    if (steps.empty()) return s + "no steps";
    s += "steps " + std::to_string(steps.front().step) + "-" + std::to_string(steps.back().step) + " (" +
         std::to_string(steps.size()) + (steps.size() == 1 ? " step, " : " steps, ");
    return s + (complete ? "complete)" : "cut short: the run ended first)");
  }

  /// This window alone as a Chrome trace document (sinks/chrome_trace.hpp).
  std::string chrome_trace() const { return traceml::chrome_trace(run_name, spans, activities, describe()); }
  /// Writes chrome_trace() to `path`; false (reported once) when it cannot.
  bool write_chrome_trace(const std::string& path) const {
    return traceml::write_chrome_trace(path, run_name, spans, activities, describe());
  }
};

namespace detail {

/// Gathers the steps the profiler emits (in step order) into recording windows: an active step of
/// a schedule opens or extends the window of its cycle, the cycle's last active step closes it
/// (complete). A step outside that window arriving first, or the end of the run, closes it cut
/// short. Copies only active steps; other steps cost a compare.
class window_collector {
 public:
  explicit window_collector(std::string run_name) : run_name_(std::move(run_name)) {}

  /// The table the activities' kernel names point into; every window opened from here keeps it.
  void keep_kernel_names(std::shared_ptr<const kernel_name_table> names) { names_ = std::move(names); }

  /// One emitted step, its CPU records and its attributed activities. Windows it closes are
  /// appended to `done`.
  void add(const step_result& st, const std::vector<span_record>& spans, const std::vector<gpu_activity>& activities,
           std::vector<recording_window>& done) {
    const schedule_slot slot = st.gpu ? st.gpu->schedule : schedule_slot{};
    const bool active = slot.phase == schedule_phase::active && slot.cycle >= 0;
    if (open_ && (!active || slot.cycle != window_.cycle)) close(false, done);
    if (!active) return;
    if (!open_) {
      window_ = recording_window{};
      window_.run_name = run_name_;
      window_.cycle = slot.cycle;
      window_.kernel_names = names_;
      open_ = true;
    }
    window_.steps.push_back(st);
    window_.steps.back().gpu->activities.clear();  // they are in window_.activities
    window_.spans.insert(window_.spans.end(), spans.begin(), spans.end());
    window_.activities.insert(window_.activities.end(), activities.begin(), activities.end());
    if (slot.last_active) close(true, done);
  }

  /// End of the run: the window in progress, cut short.
  void finish(std::vector<recording_window>& done) {
    if (open_) close(false, done);
  }

  /// Windows closed so far.
  std::uint64_t windows() const noexcept { return windows_; }

 private:
  void close(bool complete, std::vector<recording_window>& done) {
    window_.complete = complete;
    done.push_back(std::move(window_));
    window_ = recording_window{};
    open_ = false;
    ++windows_;
  }

  std::string run_name_;
  std::shared_ptr<const kernel_name_table> names_;
  recording_window window_;
  bool open_ = false;
  std::uint64_t windows_ = 0;
};

}  // namespace detail
TRACEML_END_NAMESPACE
