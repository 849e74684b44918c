// recording_budget on simulated runs: which steps get CUPTI records, and what that costs the run,
// against the true cost the simulation knows (step durations in ns, 1 ms = 1e6).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "traceml/gpu/recording_budget.hpp"

using traceml::recording_budget;

namespace {

struct simulation {
  std::int64_t untraced_ns = 100'000'000;  // 100 ms steps
  double recorded_extra = 0.30;            // a recorded step takes 30% longer
  double after_extra = 0.0;                // and the step after it this much longer
  double processing = 0.0;                 // CPU to attribute a recording's records, as a share of a step,
                                           // charged when the step after it ends (the worker's pace)
  double noise = 0.0;                      // uniform +- share of each step
  int warmup = 3;
  std::int64_t warmup_ns = 2'000'000'000;  // one-time costs of the first steps
  std::uint32_t seed = 1;

  struct outcome {
    std::vector<int> recorded;  // step indices
    double true_overhead = 0;   // extra time caused by recordings / untraced run time (counted steps)
  };

  outcome run(recording_budget& b, int steps) const {
    outcome o;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-noise, noise);
    double extra = 0, base = 0;
    bool after = false;
    for (int s = 0; s < steps; ++s) {
      const bool rec = b.should_record();
      const double clean =
          s < warmup ? static_cast<double>(warmup_ns) : static_cast<double>(untraced_ns) * (1.0 + u(rng));
      double d = clean;
      if (rec)
        d += recorded_extra * static_cast<double>(untraced_ns);
      else if (after)
        d += after_extra * static_cast<double>(untraced_ns);
      if (s >= warmup) {
        base += clean;
        extra += d - clean;
      }
      if (after && processing > 0) {
        const auto cpu = static_cast<std::int64_t>(processing * static_cast<double>(untraced_ns));
        b.charge_processing(cpu);
        extra += static_cast<double>(cpu);
      }
      after = rec;
      if (rec) o.recorded.push_back(s);
      b.step_done(static_cast<std::int64_t>(d), rec);
    }
    o.true_overhead = extra / base;
    return o;
  }
};

/// What a run of 1,000 steps at a 1% budget gives when a recording costs 30% of a step in all: about
/// one recorded step in 30, within the budget and not needlessly stingy, as the budget measured it.
void check_one_in_thirty(const simulation::outcome& o, const recording_budget& b) {
  CHECK(o.true_overhead <= 0.0105);  // within budget (one recording of slack at most)
  CHECK(o.true_overhead >= 0.008);   // and not needlessly stingy
  CHECK(o.recorded.size() >= 28);
  CHECK(o.recorded.size() <= 35);
  CHECK(b.spent_share() == Approx(o.true_overhead).epsilon(0.02));
}

}  // namespace

TEST_CASE("recording budget: a 30% recording at a 1% budget records about one step in 30", "[budget]") {
  simulation sim;
  recording_budget b(0.01);
  const auto o = sim.run(b, 1000);
  check_one_in_thirty(o, b);
  CHECK(b.cost_per_recording() == Approx(0.30).epsilon(0.01));
  CHECK(b.recordings() == o.recorded.size());
}

TEST_CASE("recording budget: the records' processing CPU is charged with the recordings", "[budget]") {
  // 15% slowdown plus 15 ms of attribution CPU per 100 ms step: the same 30% a recording, so about
  // one step in 30 at a 1% budget (one in 15 if the processing went uncharged).
  simulation sim;
  sim.recorded_extra = 0.15;
  sim.processing = 0.15;
  recording_budget b(0.01);
  const auto o = sim.run(b, 1000);
  check_one_in_thirty(o, b);
  CHECK(b.cost_per_recording() == Approx(0.15).epsilon(0.01));  // the step's own slowdown
  // Every recording but possibly the last was processed (charged after the step that follows it).
  CHECK(b.processing_per_recording_ns() * static_cast<double>(b.recordings()) ==
        Approx(15e6 * static_cast<double>(o.recorded.size() - (o.recorded.back() == 999 ? 1 : 0))));
}

TEST_CASE("recording budget: warm-up steps are neither recorded nor the baseline", "[budget]") {
  simulation sim;
  recording_budget b(0.01, /*warmup=*/3);
  const auto o = sim.run(b, 200);
  REQUIRE_FALSE(o.recorded.empty());
  // Three warm-up steps, then three baseline steps: step 6 is the first that may be recorded, and
  // its cost is measured against 100 ms steps, not the 2 s warm-up.
  CHECK(o.recorded.front() == 6);
  CHECK(b.cost_per_recording() == Approx(0.30).epsilon(0.01));
  CHECK(o.true_overhead <= 0.0105 + 0.30 / 200);
}

