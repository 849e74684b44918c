// traceml: what the Chrome trace keeps of a run, in bounded memory. A browser tab loads a few hundred
// MB at most, and a profiler left on for a million steps must not hold every scope: the trace keeps
// the last `last_steps` steps and the last `recorded_steps` steps with kernel records (where the GPU
// tracks are), and says which steps it holds.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/gpu/gpu_memory.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

class trace_window {
 public:
  trace_window(std::size_t last_steps, std::size_t recorded_steps) : last_(last_steps), recorded_(recorded_steps) {}

  /// One finished step: its CPU spans, the GPU activities attributed to it (recorded steps) and its
  /// GPU memory peaks (when sampled).
  void add(std::int32_t step, std::vector<span_record> spans, std::vector<gpu_activity> activities, bool recorded,
           const step_memory_sample& memory = {}) {
    ++seen_;
    window_.push_back(entry{step, recorded, std::move(spans), std::move(activities), memory});
    if (window_.size() <= last_) return;
    // The oldest step leaves the window: kept only when recorded, and only the last recorded_ of those.
    if (window_.front().recorded && recorded_ > 0) {
      older_recorded_.push_back(std::move(window_.front()));
      if (older_recorded_.size() > recorded_) older_recorded_.pop_front();
    }
    window_.pop_front();
  }

  /// Everything kept, in step order.
  std::vector<span_record> spans() const {
    std::vector<span_record> out;
    for (const auto* part : {&older_recorded_, &window_})
      for (const auto& e : *part) out.insert(out.end(), e.spans.begin(), e.spans.end());
    return out;
  }
  std::vector<gpu_activity> activities() const {
    std::vector<gpu_activity> out;
    for (const auto* part : {&older_recorded_, &window_})
      for (const auto& e : *part) out.insert(out.end(), e.activities.begin(), e.activities.end());
    return out;
  }
  /// The kept steps' GPU memory peaks, in step order; steps without a sample are left out.
  std::vector<step_memory_sample> memory() const {
    std::vector<step_memory_sample> out;
    for (const auto* part : {&older_recorded_, &window_})
      for (const auto& e : *part)
        if (e.memory.known()) out.push_back(e.memory);
    return out;
  }

  /// One line for the trace's metadata: which steps it holds, and the bound.
  std::string coverage() const {
    const std::size_t kept = window_.size() + older_recorded_.size();
    std::size_t recorded = older_recorded_.size();
    for (const auto& e : window_) recorded += e.recorded;
    std::string s = std::to_string(kept) + " of " + std::to_string(seen_) + " steps";
    if (kept < seen_)
      s += " (the last " + std::to_string(last_) + ", and before them the last " + std::to_string(recorded_) +
           " with kernel records: profiler_options::trace_last_steps, trace_recorded_steps)";
    if (recorded) s += "; " + std::to_string(recorded) + " with GPU kernel records";
    return s;
  }

 private:
  struct entry {
    std::int32_t step = -1;
    bool recorded = false;
    std::vector<span_record> spans;
    std::vector<gpu_activity> activities;
    step_memory_sample memory;
  };
  std::size_t last_, recorded_;
  std::uint64_t seen_ = 0;
  std::deque<entry> older_recorded_;  // recorded steps that left the window, oldest first
  std::deque<entry> window_;          // the last last_ steps
};

}  // namespace detail
TRACEML_END_NAMESPACE
