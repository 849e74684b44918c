// Statistics against hand-computed values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "mixed_run.hpp"
#include "test_helpers.hpp"

using namespace traceml;

namespace {
span_record rec(phase_kind kind, const char* name, double b_ms, double e_ms, int step, int micro = -1, int nesting = 0,
                unsigned thread = 0) {
  span_record r;
  r.kind = kind;
  r.name = name;
  r.begin_ns = static_cast<std::int64_t>(b_ms * 1e6);
  r.end_ns = static_cast<std::int64_t>(e_ms * 1e6);
  r.step = step;
  r.microbatch = micro;
  r.nesting = static_cast<std::uint8_t>(nesting);
  r.thread = thread;
  return r;
}
}  // namespace

namespace {
/// Step `i`: 10 ms with a 6 ms forward phase over two micro-batches, and a GPU report with `forward`
/// as the facts of each micro-batch's forward and `total` for the step.
step_result two_microbatch_step(int i, bool kernels_measured, const gpu_facts& forward, const gpu_facts& total) {
  step_result st;
  st.step = i;
  st.wall_ms = 10;
  st.phases.push_back({phase_kind::forward, "forward", 6, 2, true});
  step_gpu_report g;
  g.step = i;
  g.kernels_measured = kernels_measured;
  g.total = total;
  phase_gpu_facts f;
  f.kind = phase_kind::forward;
  f.name = "forward";
  f.microbatch = 0;
  f.facts = forward;
  g.phases = {f, f};
  g.phases[1].microbatch = 1;
  st.gpu = g;
  return st;
}
}  // namespace

/// The phase of that name in a summary (the test fails when there is none).
inline const phase_summary& phase_named(const run_summary& s, const char* name) {
  for (const auto& p : s.phases)
    if (p.name == name) return p;
  FAIL("no phase " << name);
  throw;
}

TEST_CASE("summarize: median, mean, extremes, p10/p90, sample stddev", "[stats]") {
  const auto s = summarize({4, 100, 1, 3, 2});
  CHECK(s.count == 5);
  CHECK(s.mean == Approx(22.0));
  CHECK(s.median == Approx(3.0));
  CHECK(s.min == 1.0);
  CHECK(s.max == 100.0);
  CHECK(s.p10 == Approx(1.4));   // rank 0.4 between 1 and 2
  CHECK(s.p90 == Approx(61.6));  // rank 3.6 between 4 and 100
  CHECK(s.stddev == Approx(std::sqrt(7610.0 / 4.0)));

  SECTION("even count: median between the middle two") { CHECK(summarize({1, 2, 3, 10}).median == Approx(2.5)); }
  SECTION("one value: no spread") {
    const auto one = summarize({7});
    CHECK(one.median == 7);
    CHECK(one.p10 == 7);
    CHECK(one.p90 == 7);
    CHECK(one.stddev == 0);
  }
  SECTION("empty: all zero") { CHECK(summarize({}).count == 0); }
}

TEST_CASE("warm-up: the requested count, never more than half the run", "[stats]") {
  CHECK(effective_warmup(5, 100) == 5);
  CHECK(effective_warmup(5, 10) == 5);
  CHECK(effective_warmup(5, 8) == 4);
  CHECK(effective_warmup(5, 3) == 1);
  CHECK(effective_warmup(5, 1) == 0);
  CHECK(effective_warmup(0, 10) == 0);
}

TEST_CASE("union_length merges overlaps and clips to the window", "[stats]") {
  using detail::union_length;
  CHECK(union_length({{0, 10}, {5, 15}, {20, 30}}, 2, 25) == 18);
  CHECK(union_length({{20, 30}, {0, 10}}, 0, 100) == 20);
  CHECK(union_length({{0, 10}, {2, 3}}, 0, 100) == 10);
  CHECK(union_length({}, 0, 100) == 0);
  CHECK(union_length({{50, 60}}, 0, 40) == 0);
}