TEST_CASE("recording budget: the step after a recording is charged too", "[budget]") {
  simulation sim;
  sim.recorded_extra = 0.10;
  sim.after_extra = 0.10;
  recording_budget b(0.01);
  const auto o = sim.run(b, 2000);
  CHECK(o.true_overhead <= 0.0105);
  CHECK(o.true_overhead >= 0.008);
  CHECK(b.cost_per_recording() == Approx(0.20).epsilon(0.01));
}

TEST_CASE("recording budget: free recordings leave one baseline step between them", "[budget]") {
  simulation sim;
  sim.recorded_extra = 0.0;
  recording_budget b(0.01);
  const auto o = sim.run(b, 60);
  REQUIRE(o.recorded.size() >= 2);
  for (std::size_t i = 1; i < o.recorded.size(); ++i) CHECK(o.recorded[i] - o.recorded[i - 1] == 3);
}

TEST_CASE("recording budget: noisy steps (+-20%) stay within budget", "[budget]") {
  for (std::uint32_t seed = 1; seed <= 5; ++seed) {
    simulation sim;
    sim.noise = 0.20;
    sim.recorded_extra = 0.15;
    sim.seed = seed;
    recording_budget b(0.01);
    const auto o = sim.run(b, 3000);
    CAPTURE(seed);
    CHECK(o.true_overhead <= 0.0110);
    CHECK(o.true_overhead >= 0.004);  // noise makes the estimate conservative, not useless
  }
}

TEST_CASE("recording budget: a zero budget never records", "[budget]") {
  simulation sim;
  recording_budget b(0.0);
  CHECK(sim.run(b, 100).recorded.empty());
  CHECK(b.spent_share() == 0.0);
}

TEST_CASE("recording budget: the baseline is the median of the last window of untraced steps", "[budget]") {
  SECTION("even window: the upper of the two middle steps") {
    recording_budget b(0.01, /*warmup=*/0, /*baseline_steps=*/4);
    CHECK(b.baseline_ns() == 0.0);  // nothing yet
    for (std::int64_t d : {40, 10, 30}) b.step_done(d, false);
    CHECK(b.baseline_ns() == 30.0);  // 10 30 40
    b.step_done(20, false);
    CHECK(b.baseline_ns() == 30.0);  // 10 20 30 40
    b.step_done(5, false);           // 40 leaves the window
    CHECK(b.baseline_ns() == 20.0);  // 5 10 20 30
    b.step_done(7, false);
    b.step_done(7, false);
    CHECK(b.baseline_ns() == 7.0);  // 5 7 7 20
  }
  SECTION("odd window") {
    recording_budget b(0.01, /*warmup=*/0, /*baseline_steps=*/5);
    for (std::int64_t d : {5, 1, 4, 2, 3}) b.step_done(d, false);
    CHECK(b.baseline_ns() == 3.0);
    b.step_done(100, false);  // 1 4 2 3 100
    CHECK(b.baseline_ns() == 3.0);
    b.step_done(100, false);  // 4 2 3 100 100
    CHECK(b.baseline_ns() == 4.0);
  }
  SECTION("warm-up, recorded steps and the step after a recording stay out of the baseline") {
    recording_budget b(1.0, /*warmup=*/2, /*baseline_steps=*/3);
    b.step_done(1000, false);  // warm-up
    b.step_done(1000, false);
    for (std::int64_t d : {10, 12, 11}) b.step_done(d, false);
    CHECK(b.baseline_ns() == 11.0);
    REQUIRE(b.should_record());
    b.step_done(50, true);   // recorded
    b.step_done(30, false);  // charged as the step after
    CHECK(b.baseline_ns() == 11.0);
    CHECK(b.cost_per_recording() == Approx((50 - 11 + 30 - 11) / 11.0));
  }
  SECTION("any window, any durations: what sorting gives") {
    std::mt19937 rng(3);
    for (std::size_t window = 3; window <= 12; ++window) {
      recording_budget b(0.01, /*warmup=*/0, window);
      std::vector<std::int64_t> all;
      for (int s = 0; s < 40; ++s) {
        const std::int64_t d = static_cast<std::int64_t>(rng() % 8);  // many ties
        b.step_done(d, false);
        all.push_back(d);
        std::vector<std::int64_t> last(all.end() - static_cast<std::ptrdiff_t>(std::min(window, all.size())),
                                       all.end());
        std::sort(last.begin(), last.end());
        CAPTURE(window, s);
        REQUIRE(b.baseline_ns() == static_cast<double>(last[last.size() / 2]));
      }
    }
  }
  SECTION("a window past the fixed ring is clamped to it") {
    recording_budget b(0.01, /*warmup=*/0, /*baseline_steps=*/1000);
    for (std::size_t s = 0; s < recording_budget::max_baseline_steps; ++s) b.step_done(1000, false);
    for (std::size_t s = 0; s < recording_budget::max_baseline_steps / 2 + 1; ++s) b.step_done(1, false);
    CHECK(b.baseline_ns() == 1.0);  // the oldest 1000s left the 64-step ring
  }
}
