// Verdicts of one run, on hand-made summaries: each fires at its threshold and not below it, on the
// figures it names, and says how many steps they rest on.
#include <catch2/catch.hpp>

#include <random>

#include <nlohmann/json.hpp>

#include <traceml/analysis/regression_gate.hpp>
#include <traceml/analysis/run_accumulator.hpp>
#include <traceml/analysis/verdicts.hpp>
#include <traceml/sinks/html_report.hpp>
#include <traceml/sinks/json_summary.hpp>
#include <traceml/sinks/report_table.hpp>
#include <traceml/sinks/verdict_words.hpp>

using namespace traceml;

namespace {

summary_stats stats_of(double median, std::size_t n, double p10 = -1, double p90 = -1) {
  summary_stats s;
  s.count = n;
  s.median = s.mean = median;
  s.p10 = p10 < 0 ? median : p10;
  s.p90 = p90 < 0 ? median : p90;
  s.min = s.p10;
  s.max = s.p90;
  return s;
}

/// A run of `n` measured steps of 100 ms, 2 warm-up steps, a flat timeline, no phase.
run_summary flat_run(std::size_t n = 40) {
  run_summary s;
  s.warmup_steps = 2;
  s.steps = n + 2;
  s.step_ms = stats_of(100, n);
  s.residual_ms = stats_of(5, n);
  for (std::size_t i = 0; i < s.steps; ++i)
    s.timeline.push_back(step_bucket{static_cast<std::int32_t>(i), 1, 100, 100, 100});
  return s;
}

phase_summary phase(phase_kind k, const char* name, double ms, std::size_t n, double step_ms = 100) {
  phase_summary p;
  p.kind = k;
  p.name = name;
  p.wall_ms = stats_of(ms, n);
  p.share = ms / step_ms;
  return p;
}

kernel_summary kernels(std::size_t steps, double idle_share, double mean_kernel_us, double per_step) {
  kernel_summary k;
  k.steps = steps;
  k.idle_share = idle_share;
  k.busy_share = 1 - idle_share;
  k.mean_kernel_us = mean_kernel_us;
  k.kernels_per_step = per_step;
  return k;
}

counter_summary counters(std::size_t steps, double busy, double sm_active) {
  counter_summary c;
  c.steps = steps;
  c.busy_share = busy;
  c.sm_active_share = sm_active;
  return c;
}

std::vector<verdict> only(const std::vector<verdict>& all, verdict_code code) {
  std::vector<verdict> out;
  for (const auto& v : all)
    if (v.code == code) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("a steady run with its time in phases gets no verdict", "[verdicts]") {
  auto s = flat_run();
  s.phases.push_back(phase(phase_kind::dataloader, "dataloader", 5, 40));
  s.phases.push_back(phase(phase_kind::forward, "forward", 40, 40));
  s.phases.push_back(phase(phase_kind::backward, "backward", 50, 40));
  CHECK(judge_run(s).empty());
}

TEST_CASE("an empty run gets no verdict", "[verdicts]") {
  run_summary s;
  CHECK(judge_run(s).empty());
}

TEST_CASE("input_bound fires at the dataloader's share threshold, with every dataloader phase summed", "[verdicts]") {
  auto s = flat_run();
  s.phases.push_back(phase(phase_kind::dataloader, "fetch", 10, 40));
  s.phases.push_back(phase(phase_kind::dataloader, "copy", 4.9, 40));
  CHECK(only(judge_run(s), verdict_code::input_bound).empty());  // 14.9% < 15%
  s.phases[1] = phase(phase_kind::dataloader, "copy", 5, 40);
  const auto v = only(judge_run(s), verdict_code::input_bound);
  REQUIRE(v.size() == 1);
  CHECK(v[0].figure("share") == Approx(0.15));
  CHECK(v[0].figure("ms_per_step") == Approx(15));
  CHECK(v[0].steps == 40);
}

TEST_CASE("host_bound needs an idle GPU and short kernels in forward or backward (kernel records)", "[verdicts]") {
  auto s = flat_run();
  auto fwd = phase(phase_kind::forward, "forward", 40, 40);
  fwd.kernels = kernels(6, 0.82, 5.0, 4200);
  auto opt = phase(phase_kind::optimizer, "optimizer", 10, 40);
  opt.kernels = kernels(6, 0.95, 2.0, 300);  // the optimizer is never the host-bound phase here
  s.phases = {fwd, opt};
  auto v = only(judge_run(s), verdict_code::host_bound);
  REQUIRE(v.size() == 1);
  CHECK(v[0].phase == "forward");
  CHECK(v[0].steps == 6);
  CHECK(std::string(v[0].source) == "kernels");
  CHECK(v[0].figure("idle_share") == Approx(0.82));
  CHECK(v[0].figure("mean_kernel_us") == Approx(5.0));
  CHECK(v[0].figure("kernels_per_step") == Approx(4200));

  SECTION("long kernels: the GPU idles for another reason, not launch overhead") {
    s.phases[0].kernels = kernels(6, 0.82, 16.0, 1000);
    CHECK(only(judge_run(s), verdict_code::host_bound).empty());
  }
  SECTION("a busy GPU") {
    s.phases[0].kernels = kernels(6, 0.39, 5.0, 4200);
    CHECK(only(judge_run(s), verdict_code::host_bound).empty());
  }
  SECTION("counters alone give the idle share") {
    s.phases[0].kernels.reset();
    s.phases[0].counters = counters(40, 0.3, 0.25);
    v = only(judge_run(s), verdict_code::host_bound);
    REQUIRE(v.size() == 1);
    CHECK(std::string(v[0].source) == "counters");
    CHECK(v[0].steps == 40);
    CHECK(v[0].figure("idle_share") == Approx(0.7));
    CHECK(v[0].figure("mean_kernel_us") == -1);  // not measured: not claimed
  }
}

TEST_CASE("gpu_bound takes the counters' step busy share before the kernel records'", "[verdicts]") {
  auto s = flat_run();
  s.step_kernels = kernels(5, 0.05, 40, 800);  // records: 95% busy on 5 steps
  s.step_counters = counters(40, 0.89, 0.8);   // counters: 89% on 40 steps
  CHECK(only(judge_run(s), verdict_code::gpu_bound).empty());
  s.step_counters = counters(40, 0.93, 0.8);
  auto v = only(judge_run(s), verdict_code::gpu_bound);
  REQUIRE(v.size() == 1);
  CHECK(v[0].steps == 40);
  CHECK(v[0].figure("busy_share") == Approx(0.93));
  s.step_counters.reset();
  v = only(judge_run(s), verdict_code::gpu_bound);
  REQUIRE(v.size() == 1);
  CHECK(v[0].steps == 5);
  CHECK(std::string(v[0].source) == "kernels");
}

TEST_CASE("small_kernels: busy while under half the SMs are active", "[verdicts]") {
  auto s = flat_run();
  auto bwd = phase(phase_kind::backward, "backward", 50, 40);
  bwd.counters = counters(38, 0.8, 0.41);
  s.phases = {bwd};
  CHECK(only(judge_run(s), verdict_code::small_kernels).empty());  // 0.41 >= 0.5 x 0.8
  s.phases[0].counters = counters(38, 0.8, 0.19);
  const auto v = only(judge_run(s), verdict_code::small_kernels);
  REQUIRE(v.size() == 1);
  CHECK(v[0].phase == "backward");
  CHECK(v[0].steps == 38);
  CHECK(v[0].figure("sm_active_share") == Approx(0.19));
  s.phases[0].counters = counters(38, 0.45, 0.1);  // mostly idle: that is host_bound's case, not this one
  CHECK(only(judge_run(s), verdict_code::small_kernels).empty());
}

TEST_CASE("residual_heavy: time in no phase, share of the step", "[verdicts]") {
  auto s = flat_run();
  s.residual_ms = stats_of(19.9, 40);
  CHECK(only(judge_run(s), verdict_code::residual_heavy).empty());
  s.residual_ms = stats_of(30, 40);
  const auto v = only(judge_run(s), verdict_code::residual_heavy);
  REQUIRE(v.size() == 1);
  CHECK(v[0].figure("share") == Approx(0.3));
}

TEST_CASE("unstable: drift between the halves of the measured steps", "[verdicts]") {
  auto s = flat_run(40);
  for (auto& b : s.timeline)
    if (b.first_step >= 22) b.mean_ms = 112;  // second half of the 40 measured steps (2..41) 12% slower
  const auto v = only(judge_run(s), verdict_code::unstable);
  REQUIRE(v.size() == 1);
  CHECK(v[0].why_unstable == instability::drift);
  CHECK(v[0].figure("second_half_over_first") == Approx(1.12));
  CHECK(v[0].steps == 40);

  SECTION("warm-up steps do not count") {
    auto w = flat_run(40);
    w.timeline[0].mean_ms = w.timeline[1].mean_ms = 900;
    CHECK(only(judge_run(w), verdict_code::unstable).empty());
  }
  SECTION("9% is within") {
    for (auto& b : s.timeline)
      if (b.first_step >= 22) b.mean_ms = 109;
    CHECK(only(judge_run(s), verdict_code::unstable).empty());
  }
}

TEST_CASE("unstable: two groups of step times, as a loaded machine gave (400-630 ms, then 110-200 ms)", "[verdicts]") {
  auto s = flat_run(40);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> slow(400, 630), fast(110, 200);
  // Alternating in time, so that the halves have the same mean: bimodal, not drift.
  for (auto& b : s.timeline) b.mean_ms = (b.first_step % 4 == 0) ? slow(rng) : fast(rng);
  const auto v = only(judge_run(s), verdict_code::unstable);
  REQUIRE(v.size() == 1);
  CHECK(v[0].why_unstable == instability::bimodal);
  CHECK(v[0].figure("low_ms") > 110);
  CHECK(v[0].figure("low_ms") < 200);
  CHECK(v[0].figure("high_ms") > 400);
  CHECK(v[0].figure("minority_share") == Approx(0.25));

  SECTION("one wide group is not two: normal and uniform step times stay quiet") {
    std::normal_distribution<double> normal(100, 15);
    for (auto& b : s.timeline) b.mean_ms = normal(rng);
    CHECK(only(judge_run(s), verdict_code::unstable).empty());
    std::uniform_real_distribution<double> uniform(80, 120);
    for (auto& b : s.timeline) b.mean_ms = uniform(rng);
    CHECK(only(judge_run(s), verdict_code::unstable).empty());
  }
}

TEST_CASE("unstable: a spread so wide that the median misleads", "[verdicts]") {
  auto s = flat_run(40);
  s.step_ms = stats_of(100, 40, 80, 129);
  CHECK(only(judge_run(s), verdict_code::unstable).empty());
  s.step_ms = stats_of(100, 40, 70, 125);  // (125 - 70) / 100 = 0.55
  const auto v = only(judge_run(s), verdict_code::unstable);
  REQUIRE(v.size() == 1);
  CHECK(v[0].why_unstable == instability::spread);
  CHECK(v[0].figure("p90_ms") == 125);
  CHECK(is_unstable(judge_run(s)));
}

TEST_CASE("too few measured steps give no verdict on the step's shape", "[verdicts]") {
  auto s = flat_run(7);
  s.step_ms = stats_of(100, 7, 50, 200);
  CHECK(only(judge_run(s), verdict_code::unstable).empty());
}

TEST_CASE("the words of a verdict carry its figures and the steps they rest on", "[verdicts]") {
  auto s = flat_run();
  auto fwd = phase(phase_kind::forward, "forward", 40, 40);
  fwd.kernels = kernels(6, 0.82, 5.04, 4200);
  s.phases = {fwd};
  s.residual_ms = stats_of(25, 40);
  const auto all = judge_run(s);
  REQUIRE(all.size() == 2);
  CHECK(verdict_evidence(all[0]) ==
        "forward: the GPU is idle 82% of the phase while it runs 4200 kernels per step of 5.0 us on average (6 steps "
        "with kernel records)");
  CHECK(verdict_advice(all[0]).find("CUDA graphs") != std::string::npos);
  CHECK(verdict_evidence(all[1]) == "25% of the step (25.00 ms) lies in no phase (40 steps)");
  for (const auto& v : all) CHECK(!verdict_advice(v).empty());
}

TEST_CASE("the regression gate: slower only beyond the tolerance and the runs' noise", "[verdicts][gate]") {
  auto base = flat_run(100);
  base.step_ms = stats_of(100, 100, 97.437, 102.563);  // robust sigma 2 ms
  auto next = flat_run(100);
  // The noise band: 1.96 x 1.2533 x sqrt(4/100 + 4/100) = 0.6948 ms of 100.
  SECTION("slower by 6% against 5%: slower") {
    next.step_ms = stats_of(106, 100, 103.437, 108.563);
    const auto g = regression_gate(base, next, 0.05);
    CHECK(g.outcome == gate_outcome::slower);
    CHECK(g.change == Approx(0.06));
    CHECK(g.noise == Approx(0.006948).epsilon(0.001));
    CHECK(g.base_steps == 100);
  }
  SECTION("slower by 4% against 5%: within tolerance") {
    next.step_ms = stats_of(104, 100, 101.437, 106.563);
    CHECK(regression_gate(base, next, 0.05).outcome == gate_outcome::within_tolerance);
  }
  SECTION("faster") {
    next.step_ms = stats_of(90, 100, 87.437, 92.563);
    CHECK(regression_gate(base, next, 0.05).outcome == gate_outcome::faster);
  }
  SECTION("slower by 6% on a few noisy steps: within noise") {
    base.step_ms = stats_of(100, 10, 80, 120);  // sigma 15.6 ms on 10 steps
    next.step_ms = stats_of(106, 10, 86, 126);
    const auto g = regression_gate(base, next, 0.05);
    CHECK(g.outcome == gate_outcome::within_noise);
    CHECK(g.noise > 0.06);
  }
  SECTION("no steps") {
    next.step_ms = summary_stats{};
    CHECK(regression_gate(base, next, 0.05).outcome == gate_outcome::no_steps);
  }
}

TEST_CASE("verdicts are shown under the table, in the JSON summary and in the HTML, and a steady run shows none",
          "[verdicts][sinks]") {
  run_result r;
  r.name = "loader";
  r.summary = flat_run();
  r.summary.phases.push_back(phase(phase_kind::dataloader, "dataloader", 40, 40));
  r.summary.phases.push_back(phase(phase_kind::forward, "forward", 55, 40));

  const auto table = format_table(r);
  CHECK(table.find("verdict input_bound: ") != std::string::npos);
  CHECK(table.find("\n  try: ") != std::string::npos);

  const auto j = nlohmann::json::parse(json_summary({r}));
  const auto& vs = j["runs"][0]["verdicts"];
  REQUIRE(vs.is_array());
  REQUIRE(vs.size() == 1);
  CHECK(vs[0]["code"] == "input_bound");
  CHECK(!vs[0].contains("phase"));  // every dataloader phase summed: run-wide
  CHECK(vs[0]["steps"] == 40);
  CHECK(vs[0]["figures"]["share"].get<double>() == Approx(0.40));
  CHECK(vs[0]["evidence"].get<std::string>().find("40") != std::string::npos);
  CHECK(!vs[0]["advice"].get<std::string>().empty());

  const auto html = html_report({r});
  CHECK(html.find("<caption>Verdicts</caption>") != std::string::npos);
  CHECK(html.find("<code>input_bound</code>") != std::string::npos);

  run_result steady;
  steady.name = "steady";
  steady.summary = flat_run();
  steady.summary.phases.push_back(phase(phase_kind::forward, "forward", 95, 40));
  CHECK(format_table(steady).find("verdict ") == std::string::npos);
  CHECK(nlohmann::json::parse(json_summary({steady}))["runs"][0]["verdicts"].empty());
  CHECK(html_report({steady}).find("Verdicts") == std::string::npos);
}

namespace {
/// flat_run's 42 steps of 100 ms back to back, but for one gap of `gap_ms` after step 20 that holds
/// an epoch mark: the gap's share of the run is gap_ms / (4200 + gap_ms).
run_summary run_with_gap(double gap_ms) {
  auto s = flat_run();
  outside_steps_accumulator acc;
  const auto ns = [](double ms) { return static_cast<std::int64_t>(ms * 1e6 + 0.5); };
  double t = 0;
  for (std::int32_t i = 0; i < 42; ++i) {
    if (i == 21) {
      acc.add_epoch_mark(ns(t + 1));
      t += gap_ms;
    }
    (void)acc.add_step(i, ns(t), ns(t + 100));
    t += 100;
  }
  s.outside_steps = acc.summary();
  return s;
}
}  // namespace

TEST_CASE("outside_steps fires when the time between steps is 10% of the run, with its evidence", "[verdicts]") {
  // 466 / 4666 = 9.99%: no verdict; 467 / 4667 = 10.006%: the verdict.
  CHECK(only(judge_run(run_with_gap(466)), verdict_code::outside_steps).empty());
  const auto vs = only(judge_run(run_with_gap(467)), verdict_code::outside_steps);
  REQUIRE(vs.size() == 1);
  const auto& v = vs[0];
  CHECK(v.figure("gap_share") == Approx(467.0 / 4667));
  CHECK(v.figure("gaps_ms") == Approx(467));
  CHECK(v.figure("gaps") == 41);  // the other 40 gaps are 0 ms
  CHECK(v.figure("largest_ms") == Approx(467));
  CHECK(v.figure("largest_after_step") == 20);
  CHECK(v.figure("epoch_gaps_ms") == Approx(467));
  CHECK(v.figure("span_ms") == Approx(4667));
  CHECK(v.steps == 42);
  CHECK(verdict_evidence(v) ==
        "10% of the run (467.0 of 4667.0 ms from the first step's start to the last step's end) "
        "lies between steps, in 41 gaps; the largest, 467.0 ms, after step 20; 467.0 ms in 1 "
        "gap at an epoch's end (42 steps)");
  CHECK(verdict_advice(v).find("between steps") != std::string::npos);
  // A run whose steps follow one another gets none.
  CHECK(only(judge_run(run_with_gap(0)), verdict_code::outside_steps).empty());
}

namespace {
/// A phase with kernel records whose copies fill `copy_share` of a mean GPU window of `window_ms`.
phase_summary copying_phase(const char* name, double window_ms, double copy_share) {
  auto p = phase(phase_kind::dataloader, name, 5, 40);
  p.kernels = kernels(6, 0.2, 20.0, 10);
  p.kernels->window_ms = stats_of(window_ms, 6);
  p.kernels->copy_share = copy_share;
  p.kernels->copy_ms = copy_share * window_ms;
  return p;
}

/// flat_run with every step's peak allocated memory given by `mib(step index)`.
template <class Mib>
run_summary run_with_memory(Mib mib, std::size_t n = 40) {
  auto s = flat_run(n);
  for (auto& b : s.timeline) {
    b.memory_steps = 1;
    b.allocated_bytes = mib(static_cast<std::size_t>(b.first_step)) * 1024.0 * 1024.0;
  }
  return s;
}
}  // namespace

TEST_CASE("copy_bound: copies fill 30% of a phase's GPU window of at least 0.1 ms", "[verdicts][copies]") {
  auto s = flat_run();
  s.phases = {copying_phase("h2d", 2.0, 0.29)};
  CHECK(only(judge_run(s), verdict_code::copy_bound).empty());
  s.phases = {copying_phase("h2d", 2.0, 0.30)};
  auto v = only(judge_run(s), verdict_code::copy_bound);
  REQUIRE(v.size() == 1);
  CHECK(v[0].phase == "h2d");
  CHECK(v[0].steps == 6);
  CHECK(std::string(v[0].source) == "kernels");
  CHECK(v[0].figure("copy_share") == Approx(0.30));
  CHECK(v[0].figure("copy_ms_per_step") == Approx(0.6));
  CHECK(v[0].figure("window_ms") == Approx(2.0));
  CHECK(verdict_evidence(v[0]) ==
        "h2d: copies take 30% of the phase's GPU window (0.60 of 2.00 ms per step) "
        "(6 steps with kernel records)");

  SECTION("a window under 0.1 ms is too short to judge, however full of copies") {
    s.phases = {copying_phase("h2d", 0.09, 0.9)};
    CHECK(only(judge_run(s), verdict_code::copy_bound).empty());
  }
  SECTION("no kernel records: no copy figure, no verdict") {
    s.phases = {phase(phase_kind::dataloader, "h2d", 5, 40)};
    CHECK(only(judge_run(s), verdict_code::copy_bound).empty());
  }
}

TEST_CASE("memory_creep: the last quarter's allocated memory 5% and 64 MiB above the first's", "[verdicts][memory]") {
  // 2 warm-up steps (indices 0, 1), then 40 measured: quarters of 10 steps each.
  SECTION("100 MiB (10%) more in the last quarter fires, warm-up steps left out") {
    auto s = run_with_memory([](std::size_t i) { return i < 2 ? 0.0 : i < 32 ? 1000.0 : 1100.0; });
    auto v = only(judge_run(s), verdict_code::memory_creep);
    REQUIRE(v.size() == 1);
    CHECK(v[0].steps == 40);
    CHECK(v[0].phase.empty());
    CHECK(v[0].figure("first_quarter_mib") == Approx(1000));
    CHECK(v[0].figure("last_quarter_mib") == Approx(1100));
    CHECK(v[0].figure("growth_share") == Approx(0.1));
    CHECK(verdict_evidence(v[0]) ==
          "allocated GPU memory grows from 1000 MiB in the first quarter of the steps to "
          "1100 MiB in the last (+10%) (40 steps)");
  }
  SECTION("a steady rise: quarters' means of a line") {
    // 2000 MiB + 4 MiB per measured step: first quarter steps 0..9 mean 2018, last 30..39 mean 2138.
    auto s = run_with_memory([](std::size_t i) { return 2000.0 + 4.0 * (static_cast<double>(i) - 2); });
    auto v = only(judge_run(s), verdict_code::memory_creep);
    REQUIRE(v.size() == 1);
    CHECK(v[0].figure("first_quarter_mib") == Approx(2018));
    CHECK(v[0].figure("last_quarter_mib") == Approx(2138));
  }
  SECTION("under 64 MiB of growth does not fire, even at 6%") {
    auto s = run_with_memory([](std::size_t i) { return i < 32 ? 1000.0 : 1060.0; });
    CHECK(only(judge_run(s), verdict_code::memory_creep).empty());
  }
  SECTION("under 5% does not fire, even at 64 MiB") {
    auto s = run_with_memory([](std::size_t i) { return i < 32 ? 2000.0 : 2064.0; });
    CHECK(only(judge_run(s), verdict_code::memory_creep).empty());
  }
  SECTION("memory that falls does not creep") {
    auto s = run_with_memory([](std::size_t i) { return i < 32 ? 2000.0 : 1000.0; });
    CHECK(only(judge_run(s), verdict_code::memory_creep).empty());
  }
  SECTION("fewer than 8 measured steps with a memory sample: no trend") {
    auto s = run_with_memory([](std::size_t i) { return i < 5 ? 1000.0 : 2000.0; }, 7);
    CHECK(only(judge_run(s), verdict_code::memory_creep).empty());
    s = run_with_memory([](std::size_t i) { return i < 5 ? 1000.0 : 2000.0; }, 8);
    CHECK(only(judge_run(s), verdict_code::memory_creep).size() == 1);
  }
  SECTION("steps without a memory sample count for nothing") {
    auto s = flat_run();
    CHECK(only(judge_run(s), verdict_code::memory_creep).empty());
  }
}

TEST_CASE("copy_bound and memory_creep from hand-made steps: the summary's figures, then the verdicts",
          "[verdicts][copies][memory]") {
  // 12 steps of 10 ms, 2 warm-up. Every step samples memory: 1 GiB, growing by 16 MiB per step.
  // Steps 4 and 8 are recorded: "h2d" has a GPU window of 2 ms holding 0.8 ms of copies, idle 1 ms
  // (0.6 host, 0.1 kernel gaps, 0.3 other); its 4 kernels per step last 4, 6, 12 and 30 us.
  std::vector<step_result> steps;
  for (int i = 0; i < 12; ++i) {
    step_result st;
    st.step = i;
    st.wall_ms = 10;
    st.phases.push_back({phase_kind::dataloader, "h2d", 2.0, 1, true});
    st.residual_ms = 8;
    step_gpu_report g;
    g.step = i;
    g.peak_allocated_bytes = (1LL << 30) + static_cast<std::int64_t>(i) * (16LL << 20);
    if (i == 4 || i == 8) {
      g.kernels_measured = true;
      phase_gpu_facts p;
      p.kind = phase_kind::dataloader;
      p.name = "h2d";
      p.facts.window_ns = 2'000'000;
      p.facts.busy_ns = 1'000'000;
      p.facts.idle_ns = 1'000'000;
      p.facts.idle_host_ns = 600'000;
      p.facts.idle_kernel_gap_ns = 100'000;
      p.facts.idle_other_ns = 300'000;
      p.facts.copy_busy_ns = 800'000;
      p.facts.kernel_count = 4;
      p.facts.kernel_ns = 52'000;
      p.facts.short_kernel_count = 2;
      p.kernel_durations_ns = {4'000, 6'000, 12'000, 30'000};
      g.phases.push_back(p);
      g.total = p.facts;
    }
    st.gpu = g;
    steps.push_back(st);
  }
  const run_summary s = summarize_run(steps, 2);
  REQUIRE(s.phases.size() == 1);
  REQUIRE(s.phases[0].kernels);
  const kernel_summary& k = *s.phases[0].kernels;
  CHECK(k.steps == 2);
  CHECK(k.idle_host_ms == Approx(0.6));
  CHECK(k.idle_kernel_gap_ms == Approx(0.1));
  CHECK(k.idle_other_ms == Approx(0.3));
  CHECK(k.idle_host_ms + k.idle_kernel_gap_ms + k.idle_other_ms == Approx(k.idle_ms.mean));
  CHECK(k.copy_ms == Approx(0.8));
  CHECK(k.copy_share == Approx(0.4));
  CHECK(k.kernels_per_step == Approx(4));
  CHECK(k.short_kernel_share == Approx(0.5));
  // Median of {4, 4, 6, 6, 12, 12, 30, 30} us: between 6 and 12, i.e. 9 us, read within 0.5%.
  CHECK(k.median_kernel_us == Approx(9).epsilon(0.005));
  REQUIRE(s.step_kernels);
  CHECK(s.step_kernels->median_kernel_us == Approx(9).epsilon(0.005));
  // The timeline keeps each step's memory; the measured steps 2..11 run from 1056 to 1200 MiB.
  REQUIRE(s.timeline.size() == 12);
  CHECK(s.timeline[3].memory_steps == 1);
  CHECK(s.timeline[3].allocated_bytes == Approx((1LL << 30) + 3 * (16LL << 20)));

  const auto vs = judge_run(s);
  auto copies = only(vs, verdict_code::copy_bound);
  REQUIRE(copies.size() == 1);
  CHECK(copies[0].figure("copy_share") == Approx(0.4));
  CHECK(copies[0].steps == 2);
  auto creep = only(vs, verdict_code::memory_creep);
  REQUIRE(creep.size() == 1);
  CHECK(creep[0].steps == 10);
  // Quarters of 10 steps: 2.5 steps each. First: steps 2, 3 and half of 4 -> (1056 + 1072 + 0.5 x 1088) / 2.5.
  CHECK(creep[0].figure("first_quarter_mib") == Approx((1024 + (32 + 48 + 0.5 * 64) / 2.5)));
  CHECK(creep[0].figure("last_quarter_mib") == Approx((1024 + (176 + 160 + 0.5 * 144) / 2.5)));

  SECTION("the idle split is shown in the table, the JSON summary and the HTML") {
    run_result r;
    r.name = "copies";
    r.steps = steps;
    r.summary = s;
    const auto table = format_table(r);
    CHECK(table.find("GPU idle by kind") != std::string::npos);
    CHECK(table.find("verdict copy_bound: h2d: copies take 40%") != std::string::npos);
    CHECK(table.find("verdict memory_creep: ") != std::string::npos);
    const auto j = nlohmann::json::parse(json_summary({r}));
    const auto& kj = j["runs"][0]["summary"]["phases"][0]["kernels"];
    CHECK(kj["idle_split"]["host_ms"].get<double>() == Approx(0.6));
    CHECK(kj["idle_split"]["kernel_gap_under_us"].get<double>() == Approx(5));
    CHECK(kj["launches"]["short_under_us"].get<double>() == Approx(10));
    CHECK(kj["launches"]["short_share"].get<double>() == Approx(0.5));
    CHECK(kj["copy_share"].get<double>() == Approx(0.4));
    CHECK(j["runs"][0]["timeline"][3]["memory_steps"] == 1);
    const auto html = html_report({r});
    CHECK(html.find("GPU idle by kind") != std::string::npos);
    CHECK(html.find("<code>copy_bound</code>") != std::string::npos);
    CHECK(html.find("<code>memory_creep</code>") != std::string::npos);
  }
}

namespace {
/// 42 steps (2 warm-up) of 100 ms, with every 5th step recorded (kernel records on) at `recorded_ms`;
/// from step `drift_from` on, the untraced steps take `later_ms`.
std::vector<step_result> partly_recorded_steps(double recorded_ms, int drift_from = 1000, double later_ms = 100) {
  std::vector<step_result> steps;
  for (int i = 0; i < 42; ++i) {
    step_result st;
    st.step = i;
    const bool rec = i % 5 == 0;
    st.wall_ms = rec ? recorded_ms : (i >= drift_from ? later_ms : 100);
    step_gpu_report g;  // no phase and no residual: only the step's shape can give a verdict
    g.step = i;
    g.kernels_measured = rec;
    if (rec) {
      g.total.window_ns = 1'000'000;
      g.total.busy_ns = 500'000;  // half busy: no gpu_bound
    }
    st.gpu = g;
    steps.push_back(st);
  }
  return steps;
}
}  // namespace

TEST_CASE("unstable reads the untraced steps where some were recorded: recording's cost is not instability",
          "[verdicts]") {
  // Recorded steps 40% slower, one in five: over every step that reads as two groups (100 and 140 ms,
  // the smaller holding 20%) and a p10-p90 spread of 0.4; the untraced steps are flat.
  const run_summary s = summarize_run(partly_recorded_steps(140), 2);
  // Untraced: neither recorded nor right after a recorded step: of the steps 0..41, 0, 5, ..., 40 are
  // recorded and 1, 6, ..., 41 follow one.
  std::uint32_t untraced = 0, all = 0;
  for (const auto& b : s.timeline) {
    untraced += b.untraced_steps;
    all += b.steps;
    if (b.untraced_steps) CHECK(b.untraced_mean_ms == 100);
  }
  CHECK(all == 42);
  CHECK(untraced == 42 - 9 - 9);
  CHECK(s.baseline.steps == 40 - 8 - 8);  // the measured steps 2..41: 8 recorded, 8 right after one
  CHECK(s.baseline.median_ms == 100);
  CHECK(s.baseline.p90_ms == 100);
  CHECK(only(judge_run(s), verdict_code::unstable).empty());

  // The same steps with the timeline's untraced means unknown (a summary written before them):
  // every step is read, and the recorded ones make two groups.
  run_summary old = s;
  for (auto& b : old.timeline) b.untraced_steps = 0, b.untraced_mean_ms = 0;
  const auto mixed = only(judge_run(old), verdict_code::unstable);
  REQUIRE(mixed.size() == 1);
  CHECK(mixed[0].why_unstable == instability::bimodal);
  CHECK(mixed[0].figure("high_ms") == Approx(140));

  SECTION("a real drift of the untraced steps still fires, and says which steps it rests on") {
    const run_summary d = summarize_run(partly_recorded_steps(140, 22, 120), 2);
    const auto v = only(judge_run(d), verdict_code::unstable);
    REQUIRE(v.size() == 1);
    CHECK(v[0].why_unstable == instability::drift);
    CHECK(v[0].figure("second_half_over_first") > 1.1);
    CHECK(v[0].steps == 24);
    CHECK(std::string(v[0].source) == "untraced");
    CHECK(verdict_evidence(v[0]).find("(24 steps without kernel records)") != std::string::npos);
  }
  SECTION("the untraced means and the baseline's quantiles are in the JSON summary") {
    run_result r;
    r.name = "partly";
    r.summary = s;
    const auto j = nlohmann::json::parse(json_summary({r}))["runs"][0];
    CHECK(j["summary"]["baseline"]["median_ms"] == 100);
    CHECK(j["timeline"][3]["untraced_steps"] == 1);
    CHECK(j["timeline"][3]["untraced_mean_ms"] == 100);
    CHECK(j["timeline"][5]["untraced_steps"] == 0);
    CHECK(j["verdicts"].empty());
  }
}