TEST_CASE("merge_intervals of sorted runs and coverage agree with a nanosecond-by-nanosecond count", "[stats]") {
  using detail::interval;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    // A few runs in time order (streams, markers), or, every fifth trial, no order at all.
    std::vector<interval> iv;
    const int runs = 1 + trial % 20;
    for (int r = 0; r < runs; ++r)
      for (std::int64_t t = rng() % 50, n = rng() % 12; n-- > 0; t += 1 + rng() % 30)
        iv.emplace_back(t, t + rng() % 25);
    if (trial % 5 == 4) std::shuffle(iv.begin(), iv.end(), rng);
    std::vector<bool> on(1000, false);  // the truth: which nanoseconds some interval covers
    for (const auto& [b, e] : iv)
      for (std::int64_t t = b; t < e; ++t) on[static_cast<std::size_t>(t)] = true;
    const std::vector<interval> merged = detail::merge_intervals(iv);
    REQUIRE(std::is_sorted(merged.begin(), merged.end()));
    for (std::size_t i = 0; i < merged.size(); ++i) {
      CHECK(merged[i].first < merged[i].second);
      if (i) CHECK(merged[i - 1].second < merged[i].first);  // disjoint, not touching
    }
    const detail::coverage cov(merged);
    for (int q = 0; q < 50; ++q) {
      const std::int64_t lo = static_cast<std::int64_t>(rng() % 900), hi = lo + static_cast<std::int64_t>(rng() % 100);
      const auto truth = std::count(on.begin() + lo, on.begin() + hi, true);
      CHECK(cov.in(lo, hi) == truth);
      CHECK(detail::covered_in(merged, lo, hi) == truth);
    }
  }
}

TEST_CASE("sampled_busy_ns: busy time as back-to-back samples see it", "[stats]") {
  // By hand, one grid phase: busy [0, 50), window [0, 200), 100 ns samples from -99. [-99, 1)
  // overlaps the window by 1 and holds 1 busy: 0.01; [1, 101) by 100 with 49 busy: 49; [101, 201)
  // by 99 with none.
  CHECK(detail::sampled_busy_ns({{0, 50}}, 0, 200, 100, 1) == Approx(49.01));
  CHECK(detail::sampled_busy_ns({{-1000, 1000}}, 0, 200, 100) == Approx(200));  // never more than the window
  // Against the definition, nanosecond by nanosecond: each sample's busy share times its overlap
  // with the window, averaged over the grid's phases.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<detail::interval> iv;
    for (std::int64_t t = rng() % 40; t < 900; t += 1 + rng() % 60) iv.emplace_back(t, t + 1 + rng() % 40);
    const auto merged = detail::merge_intervals(iv);
    std::vector<int> on(1200, 0);
    for (const auto& [b, e] : merged)
      for (std::int64_t t = b; t < e && t < 1200; ++t) on[static_cast<std::size_t>(t)] = 1;
    const std::int64_t lo = 150 + static_cast<std::int64_t>(rng() % 300),
                       hi = lo + 1 + static_cast<std::int64_t>(rng() % 400);
    const std::int64_t width = 10 + static_cast<std::int64_t>(rng() % 90);
    const int phases = 1 + static_cast<int>(rng() % 16);
    double expect = 0;
    for (int k = 0; k < phases; ++k)
      for (std::int64_t s = lo - width + (width * k) / phases + 1; s < hi; s += width) {
        std::int64_t busy = 0, overlap = 0;
        for (std::int64_t t = s; t < s + width; ++t) {
          busy += on[static_cast<std::size_t>(t)];
          overlap += t >= lo && t < hi;
        }
        expect += static_cast<double>(overlap) * static_cast<double>(busy) / static_cast<double>(width);
      }
    expect = std::min(expect / phases, static_cast<double>(hi - lo));
    CHECK(detail::sampled_busy_ns(merged, lo, hi, width, phases) == Approx(expect).epsilon(1e-12));
  }
}

