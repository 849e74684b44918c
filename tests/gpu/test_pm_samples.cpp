// Hardware-counter samples on phases (pm_samples.hpp, pm_placement.hpp) and through the attribution
// stage: overlap-weighted shares against hand-computed values, windows placed by the step's clock
// stamp and event offsets, sums that add over phases and steps, and shares that never exceed 100%.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "synthetic_records.hpp"
#include "traceml/gpu/attribution_stage.hpp"
#include "traceml/gpu/pm_decode_budget.hpp"
#include "traceml/gpu/pm_placement.hpp"
#include "traceml/gpu/pm_samples.hpp"
#include "traceml/gpu/pm_sampling_config.hpp"

using namespace traceml;

namespace {

pm_sample sample(std::int64_t b, std::int64_t e, double busy, double sm = -1, double tensor = -1, double dram = -1) {
  pm_sample s;
  s.begin_ns = b;
  s.end_ns = e;
  s.gpu_busy = busy;
  s.sm_active = sm;
  s.tensor_active = tensor;
  s.dram_throughput = dram;
  return s;
}

/// Ten 100 ns samples from t = 1000: busy 0.0, 0.1, ..., 0.9; SM half of busy; tensor only on
/// the even ones.
std::vector<pm_sample> ramp() {
  std::vector<pm_sample> v;
  for (int i = 0; i < 10; ++i)
    v.push_back(sample(1000 + 100 * i, 1100 + 100 * i, 0.1 * i, 0.05 * i, i % 2 == 0 ? 0.2 : -1, 0.5));
  return v;
}

span_record span(phase_kind k, const char* name, std::int32_t step, std::int64_t b, std::int64_t e) {
  return traceml_test::span_of(k, name, step, b, e);
}

timed_span timed(const span_record& s, std::int64_t event_ns, std::int64_t offset_ns) {
  timed_span t{marked_span{s, 0, 0}, event_ns, offset_ns, {}};
  return t;
}

}  // namespace

TEST_CASE("a window's counter shares are overlap-weighted means of its samples", "[pm]") {
  const auto v = ramp();
  SECTION("whole samples") {
    // [1200, 1500): samples 2, 3, 4 -> busy (0.2 + 0.3 + 0.4) / 3.
    const auto f = measure_window(v, 1200, 1500);
    CHECK(f.covered_ns == 300);
    CHECK(f.samples == 3);
    CHECK(busy_share(f) == Approx(0.3));
    CHECK(sm_active_share(f) == Approx(0.15));
    // Tensor only on samples 2 and 4: (0.2 + 0.2) / 2, over the 200 ns it was sampled.
    CHECK(f.tensor_covered_ns == 200);
    CHECK(tensor_share(f) == Approx(0.2));
    CHECK(dram_share(f) == Approx(0.5));
  }
  SECTION("partial samples count by their overlap") {
    // [1150, 1320): 50 ns of sample 1 (0.1), 100 of sample 2 (0.2), 20 of sample 3 (0.3).
    const auto f = measure_window(v, 1150, 1320);
    CHECK(f.covered_ns == 170);
    CHECK(f.samples == 3);
    CHECK(busy_share(f) == Approx((50 * 0.1 + 100 * 0.2 + 20 * 0.3) / 170.0));
  }
  SECTION("a window beyond the samples is covered only where they reach") {
    const auto f = measure_window(v, 1900, 2500);
    CHECK(f.covered_ns == 100);
    CHECK(busy_share(f) == Approx(0.9));
    CHECK_FALSE(measure_window(v, 3000, 4000).measured());
    CHECK(busy_share(measure_window(v, 3000, 4000)) == -1);
    CHECK_FALSE(measure_window(v, 1500, 1500).measured());
    CHECK_FALSE(measure_window({}, 0, 10).measured());
  }
  SECTION("out-of-range counter values are clamped: a share is never above 100%") {
    const std::vector<pm_sample> odd = {sample(0, 100, 1.7, 1.2, 3.0, 2.0), sample(100, 200, -0.0, 0.0)};
    const auto f = measure_window(odd, 0, 200);
    CHECK(busy_share(f) == Approx(0.5));
    CHECK(sm_active_share(f) == Approx(0.5));
    CHECK(tensor_share(f) == Approx(1.0));
    CHECK(dram_share(f) == Approx(1.0));
  }
  SECTION("samples without a busy value are skipped") {
    const std::vector<pm_sample> gap = {sample(0, 100, 1.0), sample(100, 200, -1), sample(200, 300, 0.0)};
    const auto f = measure_window(gap, 0, 300);
    CHECK(f.covered_ns == 200);
    CHECK(busy_share(f) == Approx(0.5));
  }
  SECTION("facts add: two halves make the whole") {
    counter_facts a = measure_window(v, 1000, 1450), b = measure_window(v, 1450, 2000);
    a += b;
    const auto whole = measure_window(v, 1000, 2000);
    CHECK(a.covered_ns == whole.covered_ns);
    CHECK(a.busy_ns == Approx(whole.busy_ns));
    CHECK(busy_share(a) == Approx(0.45));
  }
  CHECK(samples_reach_ns(v) == 2000);
  CHECK(samples_reach_ns({}) == 0);
}

