// The accumulation experiment's table and explanation (examples/qwen3/comparison.hpp), computed from
// hand-made runs that mix recorded and unrecorded steps, and whose gap decomposes into known parts.
#include <catch2/catch.hpp>

#include <tuple>

#include "comparison.hpp"
#include "mixed_run.hpp"

using namespace traceml;

namespace {
struct phase_spec {
  phase_kind kind;
  const char* name;
  double wall_ms, gpu_ms, busy_ms, kernels;  // per unrecorded step (busy, kernels: per recorded step)
  int micro;                                 // micro-batches it runs in (split evenly)
};

/// `steps` steps, warm-up 0. Every `record_every`-th step (from step 2) is recorded: its wall and GPU
/// windows are 30% longer (the recording's cost), the step after it 10% longer. Busy time and kernels
/// are the same whichever step is recorded, as on a real GPU.
run_result make_run(const std::string& name, const std::vector<phase_spec>& phases, double residual_ms,
                    int record_every, int steps = 40) {
  std::vector<step_result> out;
  for (int s = 0; s < steps; ++s) {
    const bool rec = s >= 2 && (s - 2) % record_every == 0;
    const bool after = s >= 3 && (s - 3) % record_every == 0;
    const double slow = rec ? 1.3 : after ? 1.1 : 1.0;
    step_result st;
    st.step = s;
    st.residual_ms = residual_ms;
    st.wall_ms = residual_ms;
    step_gpu_report g;
    g.step = s;
    g.kernels_measured = rec;
    for (const auto& p : phases) {
      st.wall_ms += p.wall_ms * slow;
      st.phases.push_back({p.kind, p.name, p.wall_ms * slow, p.micro, true});
      for (int m = 0; m < p.micro; ++m) {
        phase_gpu_facts f;
        f.kind = p.kind;
        f.name = p.name;
        f.microbatch = p.kind == phase_kind::optimizer ? -1 : m;
        f.facts.span_ns = static_cast<std::int64_t>(p.gpu_ms * slow * 1e6 / p.micro);
        if (rec) {
          f.facts.window_ns = f.facts.span_ns;
          f.facts.busy_ns = f.facts.kernel_ns = static_cast<std::int64_t>(p.busy_ms * 1e6 / p.micro);
          f.facts.idle_ns = f.facts.window_ns - f.facts.busy_ns;
          f.facts.kernel_count = static_cast<std::uint64_t>(p.kernels / p.micro);
          f.kernels = {{std::string(name == "1x4" ? "gemm_small_tile" : "gemm_big_tile") + "_" + p.name,
                        f.facts.kernel_count, f.facts.kernel_ns}};
        }
        g.phases.push_back(f);
      }
    }
    st.gpu = g;
    out.push_back(st);
  }
  run_result r;
  r.name = name;
  r.steps = out;
  r.summary = summarize_run(out, 0);
  return r;
}

std::vector<qwen3::schedule_row> two_rows(const run_result& slow, const run_result& fast) {
  std::vector<qwen3::schedule_row> rows = {qwen3::make_row(slow.name, {slow}, 14.6e12, 790e12),
                                           qwen3::make_row(fast.name, {fast}, 14.6e12, 790e12)};
  qwen3::rank_rows(rows);
  return rows;
}

const std::vector<phase_spec> slow_phases = {{phase_kind::forward, "forward", 30, 28, 10, 400, 4},
                                             {phase_kind::backward, "backward", 60, 58, 20, 800, 4},
                                             {phase_kind::optimizer, "optimizer", 2, 1.5, 1, 10, 1}};
const std::vector<phase_spec> fast_phases = {{phase_kind::forward, "forward", 12, 11, 8, 100, 1},
                                             {phase_kind::backward, "backward", 24, 23, 16, 200, 1},
                                             {phase_kind::optimizer, "optimizer", 2, 1.5, 1, 10, 1}};
}  // namespace

