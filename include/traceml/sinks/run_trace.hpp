// traceml: what a run keeps for its Chrome trace, in bounded memory, and writes at its end. Each
// step's spans wait here until the step is emitted (its GPU facts in); then the step goes into the
// trace window (trace_window.hpp: the last steps, and before them the last recorded ones). Phases
// outside steps, the gaps between steps and epoch marks keep their last few thousand. The profiler
// owns one and uses it under its lock; the recording windows of on_trace_ready take the same spans.
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "traceml/analysis/outside_steps.hpp"
#include "traceml/config.hpp"
#include "traceml/gpu/gpu_facts.hpp"
#include "traceml/gpu/gpu_memory.hpp"
#include "traceml/rank_identity.hpp"
#include "traceml/record.hpp"
#include "traceml/sinks/chrome_trace.hpp"
#include "traceml/sinks/trace_window.hpp"
#include "traceml/thread_identity.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

class run_trace {
 public:
  /// How many outside phases, gaps and epoch marks the trace keeps (the last ones): bounded, as its
  /// steps are.
  static constexpr std::size_t max_outside = 4096;

  run_trace(std::size_t last_steps, std::size_t recorded_steps)
      : window_(last_steps, recorded_steps), gap_limit_(std::max<std::size_t>(last_steps, 1)) {}

  /// A step's spans (its own, and its phases that ended after it), kept until the step is emitted.
  void hold_spans(std::int32_t step, std::vector<span_record> spans) { held_.emplace_back(step, std::move(spans)); }

  /// The spans held for `step`, taken (those of earlier steps, never emitted, are dropped).
  std::vector<span_record> take_spans(std::int32_t step) {
    std::vector<span_record> spans;
    while (!held_.empty() && held_.front().first <= step) {
      if (held_.front().first == step) spans = std::move(held_.front().second);
      held_.pop_front();
    }
    return spans;
  }

  /// An emitted step into the trace window.
  void add_step(std::int32_t step, std::vector<span_record> spans, std::vector<gpu_activity> activities, bool recorded,
                const step_memory_sample& memory) {
    window_.add(step, std::move(spans), std::move(activities), recorded, memory);
  }

  void add_outside(const span_record& r) { bounded_push(outside_, r, max_outside); }
  void add_gap(const step_gap& g) { bounded_push(gaps_, g, gap_limit_); }
  void add_mark(std::int64_t t) { bounded_push(marks_, t, max_outside); }

  /// The table the activities' kernel names point into, kept while the trace is: the trace may be
  /// written after the GPU source is released.
  void keep_kernel_names(std::shared_ptr<const kernel_name_table> names) { names_ = std::move(names); }

  /// The Chrome trace of what is kept, its threads named by `threads` (detail::thread_identities());
  /// false when it could not be written (said once, with why).
  bool write(const std::string& path, const std::string& run_name, const rank_identity& rank,
             std::vector<thread_identity> threads) const {
    chrome_trace_extras extras{window_.coverage(),
                               std::move(threads),
                               window_.memory(),
                               rank,
                               {gaps_.begin(), gaps_.end()},
                               {marks_.begin(), marks_.end()}};
    std::vector<span_record> spans = window_.spans();
    spans.insert(spans.end(), outside_.begin(), outside_.end());
    return write_chrome_trace(path, run_name, spans, window_.activities(), extras);
  }

 private:
  template <class T>
  static void bounded_push(std::deque<T>& d, const T& v, std::size_t limit) {
    if (limit == 0) return;
    if (d.size() >= limit) d.pop_front();
    d.push_back(v);
  }

  std::deque<std::pair<std::int32_t, std::vector<span_record>>> held_;  // per step, until it is emitted
  trace_window window_;
  std::size_t gap_limit_;
  std::deque<span_record> outside_;                 // the last outside phases
  std::deque<step_gap> gaps_;                       // the last gaps between steps
  std::deque<std::int64_t> marks_;                  // the last epoch marks
  std::shared_ptr<const kernel_name_table> names_;  // what the kept activities' names point into
};

}  // namespace detail
TRACEML_END_NAMESPACE