TEST_CASE("spans are placed on the GPU clock by the step's stamp and their event offsets", "[pm]") {
  step_activity s;
  s.step = 3;
  s.gpu_clock_ns = 1000;  // the step's first event ran at GPU time 1000
  s.spans = {timed(span(phase_kind::step, "step", 3, 0, 10), 1000, 0),
             timed(span(phase_kind::forward, "forward", 3, 1, 4), 300, 100),     // [1100, 1400)
             timed(span(phase_kind::backward, "backward", 3, 4, 8), 500, 500),   // [1500, 2000)
             timed(span(phase_kind::optimizer, "optimizer", 3, 8, 9), -1, -1)};  // not timed
  CHECK(detail::step_gpu_end(s) == 2000);
  detail::apply_samples(s, ramp());
  CHECK(busy_share(s.spans[0].counters) == Approx(0.45));
  CHECK(busy_share(s.spans[1].counters) == Approx(0.2));  // samples 1, 2, 3
  CHECK(busy_share(s.spans[2].counters) == Approx(0.7));  // samples 5..9
  CHECK_FALSE(s.spans[3].counters.measured());

  SECTION("a step without a clock stamp gets no counters") {
    step_activity u = s;
    for (auto& t : u.spans) t.counters = {};
    u.gpu_clock_ns = -1;
    detail::apply_samples(u, ramp());
    CHECK(detail::step_gpu_end(u) == -1);
    for (const auto& t : u.spans) CHECK_FALSE(t.counters.measured());
  }

  SECTION("the attribution stage carries them into the step's report, phases summed over scopes") {
    // A second forward scope in the same micro-batch: [1400, 1500) -> sample 4 (0.4).
    s.spans.push_back(timed(span(phase_kind::forward, "forward", 3, 4, 5), 100, 400));
    detail::apply_samples(s, ramp());
    gpu_delivery d;
    d.steps.push_back(s);
    attribution_stage stage;
    const auto reports = stage.add(d);
    REQUIRE(reports.size() == 1);
    const auto& r = reports[0];
    CHECK_FALSE(r.kernels_measured);
    CHECK(busy_share(r.total.counters) == Approx(0.45));
    bool forward = false, backward = false;
    for (const auto& p : r.phases) {
      if (std::string(p.name) == "forward") {
        forward = true;
        CHECK(p.facts.counters.covered_ns == 400);
        CHECK(busy_share(p.facts.counters) == Approx((0.1 + 0.2 + 0.3 + 0.4) / 4));
      }
      if (std::string(p.name) == "backward") {
        backward = true;
        CHECK(busy_share(p.facts.counters) == Approx(0.7));
      }
      if (std::string(p.name) == "optimizer") CHECK_FALSE(p.facts.counters.measured());
    }
    CHECK(forward);
    CHECK(backward);
  }
}