TEST_CASE("the gap splits into idle, busy, optimizer and the rest, from untraced steps", "[comparison]") {
  const auto rows = two_rows(make_run("1x4", slow_phases, 1, 10), make_run("4x1", fast_phases, 1, 10));
  // 40 steps, 4 recorded (2, 12, 22, 32), 4 after them: 32 untraced steps of 93 and 39 ms.
  CHECK(rows[0].median_ms == Approx(93));
  CHECK(rows[1].median_ms == Approx(39));
  CHECK(rows[0].ratio_to_fastest == Approx(93.0 / 39));
  CHECK(rows[0].recorded_steps == 4);
  CHECK(rows[0].measured_steps == 40);
  CHECK(rows[0].kernels_per_microbatch == Approx(300));  // (400 + 800) / 4
  CHECK(rows[0].kernels_per_step == Approx(1210));
  // Idle share of the forward+backward GPU windows of the recorded steps: windows 1.3 x (28 + 58).
  CHECK(rows[0].fb_idle_pct == Approx(100.0 * (1.3 * 86 - 30) / (1.3 * 86)));
  REQUIRE(rows[0].recording_cost);
  CHECK(*rows[0].recording_cost == Approx((1.3 * 92 + 1) / 93 - 1));  // the residual is not slowed
  REQUIRE(rows[1].mfu);
  CHECK(*rows[1].mfu == Approx(14.6e12 / 0.039 / 790e12));

  const auto g = qwen3::break_down_gap(rows);
  REQUIRE(g);
  CHECK(g->slow == "1x4");
  CHECK(g->fast == "4x1");
  CHECK(g->slow_steps == 32);
  CHECK(g->untraced);
  CHECK(g->gap_ms == Approx(54));                 // 93 - 39, untraced means
  CHECK(g->fb_window_ms == Approx(52));           // (28 + 58) - (11 + 23)
  CHECK(g->fb_busy_ms == Approx(6));              // (10 + 20) - (8 + 16)
  CHECK(g->fb_idle_ms == Approx(46));             // window - busy
  CHECK(g->optimizer_ms == Approx(0).margin(1e-9));
  CHECK(g->other_ms == Approx(2));                // wall beyond the GPU windows: (90 - 86) - (36 - 34)
  CHECK(g->fb_idle_ms + g->fb_busy_ms + g->optimizer_ms + g->other_ms == Approx(g->gap_ms));
  CHECK(g->kernel_ratio == Approx(1210.0 / 310));
  CHECK(g->slow_mean_kernel_us == Approx(30e3 / 1200));
  CHECK(g->fast_mean_kernel_us == Approx(24e3 / 300));
  // Kernel by kernel, per recorded step: the small-tile GEMMs of 1x4 against the big-tile ones of 4x1.
  REQUIRE(g->kernels.size() == 4);
  CHECK(g->kernels[0].name == "gemm_small_tile_backward");
  CHECK(g->kernels[0].slow_ms == Approx(20));
  CHECK(g->kernels[0].slow_count == Approx(800));

  const auto text = qwen3::explain(*g);
  CHECK(text.find("+54.0 ms per optimizer step (means over 32 and 32 steps without kernel records)") != std::string::npos);
  CHECK(text.find("GPU idle inside forward/backward: +46.0 ms (85%)") != std::string::npos);
  CHECK(text.find("GPU busy inside forward/backward: +6.0 ms (11%)") != std::string::npos);
  CHECK(text.find("3.9x as many kernels") != std::string::npos);
  CHECK(text.find("busy time from 4 and 4 recorded steps") != std::string::npos);

  const auto j = qwen3::comparison_json(rows, g);
  CHECK(j["gap"]["fb_idle_ms"].get<double>() == Approx(46));
  CHECK(j["schedules"][0]["kernels"]["steps"] == 4);
  CHECK(j["ratio"] == "median step / fastest median step");
  CHECK(j["explanation"] == text);
  const auto table = qwen3::format_rows(rows);
  CHECK(table.find("kernel figures: 1x4 4, 4x1 4 recorded steps (CUPTI), per recorded step") != std::string::npos);
  CHECK(table.find("+30%") != std::string::npos);
}

TEST_CASE("the split does not depend on how many steps were recorded", "[comparison]") {
  std::vector<std::tuple<double, double, double, double>> splits;
  for (int every : {20, 10, 4, 2}) {
    const auto g = qwen3::break_down_gap(two_rows(make_run("1x4", slow_phases, 1, every), make_run("4x1", fast_phases, 1, every)));
    REQUIRE(g);
    CHECK(g->fb_idle_ms + g->fb_busy_ms + g->optimizer_ms + g->other_ms == Approx(g->gap_ms));
    splits.emplace_back(g->fb_idle_ms, g->fb_busy_ms, g->optimizer_ms, g->other_ms);
  }
  for (const auto& s : splits) {
    CHECK(std::get<0>(s) == Approx(46));
    CHECK(std::get<1>(s) == Approx(6));
    CHECK(std::get<2>(s) == Approx(0).margin(1e-9));
    CHECK(std::get<3>(s) == Approx(2));
  }
}

