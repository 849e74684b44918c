// The CUPTI source's step-readiness rule (step_readiness.hpp), pure: which pending steps' GPU data
// is complete, given what arrived (marker times), how many flushes ran and how records are sampled.
#include <catch2/catch.hpp>

#include <unordered_set>
#include <vector>

#include "traceml/gpu/step_readiness.hpp"

using namespace traceml;

namespace {
readiness_step recorded(std::uint64_t end_marker, std::uint64_t flushes_at_end = 0) {
  readiness_step s;
  s.recorded = true;
  s.end_marker = end_marker;
  s.flushes_at_end = flushes_at_end;
  return s;
}
readiness_step unrecorded() {
  readiness_step s;
  s.recorded = false;
  return s;
}
}  // namespace

TEST_CASE("unrecorded steps are complete once their events are", "[readiness]") {
  std::vector<readiness_step> steps = {unrecorded(), unrecorded(), unrecorded()};
  steps[1].events_done = false;
  readiness_facts f;
  f.sampling = true;
  const std::unordered_set<std::uint64_t> seen;
  CHECK(ready_prefix(steps, f, seen) == 1);  // step 1's events hold back step 2 as well
  steps[1].events_done = true;
  CHECK(ready_prefix(steps, f, seen) == 3);
}

TEST_CASE("every step recorded: its end marker, the next one's and a whole flush after them", "[readiness]") {
  std::vector<readiness_step> steps = {recorded(10), recorded(20)};
  readiness_facts f;
  f.sampling = false;
  f.flushes_done = 5;
  std::unordered_set<std::uint64_t> seen = {10};
  CHECK(ready_prefix(steps, f, seen) == 0);  // the next step's end marker has not arrived
  CHECK(steps[0].ready_after_flush == 0);
  seen.insert(20);
  CHECK(ready_prefix(steps, f, seen) == 0);
  CHECK(steps[0].ready_after_flush == 7);  // a flush begun after this moment must complete
  f.flushes_done = 6;
  CHECK(ready_prefix(steps, f, seen) == 0);
  f.flushes_done = 7;
  CHECK(ready_prefix(steps, f, seen) == 1);  // step 1 has no successor yet: it waits
  CHECK(steps[0].ready_after_flush == 7);    // not moved by later calls
}

TEST_CASE("every step recorded: a successor without records does not hold a step back", "[readiness]") {
  std::vector<readiness_step> steps = {recorded(10), unrecorded()};
  readiness_facts f;
  f.flushes_done = 1;
  const std::unordered_set<std::uint64_t> seen = {10};
  CHECK(ready_prefix(steps, f, seen) == 0);
  f.flushes_done = 3;
  CHECK(ready_prefix(steps, f, seen) == 2);
}

TEST_CASE("sampling: a recorded step is complete once records were switched off behind it and flushed", "[readiness]") {
  std::vector<readiness_step> steps = {unrecorded(), recorded(30), unrecorded()};
  readiness_facts f;
  f.sampling = true;
  f.flushes_done = 100;  // flushes alone do not make a sampled step complete
  const std::unordered_set<std::uint64_t> seen = {30};
  f.off_flushed_marker = 29;
  CHECK(ready_prefix(steps, f, seen) == 1);
  f.off_flushed_marker = 30;
  CHECK(ready_prefix(steps, f, seen) == 3);
}

TEST_CASE("a lagging step is complete after max_lag_steps later steps and two flushes", "[readiness]") {
  std::vector<readiness_step> steps(4, recorded(0, /*flushes_at_end=*/3));  // no markers: only lag can tell
  readiness_facts f;
  f.sampling = false;
  f.max_lag_steps = 3;
  f.flushes_done = 4;
  const std::unordered_set<std::uint64_t> seen;
  CHECK(ready_prefix(steps, f, seen) == 0);  // three later steps, but only one flush since it ended
  f.flushes_done = 5;
  CHECK(ready_prefix(steps, f, seen) == 1);  // the second step has only two later steps
  steps.push_back(recorded(0, 3));
  CHECK(ready_prefix(steps, f, seen) == 2);
}

TEST_CASE("at the end of the run every step is complete", "[readiness]") {
  std::vector<readiness_step> steps = {recorded(10), recorded(0), unrecorded()};
  steps[2].events_done = false;
  readiness_facts f;
  f.final = true;
  CHECK(ready_prefix(steps, f, {}) == 3);
}

TEST_CASE(
    "sampling, a schedule's window: steps followed by a recorded step complete by their markers, the "
    "window's last one by the forced flush behind it",
    "[readiness][schedule]") {
  // Records stay on from step 0 to step 2 (warm-up and active steps), off from step 3.
  std::vector<readiness_step> steps = {recorded(10), recorded(20), recorded(30), unrecorded()};
  readiness_facts f;
  f.sampling = true;
  f.flushes_done = 4;
  std::unordered_set<std::uint64_t> seen = {10, 20};
  CHECK(ready_prefix(steps, f, seen) == 0);
  CHECK(steps[0].ready_after_flush == 6);  // its and the next step's end markers arrived
  CHECK(steps[1].ready_after_flush == 0);  // step 2's end marker has not
  f.flushes_done = 6;
  CHECK(ready_prefix(steps, f, seen) == 1);
  seen.insert(30);
  f.flushes_done = 10;
  CHECK(ready_prefix(steps, f, seen) == 1);
  CHECK(steps[1].ready_after_flush == 12);
  f.flushes_done = 100;  // flushes alone: step 2 was followed by records off
  CHECK(ready_prefix(steps, f, seen) == 2);
  f.off_flushed_marker = 30;  // switched off behind step 2 and force-flushed
  CHECK(ready_prefix(steps, f, seen) == 4);
}

TEST_CASE("sampling: the forced flush behind a window's last step completes the whole window",
          "[readiness][schedule]") {
  std::vector<readiness_step> steps = {recorded(10), recorded(20), recorded(30)};
  readiness_facts f;
  f.sampling = true;
  f.off_flushed_marker = 30;  // no marker time arrived yet (markers lost): the flush behind step 2 suffices
  CHECK(ready_prefix(steps, f, {}) == 3);
}