TEST_CASE("the samples' clock is aligned with the GPU's by a burst of known place and length", "[pm][clock]") {
  // Samples of 50 us on a clock 7.3 ms behind the GPU's; the burst ran from GPU time 10,000,020 ns
  // for 2 ms: on the samples' clock it starts 20 ns into the sample that begins at 2,700,000 and
  // ends 20 ns into the one that begins at 4,700,000.
  const std::int64_t shift = 7300000, begin = 10000020, end = begin + 2000000;
  std::vector<pm_sample> v;
  for (std::int64_t t = 1000000; t < 6000000; t += 50000) {
    const std::int64_t lo = std::max(t, begin - shift), hi = std::min(t + 50000, end - shift);
    v.push_back(sample(t, t + 50000, hi > lo ? static_cast<double>(hi - lo) / 50000.0 : 0.0));
  }
  SECTION("a clean burst: the offset to the nanosecond's order") {
    const auto a = align_clocks(v, begin, end);
    REQUIRE(a.ok);
    CHECK(a.offset_ns == Approx(shift).margin(50));
    CHECK(a.busy_ms == Approx(2.0).margin(0.01));
    CHECK(a.burst_ms == Approx(2.0));
    auto moved = v;
    shift_samples(moved, a.offset_ns);
    const auto in = measure_window(moved, begin, end);  // the burst reads busy on the GPU's clock
    CHECK(busy_share(in) == Approx(1.0).margin(0.001));
    CHECK(busy_share(measure_window(moved, end + 100000, end + 1000000)) == Approx(0.0));
  }
  SECTION("faint activity elsewhere does not move the centre") {
    v.front().gpu_busy = 0.02;
    v.back().gpu_busy = 0.03;
    v[5].gpu_busy = 0.3;  // a short, stronger blip far away is a run of its own
    const auto a = align_clocks(v, begin, end);
    REQUIRE(a.ok);
    CHECK(a.offset_ns == Approx(shift).margin(50));
  }
  SECTION("other work right against the burst: refused, with the amounts") {
    for (auto& s : v)
      if (s.begin_ns >= 2000000 && s.begin_ns < 2700000) s.gpu_busy = 1.0;  // 0.7 ms more, no gap
    const auto a = align_clocks(v, begin, end);
    CHECK_FALSE(a.ok);
    CHECK(a.why.find("other work on the GPU") != std::string::npos);
  }
  SECTION("other work before the burst, with a quiet gap between: the burst alone counts") {
    for (auto& s : v)
      if (s.begin_ns < 2000000) s.gpu_busy = 1.0;  // 1 ms of earlier work, 0.7 ms before the burst
    const auto a = align_clocks(v, begin, end);
    REQUIRE(a.ok);
    CHECK(a.offset_ns == Approx(shift).margin(50));
    CHECK(a.busy_ms == Approx(2.0).margin(0.01));
  }
  SECTION("counters that saw nothing, or a burst that did not run") {
    for (auto& s : v) s.gpu_busy = 0;
    CHECK(align_clocks(v, begin, end).why.find("saw no GPU activity") != std::string::npos);
    CHECK(align_clocks(v, begin, begin).why == "the calibration burst did not run");
  }
}