TEST_CASE("the hand-made mixed run: the explanation's parts come from one set each and add up", "[comparison]") {
  traceml_test::mixed_run_shape slow_shape;
  slow_shape.name = "1x4";
  slow_shape.fb_scale = 2;
  slow_shape.busy_scale = 1.5;
  slow_shape.launch_scale = 4;
  const auto rows = two_rows(traceml_test::mixed_run(slow_shape), traceml_test::mixed_run());
  CHECK(rows[0].median_ms == Approx(44));
  CHECK(rows[1].median_ms == Approx(24));
  CHECK(rows[1].fb_idle_pct == Approx(100.0 * 10 / 28));  // recorded step: windows 11 + 17, busy 6 + 12
  CHECK(rows[0].fb_idle_pct == Approx(100.0 * 29 / 56));
  CHECK(rows[1].kernels_per_step == Approx(510));
  CHECK(rows[1].fb_kernels_per_step == Approx(500));
  CHECK(rows[1].gpu_steps == 10);
  REQUIRE(rows[1].recording_cost);
  CHECK(*rows[1].recording_cost == Approx(35.0 / 24 - 1));
  CHECK(*rows[0].recording_cost == Approx(65.0 / 44 - 1));
  const auto g = qwen3::break_down_gap(rows);
  REQUIRE(g);
  CHECK(g->slow_steps == 8);                 // steps 2..11 without 5 (recorded) and 6 (after it)
  CHECK(g->gap_ms == Approx(20));            // 45 - 25
  CHECK(g->fb_window_ms == Approx(18));      // (14 + 22) - (7 + 11)
  CHECK(g->fb_busy_ms == Approx(9));         // (9 + 18) - (6 + 12)
  CHECK(g->fb_idle_ms == Approx(9));
  CHECK(g->optimizer_ms == Approx(0).margin(1e-9));
  CHECK(g->other_ms == Approx(2));
  CHECK(g->slow_mean_kernel_us == Approx(31.6));
  CHECK(g->fast_mean_kernel_us == Approx(31.6));
  for (double part : {g->fb_idle_ms, g->fb_busy_ms, g->other_ms}) CHECK(part / g->gap_ms <= 1.0);
}

TEST_CASE("a schedule that ran out of memory is a result, not a crash", "[comparison]") {
  const auto ok = make_run("4x1", {{phase_kind::forward, "forward", 12, 11, 8, 100, 1}}, 1, 10);
  std::vector<qwen3::schedule_row> rows = {qwen3::make_row("1x4", {}, 0, 0), qwen3::make_row("4x1", {ok}, 0, 0)};
  rows[0].failed = true;
  rows[0].error = "OOM: CUDA out of memory";
  qwen3::rank_rows(rows);
  CHECK(rows[0].ratio_to_fastest == 0);
  CHECK(rows[1].ratio_to_fastest == Approx(1));
  const auto table = qwen3::format_rows(rows);
  CHECK(table.find("OOM") != std::string::npos);
  CHECK_FALSE(qwen3::break_down_gap(rows));  // one schedule left: nothing to explain
}

TEST_CASE("without GPU facts the explanation says idle and busy cannot be told apart", "[comparison]") {
  run_result a, b;
  for (auto* r : {&a, &b}) {
    std::vector<step_result> steps(3);
    for (int s = 0; s < 3; ++s) {
      steps[s].step = s;
      const double fwd = r == &a ? 20 : 10;
      steps[s].wall_ms = fwd + 1;
      steps[s].residual_ms = 1;
      steps[s].phases.push_back({phase_kind::forward, "forward", fwd, 1, true});
    }
    r->steps = steps;
    r->summary = summarize_run(steps, 0);
  }
  std::vector<qwen3::schedule_row> rows = {qwen3::make_row("1x4", {a}, 0, 0), qwen3::make_row("4x1", {b}, 0, 0)};
  const auto g = qwen3::break_down_gap(rows);
  REQUIRE(g);
  CHECK_FALSE(g->gpu);
  CHECK_FALSE(g->gpu_windows);
  CHECK(g->fb_window_ms == Approx(10));
  CHECK(g->other_ms == Approx(0).margin(1e-9));
  const auto text = qwen3::explain(*g);
  CHECK(text.find("forward/backward wall time: +10.0 ms") != std::string::npos);
  CHECK(text.find("cannot be told apart") != std::string::npos);
}

TEST_CASE("with CUDA graphs the split uses the GPU-side windows and still adds up", "[comparison]") {
  // The CPU leaves forward/backward after 2-3 ms (a graph replay); the GPU works on for tens of ms,
  // which the step-end synchronization puts outside any phase. Events see the GPU windows.
  const auto slow = make_run("1x4", {{phase_kind::forward, "forward", 2, 32, 29, 1000, 1},
                                     {phase_kind::backward, "backward", 3, 46, 41, 1000, 1}}, 71, 10);
  const auto fast = make_run("4x1", {{phase_kind::forward, "forward", 2, 22, 21, 1000, 1},
                                     {phase_kind::backward, "backward", 3, 28, 26, 1000, 1}}, 45, 10);
  const auto rows = two_rows(slow, fast);
  CHECK(rows[0].fb_idle_pct == Approx(100.0 * (1.3 * 78 - 70) / (1.3 * 78)));
  const auto g = qwen3::break_down_gap(rows);
  REQUIRE(g);
  CHECK(g->gpu_windows);
  CHECK(g->gap_ms == Approx(26));
  CHECK(g->fb_busy_ms == Approx(23));
  CHECK(g->fb_idle_ms == Approx(5));   // (78 - 70) - (50 - 47)
  CHECK(g->other_ms == Approx(-2));    // the CPU's wall outside the windows: (76 - 78) - (50 - 50)
  CHECK(g->fb_idle_ms + g->fb_busy_ms + g->optimizer_ms + g->other_ms == Approx(g->gap_ms));
}
