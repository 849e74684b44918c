// event_sampling: which steps get CUDA-event phase timing, from the events' measured cost against
// the step's length. Pure arithmetic, checked against hand-computed choices.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "traceml/gpu/event_sampling.hpp"

using traceml::event_sampling;

namespace {

/// Runs `steps` steps of `wall_ns` each whose timed steps cost `cost_ns` of events; returns which
/// were timed, in order.
std::vector<bool> run(event_sampling& s, int steps, std::int64_t cost_ns, std::int64_t wall_ns) {
  std::vector<bool> timed;
  for (int i = 0; i < steps; ++i) {
    const bool t = s.begin_step();
    CHECK(s.timing() == t);
    if (t) {
      s.add_cost(cost_ns / 2);            // the begin's record
      s.add_cost(cost_ns - cost_ns / 2);  // the end's
    }
    s.end_step(wall_ns);
    timed.push_back(t);
  }
  return timed;
}

}  // namespace

TEST_CASE("event sampling: events within the budget time every step", "[event_sampling]") {
  event_sampling s(0.0025);
  // 10 us of events on 10 ms steps: 0.1%, under 0.25%.
  const auto timed = run(s, 200, 10000, 10000000);
  for (bool t : timed) CHECK(t);
  CHECK(s.every() == 1);
  CHECK(s.describe() == "on every step (events 10.0 us a timed step, 0.10% of 10.00 ms steps; budget 0.25%)");
}

TEST_CASE("event sampling: events over the budget time one step in ceil(share / budget)", "[event_sampling]") {
  event_sampling s(0.0025, 2);
  // 15 us of events on 2 ms steps: 0.75% = 3 x the budget, so one step in 3.
  const auto timed = run(s, 2 + 32 + 30, 15000, 2000000);
  // The 2 skipped steps and the first window of 32 are all timed; the decision comes at its end.
  for (int i = 0; i < 34; ++i) CHECK(timed[static_cast<std::size_t>(i)]);
  CHECK(s.every() == 3);
  int after = 0;
  for (std::size_t i = 34; i < timed.size(); ++i) after += timed[i] ? 1 : 0;
  CHECK(after == 10);  // 30 steps at one in 3
  CHECK(s.describe() == "on 1 step in 3 (events 15.0 us a timed step, 0.75% of 2.00 ms steps; budget 0.25%)");
}

TEST_CASE("event sampling: the choice follows the steps, and never passes max_every", "[event_sampling]") {
  event_sampling s(0.0025, 0);
  run(s, 32, 20000, 1000000);  // 2% = 8 x the budget
  CHECK(s.every() == 8);
  // Steps grow to 100 ms: a window needs 4 timed steps (32 steps at one in 8 gives 4), then every step.
  run(s, 32, 20000, 100000000);
  CHECK(s.every() == 1);
  // 1 ms of events on 1 ms steps: 400 x the budget, capped.
  run(s, 32, 1000000, 1000000);
  CHECK(s.every() == event_sampling::max_every);
  // At the cap, a window waits for its 4 timed steps: 32 more steps decide nothing.
  run(s, 32, 0, 1000000);
  CHECK(s.every() == event_sampling::max_every);
  run(s, 4 * event_sampling::max_every, 0, 1000000);
  CHECK(s.every() == 1);
}

TEST_CASE("event sampling: budget 0 times every step, and before a decision says why it has none", "[event_sampling]") {
  event_sampling never(0);
  CHECK(never.describe() == "on every step");
  run(never, 100, 1000000, 1000000);  // events as long as the step: still every step
  CHECK(never.every() == 1);
  event_sampling young(0.0025);
  run(young, 10, 1000, 1000000);
  CHECK(young.every() == 1);
  CHECK(young.describe() == "on every step (too few steps to measure what the events cost)");
}