TEST_CASE("a sample from CUPTI's values: shares by the layout, and what is dropped", "[pm][decode]") {
  sample_layout l;  // busy 0, elapsed 1, SM 2; tensor at 3 (a percentage), DRAM at 4 (a ratio)
  l.tensor = 3;
  l.dram = 4;
  l.dram_scale = 1.0;
  l.interval_ns = 100000;
  const std::vector<double> v{900, 1000, 450, 37.5, 0.25};
  const auto s = sample_from_values(5000000, 5100000, v, l, false);
  REQUIRE(s);
  CHECK(s->begin_ns == 5000000);
  CHECK(s->end_ns == 5100000);
  CHECK(s->gpu_busy == Approx(0.9));
  CHECK(s->sm_active == Approx(0.45));
  CHECK(s->tensor_active == Approx(0.375));
  CHECK(s->dram_throughput == Approx(0.25));
  SECTION("a gated clock (no elapsed cycles) reads idle, values above the whole are capped") {
    const auto gated = sample_from_values(0, 100000, {0, 0, 0, 0, 0}, l, false);
    REQUIRE(gated);
    CHECK(gated->gpu_busy == 0);
    CHECK(gated->sm_active == 0);
    const auto over = sample_from_values(0, 100000, {1010, 1000, 1200, 130, 1.4}, l, false);
    REQUIRE(over);
    CHECK(over->gpu_busy == 1);
    CHECK(over->sm_active == 1);
    CHECK(over->tensor_active == 1);
    CHECK(over->dram_throughput == 1);
  }
  SECTION("counters not sampled stay unmeasured") {
    sample_layout bare;
    const auto b = sample_from_values(0, 100000, {500, 1000, 100}, bare, false);
    REQUIRE(b);
    CHECK(b->tensor_active < 0);
    CHECK(b->dram_throughput < 0);
  }
  SECTION(
      "dropped: the session's first, one longer than 4 intervals, an empty one, a value not a number, too few values") {
    CHECK_FALSE(sample_from_values(5000000, 5100000, v, l, true));
    CHECK_FALSE(sample_from_values(0, 400001, v, l, false));
    CHECK(sample_from_values(0, 400000, v, l, false));
    CHECK_FALSE(sample_from_values(100, 100, v, l, false));
    CHECK_FALSE(sample_from_values(0, 100000, {900, std::nan(""), 450, 37.5, 0.25}, l, false));
    CHECK_FALSE(sample_from_values(0, 100000, {900, 1000}, l, false));
  }
}

TEST_CASE("a decode period fits one pass of the counter-data image", "[pm][decode]") {
  traceml::pm_sampler_options o;  // 1 ms, decoded every 200 ms: 200 samples a period, 400 with the margin
  CHECK(traceml::detail::samples_per_pass(o) == 400);
  o.interval_ns = 100000;  // 100 us: 2,000 a period
  CHECK(traceml::detail::samples_per_pass(o) == 4000);
  o.interval_ns = 10000000;  // 10 ms: 20 a period; the image keeps its floor
  CHECK(traceml::detail::samples_per_pass(o) == 256);
  o.interval_ns = 333333;  // a period's samples round up: 601
  CHECK(traceml::detail::samples_per_pass(o) == 2 * 601);
  o.decode_period_ms = 0;  // no worker (flush() decodes): the floor
  CHECK(traceml::detail::samples_per_pass(o) == 256);
  o.decode_period_ms = 200;
  o.interval_ns = 1;  // absurdly fine: capped
  CHECK(traceml::detail::samples_per_pass(o) == 65536);
}

TEST_CASE("a window is whole only where samples cover it without a hole", "[pm][budget]") {
  std::vector<pm_sample> v;  // 1000..2000 in 100 ns samples, then a hole 2000..2300, then 2300..2600
  for (int i = 0; i < 10; ++i) v.push_back(sample(1000 + 100 * i, 1100 + 100 * i, 0.5));
  for (int i = 0; i < 3; ++i) v.push_back(sample(2300 + 100 * i, 2400 + 100 * i, 0.5));
  CHECK(samples_cover(v, 1050, 1950, 50));
  CHECK(samples_cover(v, 1000, 2000, 0));
  CHECK_FALSE(samples_cover(v, 900, 1500, 50));   // begins 100 before the first sample
  CHECK(samples_cover(v, 960, 1500, 50));         // 40 before: within the tolerance
  CHECK_FALSE(samples_cover(v, 1500, 2400, 50));  // across the hole (300)
  CHECK(samples_cover(v, 1500, 2400, 300));       // a hole the tolerance allows
  CHECK_FALSE(samples_cover(v, 2050, 2250, 50));  // inside the hole
  CHECK(samples_cover(v, 2350, 2600, 50));
  CHECK_FALSE(samples_cover(v, 2350, 2700, 50));  // past the last sample
  CHECK_FALSE(samples_cover(v, 1500, 1500, 50));  // empty window
  CHECK_FALSE(samples_cover({}, 1000, 1100, 50));
}

