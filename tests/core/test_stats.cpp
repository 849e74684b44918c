// Statistics against hand-computed values.
#include <catch2/catch.hpp>

#include "test_helpers.hpp"

using namespace traceml;

namespace {
span_record rec(phase_kind kind, const char* name, double b_ms, double e_ms, int step, int micro = -1,
                int nesting = 0, unsigned thread = 0) {
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
  CHECK(union_length({{0, 10}, {5, 15}, {20, 30}}, 2, 25) == 18);
  CHECK(union_length({{20, 30}, {0, 10}}, 0, 100) == 20);
  CHECK(union_length({{0, 10}, {2, 3}}, 0, 100) == 10);
  CHECK(union_length({}, 0, 100) == 0);
  CHECK(union_length({{50, 60}}, 0, 40) == 0);
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
      rec(phase_kind::forward, "forward", 200, 250, 4, 0),                           // another step
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
    g.total.busy_ns = 3'000'000;
    g.peak_allocated_bytes = 1000 * (i + 1);
    phase_gpu_facts f;
    f.kind = phase_kind::forward;
    f.name = "forward";
    f.microbatch = 0;
    f.facts.kernel_ns = 2'000'000;
    f.facts.kernel_count = 6;
    f.facts.idle_ns = 1'000'000;
    f.top_kernels = {{"gemm", 2, 1'500'000}, {"relu", 4, 500'000}};
    g.phases = {f, f};  // two micro-batches
    g.phases[1].microbatch = 1;
    st.gpu = g;
    steps.push_back(st);
  }
  const auto s = summarize_run(steps, 1, /*tokens_per_step=*/2048, /*samples_per_step=*/4);
  CHECK(s.steps == 4);
  CHECK(s.warmup_steps == 1);
  CHECK(s.step_ms.count == 3);
  CHECK(s.step_ms.mean == Approx(20));
  CHECK(s.tokens_per_s == Approx(2048 / 0.020));
  CHECK(s.samples_per_s == Approx(4 / 0.020));
  REQUIRE(s.phases.size() == 2);
  CHECK(s.phases[0].wall_ms.mean == Approx(10));
  CHECK(s.phases[0].share == Approx(0.5));
  CHECK(s.phases[1].name == "eval");
  CHECK(s.phases[1].wall_ms.mean == Approx(4.0 / 3));  // 0, 0, 4
  REQUIRE(s.phases[0].kernel_ms);
  CHECK(s.phases[0].kernel_ms->mean == Approx(4));  // two micro-batches of 2 ms
  CHECK(s.phases[0].idle_ms->mean == Approx(2));
  CHECK(s.phases[0].kernels_per_step == Approx(12));
  CHECK(s.phases[0].kernels_per_microbatch == Approx(6));
  REQUIRE(s.phases[0].top_kernels.size() == 2);
  CHECK(s.phases[0].top_kernels[0].name == "gemm");
  CHECK(s.phases[0].top_kernels[0].count == 2 * 2 * 3);
  CHECK(s.phases[0].top_kernels[0].total_ns == 1'500'000LL * 2 * 3);
  REQUIRE(s.step_kernel_ms);
  CHECK(s.step_kernel_ms->mean == Approx((8 + 12 + 16) / 3.0));
  CHECK(s.peak_allocated_bytes == 4000);
}

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

TEST_CASE("summarize_run: kernel columns average the recorded steps only", "[stats]") {
  // One step in four recorded by CUPTI (the overhead budget): per step 2 micro-batches x 100
  // kernels of forward; unrecorded steps carry phase entries without kernel facts.
  std::vector<step_result> steps;
  for (int i = 0; i < 8; ++i) {
    gpu_facts forward, total;
    const bool recorded = i % 4 == 1;
    if (recorded) {
      forward.kernel_count = 100;
      forward.kernel_ns = 3'000'000;
      forward.span_ns = 4'000'000;
      total.kernel_ns = 6'000'000;
      total.span_ns = 9'000'000;
    }
    steps.push_back(two_microbatch_step(i, recorded, forward, total));
  }
  const auto s = summarize_run(steps, 0);
  REQUIRE(s.phases[0].kernel_ms);
  CHECK(s.phases[0].kernel_ms->count == 2);                 // steps 1 and 5
  CHECK(s.phases[0].kernel_ms->mean == Approx(6));          // 2 x 3 ms
  CHECK(s.phases[0].kernels_per_step == Approx(200));
  CHECK(s.phases[0].kernels_per_microbatch == Approx(100));  // not diluted by unrecorded steps
  REQUIRE(s.step_kernel_ms);
  CHECK(s.step_kernel_ms->count == 2);
  REQUIRE(s.step_gpu_span_ms);
  CHECK(s.step_gpu_span_ms->count == 2);                    // unrecorded steps have no span
  CHECK(s.phases[0].gpu_span_ms->mean == Approx(8));
}

TEST_CASE("summarize_run: CUDA-event reports give GPU spans, never kernel zeros", "[stats]") {
  std::vector<step_result> steps;
  for (int i = 0; i < 3; ++i) {
    gpu_facts forward, total;
    forward.span_ns = 2'000'000 + 1'000'000 * i;
    total.span_ns = 9'000'000;
    steps.push_back(two_microbatch_step(i, /*kernels_measured=*/false, forward, total));  // events: spans only
  }
  const auto s = summarize_run(steps, 0);
  CHECK_FALSE(s.step_kernel_ms);
  CHECK_FALSE(s.phases[0].kernel_ms);
  REQUIRE(s.step_gpu_span_ms);
  CHECK(s.step_gpu_span_ms->mean == Approx(9));
  REQUIRE(s.phases[0].gpu_span_ms);
  CHECK(s.phases[0].gpu_span_ms->mean == Approx((4 + 6 + 8) / 3.0));  // two micro-batches per step
}