TEST_CASE("compute_step: phase sums over micro-batches, nesting, residual", "[stats]") {
  const std::vector<span_record> spans = {
      rec(phase_kind::user, "attn", 12, 20, 3, 0, 1),
      rec(phase_kind::forward, "forward", 10, 30, 3, 0),
      rec(phase_kind::backward, "backward", 30, 48, 3, 0),
      rec(phase_kind::microbatch, "microbatch", 0, 50, 3, 0),
      rec(phase_kind::forward, "forward", 50, 60, 3, 1),
      rec(phase_kind::backward, "backward", 60, 85, 3, 1),
      rec(phase_kind::microbatch, "microbatch", 50, 90, 3, 1),
      rec(phase_kind::optimizer, "optimizer", 90, 98, 3),
      rec(phase_kind::dataloader, "dataloader", 0, 40, 3, -1, 0, /*thread=*/1),  // another thread
      rec(phase_kind::forward, "forward", 200, 250, 4, 0),                       // another step
      rec(phase_kind::step, "step", 0, 100, 3),
  };
  const auto st = compute_step(3, spans);
  REQUIRE(st);
  CHECK(st->step == 3);
  CHECK(st->wall_ms == Approx(100));
  CHECK(st->microbatches == 2);
  REQUIRE(st->phases.size() == 5);
  // Listed in opening order.
  CHECK(st->phases[0].name == "dataloader");
  CHECK(st->phases[1].name == "forward");
  CHECK(st->phases[2].name == "attn");
  CHECK(st->find(phase_kind::forward, "forward")->wall_ms == Approx(30));
  CHECK(st->find(phase_kind::forward, "forward")->count == 2);
  CHECK(st->find(phase_kind::backward, "backward")->wall_ms == Approx(43));
  CHECK(st->find(phase_kind::user, "attn")->top_level == false);
  CHECK(st->find(phase_kind::optimizer, "optimizer")->wall_ms == Approx(8));
  // Residual: the step's thread only, top-level phases only: 100 - (20 + 18 + 10 + 25 + 8).
  CHECK(st->residual_ms == Approx(19));
  CHECK_FALSE(compute_step(7, spans));
}

