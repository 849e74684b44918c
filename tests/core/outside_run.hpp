// A hand-made run's time outside its steps, fed to outside_steps_accumulator as the step worker
// would (records of no step, epoch marks, then the steps in order). Times in ms from 0:
//
//   step 0 [0, 10]   step 1 [12, 22]   step 2 [122, 132]   step 3 [133, 143]
//   gaps: 2 (after 0), 100 (after 1, holds the epoch mark at 60), 1 (after 2)     -> 3 gaps, 103 ms
//   outside phases: evaluation [30, 90] with a nested forward [35, 45]; evaluation [150, 170] after
//   the last step; checkpoint [200, 205]; an epoch mark at 145 (the range's end after the last step)
//
// Hand-computed: evaluation 2 x, 80 ms, mean 40, max 60; forward (nested) 1 x 10; checkpoint 1 x 5;
// top-level outside phases 85 ms; span 143 ms; gap share 103 / 143; epoch gaps 1, 100 ms after step 1;
// epoch marks 2.
#pragma once
#include <traceml/analysis/outside_steps.hpp>
#include <traceml/record.hpp>

#include <cstdint>
#include <vector>

namespace traceml_test {

inline std::int64_t outside_ns(double ms) { return static_cast<std::int64_t>(ms * 1e6 + 0.5); }

inline traceml::span_record outside_record(traceml::phase_kind kind, const char* name, double begin_ms, double end_ms,
                                           std::uint8_t nesting = 0, std::int32_t step = -1) {
  traceml::span_record r;
  r.begin_ns = outside_ns(begin_ms);
  r.end_ns = outside_ns(end_ms);
  r.name = name;
  r.kind = kind;
  r.step = step;
  r.nesting = nesting;
  return r;
}

/// The records outside steps of the run above (what the trace draws on the threads).
inline std::vector<traceml::span_record> outside_records() {
  using traceml::phase_kind;
  return {outside_record(phase_kind::forward, "forward", 35, 45, 1),
          outside_record(phase_kind::user, "evaluation", 30, 90),
          outside_record(phase_kind::user, "evaluation", 150, 170),
          outside_record(phase_kind::user, "checkpoint", 200, 205)};
}

/// The gaps between the run's steps, as add_step returned them (for the trace).
struct outside_run {
  traceml::outside_steps_accumulator acc;
  std::vector<traceml::step_gap> gaps;
  std::vector<std::int64_t> marks = {outside_ns(60), outside_ns(145)};
};

inline outside_run make_outside_run() {
  outside_run run;
  const double steps[4][2] = {{0, 10}, {12, 22}, {122, 132}, {133, 143}};
  // As the step worker sees them: step 0 and 1 drained first; the evaluation and the mark come with
  // step 2's drain, the rest after the last step (at finish()).
  for (int i = 0; i < 2; ++i)
    if (auto g = run.acc.add_step(i, outside_ns(steps[i][0]), outside_ns(steps[i][1]))) run.gaps.push_back(*g);
  const auto records = outside_records();
  run.acc.add_record(records[0]);
  run.acc.add_record(records[1]);
  run.acc.add_epoch_mark(run.marks[0]);
  for (int i = 2; i < 4; ++i)
    if (auto g = run.acc.add_step(i, outside_ns(steps[i][0]), outside_ns(steps[i][1]))) run.gaps.push_back(*g);
  run.acc.add_record(records[2]);
  run.acc.add_record(records[3]);
  run.acc.add_epoch_mark(run.marks[1]);
  return run;
}

}  // namespace traceml_test