TEST_CASE("the decoding budget: windows of evaluated samples, gaps chosen from measured costs", "[pm][budget]") {
  constexpr std::int64_t period = 200'000'000;  // 200 ms passes; 0.25% of it: 0.5 ms
  auto run_window = [&](pm_decode_budget& b, std::int64_t cost) {
    for (int i = 0; i < b.window_passes(); ++i) {
      REQUIRE(b.evaluating());
      b.passed(true, cost, period);
    }
  };
  SECTION("evaluating everything fits: no gap") {
    pm_decode_budget b(0.0025, 10);
    CHECK(b.describe(period).empty());  // nothing chosen before a window closed
    for (int i = 0; i < 50; ++i) {
      REQUIRE(b.evaluating());
      b.passed(true, 400'000, period);  // 0.4 ms of 0.5 allowed
    }
    CHECK(b.gap_passes() == 0);
    CHECK(b.describe(period).find("every sample evaluated (0.20% of one core, within the 0.25% budget)") !=
          std::string::npos);
  }
  SECTION("over the budget: a gap that brings the whole within it") {
    pm_decode_budget b(0.0025, 10);
    run_window(b, 6'000'000);  // 6 ms a pass: 3% of one core
    // No gap pass measured yet: gap = ceil(10 x (6 - 0.5) / 0.5) = 110.
    CHECK(b.gap_passes() == 110);
    for (int i = 0; i < 110; ++i) {
      REQUIRE_FALSE(b.evaluating());
      b.passed(false, 250'000, period);  // a gap's pass: 0.25 ms
    }
    CHECK(b.mean_gap_ns() == Approx(250'000));
    run_window(b, 6'000'000);
    // gap = ceil(10 x 5.5 / (0.5 - 0.25)) = 220: (10 x 6 + 220 x 0.25) / (230 x 200) = 0.25% exactly.
    CHECK(b.gap_passes() == 220);
    CHECK((10 * 6.0 + 220 * 0.25) / (230 * 200.0) == Approx(0.0025));
    CHECK(b.describe(period).find("windows of 2.0 s with 44.0 s between them, the hardware stopped (evaluating "
                                  "every sample would take 3.00% of one core, over the 0.25% budget)") !=
          std::string::npos);
    CHECK_FALSE(b.evaluating());
  }
  SECTION("gaps alone over the budget: the longest gap, and it says so") {
    pm_decode_budget b(0.0025, 2);
    run_window(b, 6'000'000);
    for (int i = 0; i < b.gap_passes(); ++i) b.passed(false, 600'000, period);
    run_window(b, 6'000'000);
    CHECK(b.gap_passes() == pm_decode_budget::max_gap_windows * 2);
    CHECK(b.describe(period).find("the gaps alone exceed it") != std::string::npos);
  }
  SECTION("no budget: every pass evaluates, whatever it costs") {
    pm_decode_budget b(0, 10);
    for (int i = 0; i < 30; ++i) {
      REQUIRE(b.evaluating());
      b.passed(true, 50'000'000, period);
    }
    CHECK(b.gap_passes() == 0);
    CHECK(b.describe(period).empty());
  }
  SECTION("a window opened on demand (a flush, a new profiler) cuts the gap short") {
    pm_decode_budget b(0.0025, 3);
    run_window(b, 6'000'000);
    REQUIRE_FALSE(b.evaluating());
    b.open_window();
    run_window(b, 6'000'000);
    CHECK_FALSE(b.evaluating());
  }
}

TEST_CASE("a window of the decoding budget in decode passes", "[pm][budget]") {
  CHECK(traceml::detail::decode_window_passes(2000, 200) == 10);
  CHECK(traceml::detail::decode_window_passes(2100, 200) == 11);
  CHECK(traceml::detail::decode_window_passes(50, 200) == 1);
  CHECK(traceml::detail::decode_window_passes(2000, 0) == 2000);  // no period: a pass per ms
}