TEST_CASE("summarize_run: warm-up excluded, zero for missing phases, GPU columns, throughput", "[stats]") {
  std::vector<step_result> steps;
  const double walls[] = {500, 10, 20, 30};  // the first step is a slow warm-up
  for (int i = 0; i < 4; ++i) {
    step_result st;
    st.step = i;
    st.wall_ms = walls[i];
    st.residual_ms = 1;
    st.phases.push_back({phase_kind::forward, "forward", walls[i] / 2, 1, true});
    if (i == 3) st.phases.push_back({phase_kind::user, "eval", 4, 1, true});  // only in the last step
    step_gpu_report g;
    g.step = i;
    g.kernels_measured = true;
    g.total.kernel_ns = 4'000'000 * (i + 1);
    g.total.window_ns = 8'000'000;
    g.total.busy_ns = 3'000'000;
    g.total.idle_ns = 5'000'000;
    g.peak_allocated_bytes = 1000 * (i + 1);
    phase_gpu_facts f;
    f.kind = phase_kind::forward;
    f.name = "forward";
    f.microbatch = 0;
    f.facts.kernel_ns = 2'000'000;
    f.facts.kernel_count = 6;
    f.facts.window_ns = 3'000'000;
    f.facts.busy_ns = 2'000'000;
    f.facts.idle_ns = 1'000'000;
    f.kernels = {{"gemm", 2, 1'500'000}, {"relu", 4, 500'000}};
    g.phases = {f, f};  // two micro-batches
    g.phases[1].microbatch = 1;
    st.gpu = g;
    steps.push_back(st);
  }
  const auto s = summarize_run(steps, 1, /*tokens_per_step=*/2048, /*samples_per_step=*/4);
  CHECK(s.steps == 4);
  CHECK(s.warmup_steps == 1);
  CHECK(s.measured_steps() == 3);
  CHECK(s.step_ms.count == 3);
  CHECK(s.step_ms.mean == Approx(20));
  CHECK(s.tokens_per_s == Approx(2048 / 0.020));
  CHECK(s.samples_per_s == Approx(4 / 0.020));
  REQUIRE(s.phases.size() == 2);
  CHECK(s.phases[0].wall_ms.mean == Approx(10));
  CHECK(s.phases[0].share == Approx(0.5));
  CHECK(s.phases[1].name == "eval");
  CHECK(s.phases[1].wall_ms.mean == Approx(4.0 / 3));  // 0, 0, 4
  CHECK_FALSE(s.phases[1].kernels);                    // never ran on a recorded step
  REQUIRE(s.phases[0].kernels);
  const auto& k = *s.phases[0].kernels;
  CHECK(k.steps == 3);
  CHECK(k.kernel_ms.mean == Approx(4));  // two micro-batches of 2 ms
  CHECK(k.window_ms.mean == Approx(6));
  CHECK(k.idle_ms.mean == Approx(2));
  CHECK(k.busy_share == Approx(4.0 / 6));
  CHECK(k.idle_share == Approx(2.0 / 6));
  CHECK(k.wall_ms.mean == Approx(10));
  CHECK(k.kernels_per_step == Approx(12));
  CHECK(k.kernels_per_microbatch == Approx(6));
  CHECK(k.mean_kernel_us == Approx(2000.0 / 6));
  REQUIRE(k.top_kernels.size() == 2);
  CHECK(k.top_kernels[0].name == "gemm");
  CHECK(k.top_kernels[0].launches == 2 * 2 * 3);
  CHECK(k.top_kernels[0].launches_per_step == Approx(4));
  CHECK(k.top_kernels[0].ms_per_step == Approx(3));
  CHECK(k.top_kernels[0].mean_us == Approx(750));
  REQUIRE(s.step_kernels);
  CHECK(s.step_kernels->kernel_ms.mean == Approx((8 + 12 + 16) / 3.0));
  CHECK(s.step_kernels->busy_share == Approx(3.0 / 8));
  CHECK(s.peak_allocated_bytes == 4000);
  CHECK(s.recording.recorded_steps == 3);
  CHECK_FALSE(s.baseline.untraced);  // every step recorded: the baseline is every measured step
  CHECK(s.baseline.steps == 3);
  CHECK_FALSE(s.recording.cost);
}

TEST_CASE("summarize_run: top kernels are cut only after every recorded step was merged", "[stats]") {
  // Each recorded step has ten kernels of 6 ms that no other step has, and "steady" at 5 ms: the
  // 11th of every step, the first of the run.
  std::vector<step_result> steps;
  for (int i = 0; i < 3; ++i) {
    auto st = two_microbatch_step(i, true, gpu_facts{}, gpu_facts{});
    auto& f = st.gpu->phases;
    f.pop_back();  // one micro-batch
    for (int k = 0; k < 10; ++k)
      f[0].kernels.push_back({"step" + std::to_string(i) + "_k" + std::to_string(k), 1, 6'000'000});
    f[0].kernels.push_back({"steady", 1, 5'000'000});
    steps.push_back(st);
  }
  const auto s = summarize_run(steps, 0);
  REQUIRE(s.phases[0].kernels);
  const auto& top = s.phases[0].kernels->top_kernels;
  REQUIRE(top.size() == top_kernel_count);
  CHECK(top[0].name == "steady");
  CHECK(top[0].ms_per_step == Approx(5));
  CHECK(top[0].launches_per_step == Approx(1));
  CHECK(top[1].ms_per_step == Approx(2));  // 6 ms on one of three recorded steps
}

TEST_CASE("summarize_run on recorded and unrecorded steps: each figure from one sample set", "[stats][mixed]") {
  const auto run = traceml_test::mixed_run();
  const auto& s = run.summary;
  CHECK(s.measured_steps() == 10);
  CHECK(s.step_ms.mean == Approx(26.1));
  // Baseline: steps 2..11 without the recorded step 5 and the step after it.
  CHECK(s.baseline.untraced);
  CHECK(s.baseline.steps == 8);
  CHECK(s.baseline.step_ms == Approx(25));
  CHECK(s.recording.recorded_steps == 1);
  CHECK(s.recording.recorded_step_ms == Approx(35));
  CHECK(s.recording.untraced_step_ms == Approx(24));
  REQUIRE(s.recording.cost);
  CHECK(*s.recording.cost == Approx(35.0 / 24 - 1));
  REQUIRE(s.step_gpu_ms);
  CHECK(s.step_gpu_ms->count == 10);                                      // events: every measured step
  CHECK(s.step_gpu_ms->mean == Approx((20.5 * 7 + 24 * 2 + 31.5) / 10));  // step 6: GPU time as usual
  REQUIRE(s.step_kernels);
  CHECK(s.step_kernels->steps == 1);
  CHECK(s.step_kernels->window_ms.mean == Approx(31.5));
  CHECK(s.step_kernels->busy_ms.mean == Approx(18.5));
  CHECK(s.step_kernels->busy_share == Approx(18.5 / 31.5));
  CHECK(s.step_kernels->kernels_per_step == Approx(510));

  const auto phase = [&](const char* name) -> const phase_summary& { return phase_named(s, name); };
  const auto& fwd = phase("forward");
  CHECK(fwd.wall_ms.count == 10);
  CHECK(fwd.wall_ms.mean == Approx(8.6));
  CHECK(fwd.share == Approx(8.6 / 26.1));
  REQUIRE(fwd.gpu_ms);
  CHECK(fwd.gpu_ms->count == 10);
  CHECK(fwd.gpu_ms->mean == Approx(7.4));
  CHECK(fwd.baseline.wall_ms == Approx(8));
  CHECK(fwd.baseline.gpu_ms == Approx(7));
  REQUIRE(fwd.kernels);
  CHECK(fwd.kernels->steps == 1);
  CHECK(fwd.kernels->wall_ms.mean == Approx(12));  // the recorded step's own wall time, not the run's
  CHECK(fwd.kernels->window_ms.mean == Approx(11));
  CHECK(fwd.kernels->busy_ms.mean == Approx(6));
  CHECK(fwd.kernels->idle_ms.mean == Approx(5));
  CHECK(fwd.kernels->busy_share == Approx(6.0 / 11));
  CHECK(fwd.kernels->idle_share == Approx(5.0 / 11));
  CHECK(fwd.kernels->kernels_per_step == Approx(200));  // divided by the 1 recorded step, not by 10
  CHECK(fwd.kernels->kernels_per_microbatch == Approx(100));
  REQUIRE(fwd.kernels->top_kernels.size() == 2);
  CHECK(fwd.kernels->top_kernels[0].name == "gemm");
  CHECK(fwd.kernels->top_kernels[0].ms_per_step == Approx(3.6));  // 2 x 60 x 30 us
  CHECK(fwd.kernels->top_kernels[0].launches_per_step == Approx(120));

  const auto& eval = phase("eval");  // ran on 2 of the 10 measured steps, none recorded
  CHECK(eval.wall_ms.count == 10);
  CHECK(eval.wall_ms.mean == Approx(0.8));
  CHECK(eval.gpu_ms->mean == Approx(0.7));
  CHECK(eval.baseline.wall_ms == Approx(1));
  CHECK(eval.baseline.gpu_ms == Approx(0.875));
  CHECK_FALSE(eval.kernels);

  const auto& opt = phase("optimizer");
  CHECK(opt.kernels->idle_share == Approx(0.8));
  CHECK(opt.kernels->kernels_per_microbatch == 0);  // outside micro-batches
}

TEST_CASE("summarize_run: hardware counters rest on the sampled steps, with their agreement on recorded ones",
          "[stats][mixed]") {
  const auto run = traceml_test::mixed_run();
  const auto& s = run.summary;
  const auto phase = [&](const char* name) -> const phase_summary& { return phase_named(s, name); };
  const auto& fwd = phase("forward");
  REQUIRE(fwd.counters);
  const auto& c = *fwd.counters;
  CHECK(c.steps == 9);  // measured steps 2..11 without the unsampled step 6
  CHECK(c.window_ms.count == 9);
  CHECK(c.window_ms.mean == Approx(67.0 / 9));
  CHECK(c.busy_ms.mean == Approx(34.6 / 9));
  CHECK(c.idle_ms.mean == Approx((67.0 - 34.6) / 9));
  CHECK(c.busy_share == Approx(34.6 / 67));
  CHECK(c.sm_active_share == Approx(0.25));
  CHECK(c.tensor_share == Approx(0.2));
  CHECK(c.dram_share == Approx(0.1));
  CHECK(c.coverage == Approx(1));
  CHECK(c.samples_per_step == Approx(3350.0 / 9));
  CHECK(c.recorded_steps == 1);  // the same step for both sources
  CHECK(c.recorded_counter_busy_share == Approx(0.6));
  CHECK(c.recorded_kernel_busy_share == Approx(6.0 / 11));
  CHECK(fwd.baseline.counter_busy_ms == Approx(3.5));  // every baseline step was sampled
  CHECK(fwd.baseline.counter_steps == 8);
  CHECK(phase("backward").baseline.counter_busy_ms == Approx(8.8));
  CHECK(phase("dataloader").counters->busy_share == 0);

  const auto& eval = phase("eval");  // ran on 2 of the 9 sampled steps: zeros on the others
  REQUIRE(eval.counters);
  CHECK(eval.counters->steps == 9);
  CHECK(eval.counters->busy_ms.mean == Approx(7.0 / 9));
  CHECK(eval.counters->busy_share == Approx(1));
  CHECK(eval.counters->recorded_steps == 0);
  CHECK(eval.counters->recorded_counter_busy_share == -1);
  CHECK(eval.baseline.counter_busy_ms == Approx(0.875));

  REQUIRE(s.step_counters);
  CHECK(s.step_counters->steps == 9);
  CHECK(s.step_counters->busy_share == Approx(129.7 / 202.5));
  CHECK(s.step_counters->busy_ms.mean == Approx(129.7 / 9));
  CHECK(s.step_counters->recorded_counter_busy_share == Approx(19.5 / 31.5));
  CHECK(s.step_counters->recorded_kernel_busy_share == Approx(18.5 / 31.5));
}

TEST_CASE("summarize_run: a baseline step without samples: the share of the others, said, no counters, no summary",
          "[stats][mixed]") {
  auto run = traceml_test::mixed_run();
  run.steps[8].gpu->total.counters = {};  // a baseline step the samples did not reach
  for (auto& p : run.steps[8].gpu->phases) p.facts.counters = {};
  const auto s = summarize_run(run.steps, 2);
  for (const auto& p : s.phases) {
    INFO(p.name);
    CHECK(p.baseline.counter_steps == 7);  // of the 8 baseline steps
    REQUIRE(p.counters);
    CHECK(p.counters->steps == 8);
  }
  // The busy share of the 7 sampled baseline steps (0.5, 0.8), of the baseline GPU window of all 8.
  CHECK(phase_named(s, "forward").baseline.counter_busy_ms == Approx(0.5 * 7));
  CHECK(phase_named(s, "backward").baseline.counter_busy_ms == Approx(0.8 * 11));
  CHECK(phase_named(s, "eval").baseline.counter_busy_ms == Approx(1.0 * 0.875));
  for (auto& st : run.steps) {
    st.gpu->total.counters = {};
    for (auto& p : st.gpu->phases) p.facts.counters = {};
  }
  const auto none = summarize_run(run.steps, 2);
  CHECK_FALSE(none.step_counters);
  for (const auto& p : none.phases) CHECK_FALSE(p.counters);
}

TEST_CASE("summarize_run: shares stay within [0, 1] and busy + idle = window, whatever mix of steps",
          "[stats][mixed]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<step_result> steps;
    for (int i = 0; i < 30; ++i) {
      step_result st;
      st.step = i;
      const double fwd = 1 + 20 * u(rng);
      st.phases.push_back({phase_kind::forward, "forward", fwd, 1, true});
      st.wall_ms = fwd + 5 * u(rng);
      step_gpu_report g;
      g.step = i;
      g.kernels_measured = u(rng) < 0.2;
      phase_gpu_facts f;
      f.kind = phase_kind::forward;
      f.name = "forward";
      f.facts.span_ns = static_cast<std::int64_t>(fwd * (0.5 + u(rng)) * 1e6);
      if (g.kernels_measured) {
        f.facts.window_ns = f.facts.span_ns;
        f.facts.busy_ns = static_cast<std::int64_t>(static_cast<double>(f.facts.window_ns) * u(rng));
        f.facts.idle_ns = f.facts.window_ns - f.facts.busy_ns;
        g.total = f.facts;
      }
      if (u(rng) < 0.8) g.phases.push_back(f);  // the phase's GPU entry is missing on some steps
      g.total.span_ns = f.facts.span_ns;
      st.gpu = g;
      steps.push_back(st);
    }
    const auto s = summarize_run(steps, 3);
    for (const auto& p : s.phases) {
      CHECK(p.share >= 0);
      CHECK(p.share <= 1);
      if (!p.kernels) continue;
      CHECK(p.kernels->busy_share >= 0);
      CHECK(p.kernels->busy_share <= 1);
      CHECK(p.kernels->busy_share + p.kernels->idle_share == Approx(p.kernels->window_ms.mean > 0 ? 1 : 0));
      CHECK(p.kernels->busy_ms.mean + p.kernels->idle_ms.mean == Approx(p.kernels->window_ms.mean));
    }
  }
}

TEST_CASE("summarize_run: kernel columns average the recorded steps only", "[stats]") {
  // One step in four recorded by CUPTI (the overhead budget): per step 2 micro-batches x 100
  // kernels of forward; unrecorded steps carry phase entries with GPU time (events) only.
  std::vector<step_result> steps;
  for (int i = 0; i < 8; ++i) {
    gpu_facts forward, total;
    const bool recorded = i % 4 == 1;
    forward.span_ns = 4'000'000;
    total.span_ns = 9'000'000;
    if (recorded) {
      forward.kernel_count = 100;
      forward.kernel_ns = 3'000'000;
      forward.window_ns = 4'000'000;
      forward.busy_ns = 3'000'000;
      forward.idle_ns = 1'000'000;
      total.kernel_ns = 6'000'000;
    }
    steps.push_back(two_microbatch_step(i, recorded, forward, total));
  }
  const auto s = summarize_run(steps, 0);
  REQUIRE(s.phases[0].kernels);
  CHECK(s.phases[0].kernels->steps == 2);                   // steps 1 and 5
  CHECK(s.phases[0].kernels->kernel_ms.mean == Approx(6));  // 2 x 3 ms
  CHECK(s.phases[0].kernels->kernels_per_step == Approx(200));
  CHECK(s.phases[0].kernels->kernels_per_microbatch == Approx(100));  // not diluted by unrecorded steps
  REQUIRE(s.step_kernels);
  CHECK(s.step_kernels->steps == 2);
  REQUIRE(s.step_gpu_ms);
  CHECK(s.step_gpu_ms->count == 8);  // events: every step
  CHECK(s.phases[0].gpu_ms->count == 8);
  CHECK(s.phases[0].gpu_ms->mean == Approx(8));
  CHECK(s.baseline.steps == 4);  // 0, 3, 4, 7: not recorded, not after one
}

TEST_CASE("summarize_run: CUDA-event reports give GPU time, never kernel zeros", "[stats]") {
  std::vector<step_result> steps;
  for (int i = 0; i < 3; ++i) {
    gpu_facts forward, total;
    forward.span_ns = 2'000'000 + 1'000'000 * i;
    total.span_ns = 9'000'000;
    steps.push_back(two_microbatch_step(i, /*kernels_measured=*/false, forward, total));  // events: spans only
  }
  const auto s = summarize_run(steps, 0);
  CHECK_FALSE(s.step_kernels);
  CHECK_FALSE(s.phases[0].kernels);
  CHECK(s.recording.recorded_steps == 0);
  CHECK(s.baseline.untraced);
  CHECK(s.baseline.steps == 3);
  REQUIRE(s.step_gpu_ms);
  CHECK(s.step_gpu_ms->mean == Approx(9));
  REQUIRE(s.phases[0].gpu_ms);
  CHECK(s.phases[0].gpu_ms->mean == Approx((4 + 6 + 8) / 3.0));  // two micro-batches per step
  CHECK(s.phases[0].baseline.gpu_ms == Approx((4 + 6 + 8) / 3.0));
}

TEST_CASE("recording cost pairs each recorded step with the untraced steps before it", "[stats][mixed]") {
  // The step time drifts from 100 to 300 ms over the run (a noisy machine); recorded steps, early on,
  // take 20% longer than their neighbours. Global medians would call recording a saving.
  std::vector<step_result> steps;
  for (int i = 0; i < 100; ++i) {
    const double base = 100 + 2.0 * i;
    const bool recorded = i == 10 || i == 20 || i == 30;
    step_result st;
    st.step = i;
    st.wall_ms = recorded ? 1.2 * base : base;
    st.phases.push_back({phase_kind::forward, "forward", st.wall_ms / 2, 1, true});
    step_gpu_report g;
    g.step = i;
    g.kernels_measured = recorded;
    st.gpu = g;
    steps.push_back(st);
  }
  const auto s = summarize_run(steps, 0);
  CHECK(s.recording.recorded_step_ms < s.recording.untraced_step_ms);  // the two global medians
  REQUIRE(s.recording.cost);
  CHECK(s.recording.paired_steps == 3);
  // Ratios: step 10 144 / 114 (steps 5..9), step 20 168 / 134 (15..19), step 30 192 / 154 (25..29);
  // their median is step 20's.
  CHECK(*s.recording.cost == Approx(1.2 * 140 / 134 - 1));
}

TEST_CASE("residual share and the ratio to the fastest median, computed once for every sink", "[stats]") {
  run_summary s;
  CHECK(residual_share(s) == 0);  // no step time: no share, not a division by zero
  s.step_ms.count = 4;
  s.step_ms.mean = 8;
  s.step_ms.median = 6;
  s.residual_ms.mean = 2;
  CHECK(residual_share(s) == Approx(0.25));

  std::vector<run_result> runs(3);
  runs[0].summary = s;
  runs[1].summary = s;
  runs[1].summary.step_ms.median = 3;
  runs[2].summary.step_ms.median = 1;  // no measured steps: neither the fastest nor compared
  const double fastest = fastest_median_ms(runs);
  CHECK(fastest == 3);
  CHECK(median_over_fastest(runs[0].summary, fastest) == Approx(2));
  CHECK(median_over_fastest(runs[1].summary, fastest) == 1);
  CHECK(std::isnan(median_over_fastest(runs[2].summary, fastest)));
  CHECK(fastest_median_ms({}) == 0);
  CHECK(std::isnan(median_over_fastest(s, 0)));
}
