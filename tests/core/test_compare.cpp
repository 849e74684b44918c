// The comparison engine (compare.hpp) and its table and JSON (sinks/comparison_*.hpp), on hand-made
// runs: recorded and unrecorded steps whose gap decomposes into known parts, mixed_run.hpp's run,
// runs without GPU data, with different and user phases, without measured steps, and runs whose
// difference is inside their noise.
#include <catch2/catch.hpp>

#include <traceml/analysis/compare.hpp>
#include <traceml/sinks/comparison_json.hpp>
#include <traceml/sinks/comparison_table.hpp>

#include <tuple>

#include "mixed_run.hpp"
#include "test_helpers.hpp"

using namespace traceml;

namespace {
using traceml_test::contains;

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

/// A CPU-only run: one forward phase per step of the given wall times, plus 1 ms outside phases.
run_result cpu_run(const std::string& name, const std::vector<double>& forward_ms,
                   const std::vector<std::pair<std::string, double>>& user_phases = {}) {
  std::vector<step_result> steps;
  for (std::size_t s = 0; s < forward_ms.size(); ++s) {
    step_result st;
    st.step = static_cast<std::int32_t>(s);
    st.residual_ms = 1;
    st.wall_ms = 1 + forward_ms[s];
    st.phases.push_back({phase_kind::forward, "forward", forward_ms[s], 1, true});
    for (const auto& [phase, ms] : user_phases) {
      st.phases.push_back({phase_kind::user, phase, ms, 1, true});
      st.wall_ms += ms;
    }
    steps.push_back(st);
  }
  run_result r;
  r.name = name;
  r.steps = steps;
  r.summary = summarize_run(steps, 0);
  return r;
}

/// `first`, first + 1, ..., 10 values.
std::vector<double> ramp(double first) {
  std::vector<double> v;
  for (int i = 0; i < 10; ++i) v.push_back(first + i);
  return v;
}

/// The mixed run as a slower schedule: forward/backward twice as long, 1.5x the busy time, 4x the launches.
traceml_test::mixed_run_shape slow_mixed_shape() {
  traceml_test::mixed_run_shape shape;
  shape.name = "1x4";
  shape.fb_scale = 2;
  shape.busy_scale = 1.5;
  shape.launch_scale = 4;
  return shape;
}

comparison compare_two(const run_result& a, const run_result& b) {
  return compare_runs({make_compared_run(a.name, {a}), make_compared_run(b.name, {b})});
}

const std::vector<phase_spec> slow_phases = {{phase_kind::forward, "forward", 30, 28, 10, 400, 4},
                                             {phase_kind::backward, "backward", 60, 58, 20, 800, 4},
                                             {phase_kind::optimizer, "optimizer", 2, 1.5, 1, 10, 1}};
const std::vector<phase_spec> fast_phases = {{phase_kind::forward, "forward", 12, 11, 8, 100, 1},
                                             {phase_kind::backward, "backward", 24, 23, 16, 200, 1},
                                             {phase_kind::optimizer, "optimizer", 2, 1.5, 1, 10, 1}};
}  // namespace

TEST_CASE("the gap splits into idle, busy, optimizer and the rest, from untraced steps", "[compare]") {
  const auto c = compare_two(make_run("1x4", slow_phases, 1, 10), make_run("4x1", fast_phases, 1, 10));
  const auto& slow = c.runs[0];
  const auto& fast = c.runs[1];
  // 40 steps, 4 recorded (2, 12, 22, 32), 4 after them: 32 untraced steps of 93 and 39 ms.
  CHECK(slow.median_ms == Approx(93));
  CHECK(fast.median_ms == Approx(39));
  CHECK(slow.ratio_to_fastest == Approx(93.0 / 39));
  CHECK(fast.ratio_to_fastest == Approx(1));
  CHECK(slow.recorded_steps == 4);
  CHECK(slow.measured_steps == 40);
  CHECK(slow.kernels_per_microbatch == Approx(300));  // (400 + 800) / 4
  CHECK(slow.kernels_per_step == Approx(1210));
  // Idle share of the forward+backward GPU windows of the recorded steps: windows 1.3 x (28 + 58).
  CHECK(slow.fb_idle_pct == Approx(100.0 * (1.3 * 86 - 30) / (1.3 * 86)));
  REQUIRE(slow.recording_cost);
  CHECK(*slow.recording_cost == Approx((1.3 * 92 + 1) / 93 - 1));  // the residual is not slowed
  // p10..p90 of 32 x 93, 4 x 102.2 (after a recorded step), 4 x 120.6 (recorded).
  CHECK(slow.spread_lo_ms == Approx(93));
  CHECK(slow.spread_hi_ms == Approx(102.2 + 0.1 * 18.4));

  REQUIRE(c.gap);
  const auto& g = *c.gap;
  CHECK(g.slow == "1x4");
  CHECK(g.fast == "4x1");
  CHECK(g.slow_steps == 32);
  CHECK(g.untraced);
  CHECK_FALSE(g.noise.within);
  CHECK(g.gap_ms == Approx(54));        // 93 - 39, untraced means
  CHECK(g.fb_window_ms == Approx(52));  // (28 + 58) - (11 + 23)
  CHECK(g.fb_busy_ms == Approx(6));     // (10 + 20) - (8 + 16)
  CHECK(g.fb_idle_ms == Approx(46));    // window - busy
  CHECK(g.optimizer_ms == Approx(0).margin(1e-9));
  CHECK(g.other_ms == Approx(2));  // wall beyond the GPU windows: (90 - 86) - (36 - 34)
  CHECK(g.fb_idle_ms + g.fb_busy_ms + g.optimizer_ms + g.other_ms == Approx(g.gap_ms));
  CHECK(g.kernel_ratio == Approx(1210.0 / 310));
  CHECK(g.slow_mean_kernel_us == Approx(30e3 / 1200));
  CHECK(g.fast_mean_kernel_us == Approx(24e3 / 300));
  // Kernel by kernel, per recorded step: the small-tile GEMMs of 1x4 against the big-tile ones of 4x1.
  REQUIRE(g.kernels.size() == 4);
  CHECK(g.kernels[0].name == "gemm_small_tile_backward");
  CHECK(g.kernels[0].slow_ms == Approx(20));
  CHECK(g.kernels[0].slow_count == Approx(800));
  CHECK(g.kernels_complete);

  const auto& text = c.explanation;
  CHECK(contains(text,
                 "Why 1x4 is slower than 4x1: +54.0 ms per step (means over 32 and 32 steps without kernel records)"));
  CHECK(contains(text, "GPU idle inside forward/backward: +46.0 ms (85%)"));
  CHECK(contains(text, "GPU busy inside forward/backward: +6.0 ms (11%)"));
  CHECK(contains(text, "3.9x as many kernels"));
  CHECK(contains(text, "busy time from kernel records of 4 and 4 recorded steps"));
  CHECK(contains(text, "from 4 and 4 recorded steps)."));            // the launch figures' own sample set
  CHECK(g.busy_from == gap_breakdown::busy_source::kernel_records);  // these runs have no hardware counters
  CHECK(contains(text, "   20.00 ms (800x) vs     0.00 ms (0x)  gemm_small_tile_backward"));

  const auto table = format_comparison_table(c.runs, {{"MFU %", {"1.0", "2.0"}}});
  CHECK(contains(table, "kernel figures: 1x4 4, 4x1 4 recorded steps (CUPTI), per recorded step"));
  CHECK(contains(table, "+29.7%"));  // (1.3 x 92 + 1) / 93 - 1
  CHECK(contains(table, "MFU %"));
  CHECK(contains(table, "2.38x"));  // 93 / 39
}

TEST_CASE("the split does not depend on how many steps were recorded", "[compare]") {
  std::vector<std::tuple<double, double, double, double>> splits;
  for (int every : {20, 10, 4, 2}) {
    const auto c = compare_two(make_run("1x4", slow_phases, 1, every), make_run("4x1", fast_phases, 1, every));
    REQUIRE(c.gap);
    const auto& g = *c.gap;
    CHECK(g.fb_idle_ms + g.fb_busy_ms + g.optimizer_ms + g.other_ms == Approx(g.gap_ms));
    splits.emplace_back(g.fb_idle_ms, g.fb_busy_ms, g.optimizer_ms, g.other_ms);
  }
  for (const auto& s : splits) {
    CHECK(std::get<0>(s) == Approx(46));
    CHECK(std::get<1>(s) == Approx(6));
    CHECK(std::get<2>(s) == Approx(0).margin(1e-9));
    CHECK(std::get<3>(s) == Approx(2));
  }
}

TEST_CASE("the hand-made mixed run: the explanation's parts come from one set each and add up", "[compare]") {
  const auto slow_shape = slow_mixed_shape();
  const auto c = compare_two(traceml_test::mixed_run(slow_shape), traceml_test::mixed_run());
  const auto& slow = c.runs[0];
  const auto& fast = c.runs[1];
  CHECK(slow.median_ms == Approx(44));
  CHECK(fast.median_ms == Approx(24));
  CHECK(fast.fb_idle_pct == Approx(100.0 * 10 / 28));  // recorded step: windows 11 + 17, busy 6 + 12
  CHECK(slow.fb_idle_pct == Approx(100.0 * 29 / 56));
  CHECK(fast.kernels_per_step == Approx(510));
  CHECK(fast.fb_kernels_per_step == Approx(500));
  CHECK(fast.gpu_steps == 10);
  REQUIRE(fast.recording_cost);
  CHECK(*fast.recording_cost == Approx(35.0 / 24 - 1));
  CHECK(*slow.recording_cost == Approx(65.0 / 44 - 1));
  // eval (a user phase on steps 3 and 9) is a column of its own: mean 0.8 over the 10 measured steps.
  REQUIRE(fast.find("eval"));
  CHECK(fast.find("eval")->wall_ms == Approx(0.8));
  // Forward+backward kernels of the recorded step, merged over both phases and both micro-batches:
  // gemm 2 x (60 x 30 + 100 x 50) us = 13.6 ms, elementwise 2 x (40 x 15 + 50 x 10) us = 2.2 ms.
  REQUIRE(fast.fb_kernels.size() == 2);
  CHECK(fast.fb_kernels[0].name == "gemm");
  CHECK(fast.fb_kernels[0].ms_per_step == Approx(13.6));
  CHECK(fast.fb_kernels[0].launches_per_step == Approx(320));
  CHECK(fast.fb_kernels[1].ms_per_step == Approx(2.2));
  REQUIRE(c.gap);
  const auto& g = *c.gap;
  CHECK(g.slow_steps == 8);             // steps 2..11 without 5 (recorded) and 6 (after it)
  CHECK(g.gap_ms == Approx(20));        // 45 - 25
  CHECK(g.fb_window_ms == Approx(18));  // (14 + 22) - (7 + 11)
  // Busy from the hardware counters of the same 8 baseline steps: forward 0.5, backward 0.8 of the
  // windows, (0.5 x 14 + 0.8 x 22) - (0.5 x 7 + 0.8 x 11) = 24.6 - 12.3.
  CHECK(g.busy_from == gap_breakdown::busy_source::hardware_counters);
  CHECK(g.fb_busy_ms == Approx(12.3));
  CHECK(g.fb_idle_ms == Approx(5.7));
  // Over the 9 sampled steps: forward busy 34.6 of 67 ms, backward 8 x 8.8 + 11.9 = 82.3 of 105 ms;
  // SMs 0.25 x 67 + 0.6 x 105. The slow run's windows are twice as long at the same shares.
  CHECK(fast.sampled_steps == 9);
  CHECK(fast.fb_counter_busy_pct == Approx(100.0 * 116.9 / 172));
  CHECK(fast.fb_sm_active_pct == Approx(100.0 * 79.75 / 172));
  CHECK(slow.fb_counter_busy_pct == Approx(100.0 * 116.9 / 172));
  CHECK(g.slow_sm_active_pct == Approx(100.0 * 79.75 / 172));
  CHECK(g.fast_sm_active_pct == Approx(100.0 * 79.75 / 172));
  CHECK(contains(c.explanation, "busy time from hardware counters on the same 8 and 8 steps; SMs active 46% vs 46%"));
  const auto table = format_comparison_table(c.runs);
  CHECK(contains(table, "hardware counters: 1x4 9, mixed 9 sampled steps"));
  // The counters' rows have the longest labels; every row's values still end in the same columns.
  std::size_t value_end = std::string::npos;
  for (const char* label : {"median step ms", "GPU busy % in fwd+bwd (hardware counters)",
                            "SM active % in fwd+bwd (hardware counters)", "median step / fastest median"}) {
    const auto at = table.find(std::string(label) + " ");
    REQUIRE(at != std::string::npos);
    const auto end = table.find('\n', at) - at;
    if (value_end == std::string::npos) value_end = end;
    CHECK(end == value_end);
  }
  CHECK(g.optimizer_ms == Approx(0).margin(1e-9));
  CHECK(g.other_ms == Approx(2));
  CHECK(g.slow_mean_kernel_us == Approx(31.6));
  CHECK(g.fast_mean_kernel_us == Approx(31.6));
  CHECK(g.kernels[0].name == "gemm");
  CHECK(g.kernels[0].slow_ms == Approx(4 * 13.6));  // 4 x the launches at the same duration
  for (double part : {g.fb_idle_ms, g.fb_busy_ms, g.other_ms}) CHECK(part / g.gap_ms <= 1.0);
}

TEST_CASE("a baseline step without samples: busy share of the sampled ones, said, no counters: kernel records",
          "[compare]") {
  const auto slow_shape = slow_mixed_shape();
  auto slow = traceml_test::mixed_run(slow_shape);
  // One baseline step of the slow run without samples: the share rests on the other 7.
  slow.steps[8].gpu->total.counters = {};
  for (auto& p : slow.steps[8].gpu->phases) p.facts.counters = {};
  slow.summary = summarize_run(slow.steps, 2);
  auto c = compare_two(slow, traceml_test::mixed_run());
  REQUIRE(c.gap);
  CHECK(c.gap->busy_from == gap_breakdown::busy_source::hardware_counters);
  CHECK(c.gap->slow_counter_steps == 7);
  CHECK(c.gap->fast_counter_steps == 8);
  CHECK(c.gap->fb_busy_ms == Approx(12.3));  // the same shares of the same windows
  CHECK(contains(c.explanation,
                 "busy share from hardware counters on 7 of the 8 and 8 of the 8 steps, of their GPU windows"));

  // Without counters in one run: busy from the recorded steps' kernel records.
  for (auto& st : slow.steps) {
    st.gpu->total.counters = {};
    for (auto& p : st.gpu->phases) p.facts.counters = {};
  }
  slow.summary = summarize_run(slow.steps, 2);
  c = compare_two(slow, traceml_test::mixed_run());
  REQUIRE(c.gap);
  const auto& g = *c.gap;
  CHECK(g.busy_from == gap_breakdown::busy_source::kernel_records);
  CHECK(g.fb_busy_ms == Approx(9));  // (9 + 18) - (6 + 12), the recorded steps' kernel busy
  CHECK(g.fb_idle_ms == Approx(9));
  CHECK(contains(c.explanation, "busy time from kernel records of 1 and 1 recorded steps"));
}

TEST_CASE("with CUDA graphs the split uses the GPU-side windows and still adds up", "[compare]") {
  // The CPU leaves forward/backward after 2-3 ms (a graph replay); the GPU works on for tens of ms,
  // which the step-end synchronization puts outside any phase. Events see the GPU windows.
  const auto slow = make_run(
      "1x4",
      {{phase_kind::forward, "forward", 2, 32, 29, 1000, 1}, {phase_kind::backward, "backward", 3, 46, 41, 1000, 1}},
      71, 10);
  const auto fast = make_run(
      "4x1",
      {{phase_kind::forward, "forward", 2, 22, 21, 1000, 1}, {phase_kind::backward, "backward", 3, 28, 26, 1000, 1}},
      45, 10);
  const auto c = compare_two(slow, fast);
  CHECK(c.runs[0].fb_idle_pct == Approx(100.0 * (1.3 * 78 - 70) / (1.3 * 78)));
  REQUIRE(c.gap);
  const auto& g = *c.gap;
  CHECK(g.gpu_windows);
  CHECK(g.gap_ms == Approx(26));
  CHECK(g.fb_busy_ms == Approx(23));
  CHECK(g.fb_idle_ms == Approx(5));  // (78 - 70) - (50 - 47)
  CHECK(g.other_ms == Approx(-2));   // the CPU's wall outside the windows: (76 - 78) - (50 - 50)
  CHECK(g.fb_idle_ms + g.fb_busy_ms + g.optimizer_ms + g.other_ms == Approx(g.gap_ms));
  CHECK(contains(c.explanation, "optimizer (fixed per-step cost, GPU window): +0.0 ms (0%)"));
}

TEST_CASE("forward+backward kernels are merged before they are truncated", "[compare]") {
  // One recorded step. forward: f0..f9 at 100 us and "shared" at 60 us; backward: b0..b9 at 100 us
  // and "shared" at 60 us. Each phase's top 10 leaves "shared" out; merged, it leads with 120 us.
  step_result st;
  st.step = 0;
  st.wall_ms = 10;
  st.residual_ms = 4;
  st.phases = {{phase_kind::forward, "forward", 3, 1, true}, {phase_kind::backward, "backward", 3, 1, true}};
  step_gpu_report g;
  g.kernels_measured = true;
  for (const auto& [kind, name, prefix] :
       {std::tuple{phase_kind::forward, "forward", "f"}, std::tuple{phase_kind::backward, "backward", "b"}}) {
    phase_gpu_facts f;
    f.kind = kind;
    f.name = name;
    f.facts.window_ns = f.facts.span_ns = 3'000'000;
    for (int i = 0; i < 10; ++i) f.kernels.push_back({std::string(prefix) + std::to_string(i), 1, 100'000});
    f.kernels.push_back({"shared", 1, 60'000});
    f.facts.kernel_count = 11;
    f.facts.busy_ns = f.facts.kernel_ns = 1'060'000;
    f.facts.idle_ns = f.facts.window_ns - f.facts.busy_ns;
    g.phases.push_back(f);
  }
  st.gpu = g;
  run_result r;
  r.name = "r";
  r.steps = {st};
  r.summary = summarize_run(r.steps, 0);
  REQUIRE(r.summary.phases[0].kernels->top_kernels.size() == 10);  // "shared" is 11th in each

  SECTION("from the kept steps: every kernel of every phase") {
    const auto c = make_compared_run("r", {r});
    CHECK(c.fb_kernels_complete);
    REQUIRE(c.fb_kernels.size() == 21);
    CHECK(c.fb_kernels[0].name == "shared");
    CHECK(c.fb_kernels[0].ms_per_step == Approx(0.12));
    CHECK(c.fb_kernels[0].launches == 2);
    CHECK(c.fb_kernels[0].mean_us == Approx(60));
  }
  SECTION("without the steps: the phases' top lists, said to be incomplete") {
    r.steps.clear();
    const auto c = make_compared_run("r", {r});
    CHECK_FALSE(c.fb_kernels_complete);
    REQUIRE(c.fb_kernels.size() == 20);
    CHECK(c.fb_kernels[0].ms_per_step == Approx(0.1));
    auto other = r;
    other.name = "other";
    const auto cmp = compare_runs({c, make_compared_run("other", {other})});
    CHECK(cmp.gap);
  }
}

TEST_CASE("without GPU facts the explanation says idle and busy cannot be told apart", "[compare]") {
  const auto c = compare_two(cpu_run("1x4", std::vector<double>(3, 20)), cpu_run("4x1", std::vector<double>(3, 10)));
  REQUIRE(c.gap);
  CHECK_FALSE(c.gap->gpu);
  CHECK_FALSE(c.gap->gpu_windows);
  CHECK(c.gap->fb_window_ms == Approx(10));
  CHECK(c.gap->other_ms == Approx(0).margin(1e-9));
  CHECK(contains(c.explanation, "forward/backward wall time: +10.0 ms (100%)"));
  CHECK(contains(c.explanation, "cannot be told apart"));
  const auto table = format_comparison_table(c.runs);
  CHECK_FALSE(contains(table, "GPU"));
  CHECK_FALSE(contains(table, "kernel"));
}

TEST_CASE("wide cells widen the table's columns: no two cells run together", "[compare]") {
  // Spreads of four-digit step times ("2019.4..7003.4", 14 characters) filled the 14-column cells.
  const auto c =
      compare_two(cpu_run("2x2", {2019.4, 5064.5, 7003.4, 7003.4}), cpu_run("4x1", {1654.2, 2168.0, 2801.3, 2801.3}));
  const auto table = format_comparison_table(c.runs);
  std::string spread_line;
  for (std::size_t at = 0, end; at < table.size(); at = end + 1) {
    end = table.find('\n', at);
    if (end == std::string::npos) end = table.size();
    const auto line = table.substr(at, end - at);
    if (contains(line, "spread p10..p90")) spread_line = line;
  }
  REQUIRE_FALSE(spread_line.empty());
  // Each spread cell stands apart, separated by at least two spaces from the one before.
  const auto first = spread_line.find("..", spread_line.find("ms") + 2);
  REQUIRE(first != std::string::npos);
  const auto second_cell = spread_line.find("..", first + 2);
  REQUIRE(second_cell != std::string::npos);
  const auto gap = spread_line.substr(first, second_cell - first);
  CHECK(contains(gap, "  "));
}

TEST_CASE("runs with different and user-defined phases: the rest holds what only one of them has", "[compare]") {
  // a: forward 10 + eval 5 + 1 outside; b: forward 10 + augment 2 + 1 outside. No optimizer in either.
  const auto c = compare_two(cpu_run("a", std::vector<double>(4, 10), {{"eval", 5}}),
                             cpu_run("b", std::vector<double>(4, 10), {{"augment", 2}}));
  REQUIRE(c.gap);
  CHECK(c.gap->gap_ms == Approx(3));
  CHECK(c.gap->fb_window_ms == Approx(0).margin(1e-9));
  CHECK(c.gap->optimizer_ms == Approx(0).margin(1e-9));
  CHECK(c.gap->other_ms == Approx(3));
  CHECK(contains(c.explanation, "everything else (data loading, other phases"));
  CHECK(contains(c.explanation, "+3.0 ms (100%)"));
  const auto table = format_comparison_table(c.runs);
  CHECK(contains(table, "wall ms: eval"));
  CHECK(contains(table, "wall ms: augment"));

  SECTION("runs without forward or backward say that part is in the rest") {
    run_result u = cpu_run("u", {}), v = cpu_run("v", {});
    for (auto* r : {&u, &v}) {
      std::vector<step_result> steps(4);
      for (int s = 0; s < 4; ++s) {
        steps[s].step = s;
        const double ms = r == &u ? 8 : 6;
        steps[s].wall_ms = ms;
        steps[s].phases.push_back({phase_kind::user, "train_step", ms, 1, true});
      }
      r->steps = steps;
      r->summary = summarize_run(steps, 0);
    }
    const auto uv = compare_two(u, v);
    REQUIRE(uv.gap);
    CHECK_FALSE(uv.gap->forward_backward);
    CHECK(uv.gap->other_ms == Approx(2));
    CHECK(contains(uv.explanation, "no forward or backward phase in both runs"));
  }
}

TEST_CASE("a run without measured steps is named, not compared", "[compare]") {
  run_result empty;
  empty.name = "empty";
  empty.summary = summarize_run({}, 0);
  const auto one = cpu_run("one", ramp(9));
  SECTION("two runs, one empty: nothing to explain") {
    const auto c = compare_two(empty, one);
    CHECK_FALSE(c.gap);
    CHECK(c.explanation == "Nothing to explain: fewer than two runs with measured steps (empty has no steps).\n");
    CHECK(c.runs[0].ratio_to_fastest == 0);
    CHECK(c.runs[1].ratio_to_fastest == Approx(1));
    CHECK(contains(format_comparison_table(c.runs), "no steps"));
  }
  SECTION("three runs, one empty: the other two are explained, the empty one is named") {
    const auto c = compare_runs({make_compared_run("one", {one}), make_compared_run("empty", {empty}),
                                 make_compared_run("two", {cpu_run("two", ramp(30))})});
    REQUIRE(c.gap);
    CHECK(c.gap->slow == "two");
    CHECK(c.gap->fast == "one");
    CHECK(c.gap->gap_ms == Approx(21));
    CHECK(contains(c.explanation, "Not compared: empty has no steps."));
  }
  SECTION("a column with no run at all") {
    const auto c = compare_runs({make_compared_run("none", {}), make_compared_run("one", {one})});
    CHECK(contains(c.explanation, "none has no steps"));
  }
}

TEST_CASE("a difference within the runs' noise is said to be noise first, then split", "[compare][noise]") {
  // a: steps 10..19 ms (median 14.5, p10 10.9, p90 18.1), in that order: its step time drifts
  // (second half 15..19, mean 17, over the first's 12: 1.42x), so a is unstable too.
  const auto a = cpu_run("a", ramp(9));
  SECTION("p10..p90 overlap: said first, then the split") {
    // b: 10.5..19.5 ms (median 15.0, p10 11.4, p90 18.6).
    const auto c = compare_two(a, cpu_run("b", ramp(9.5)));
    REQUIRE(c.gap);
    CHECK(c.gap->noise.within);
    CHECK_FALSE(c.gap->noise.repeats);
    CHECK(c.gap->noise.median_gap_ms == Approx(0.5));
    CHECK(c.gap->noise.median_gap_pct == Approx(100 * 0.5 / 14.5));
    CHECK(c.gap->noise.slow_lo_ms == Approx(11.4));
    CHECK(c.gap->noise.fast_hi_ms == Approx(18.1));
    REQUIRE(c.gap->slow_unstable);
    REQUIRE(c.gap->fast_unstable);
    CHECK(c.gap->fast_unstable->why_unstable == instability::drift);
    // b: 10.5..19.5 ms, halves 12.5 and 17.5: 1.40x.
    CHECK(c.explanation.rfind(
              "Noise: the difference (+0.5 ms, +3.4% in median step time) is within the runs' noise (p10..p90 of step "
              "time: b 11.4..18.6 ms, a 10.9..18.1 ms overlap), so the split below may be noise, not a difference.\n"
              "Unstable: b's step time drifts (the second half's mean step is 1.40x the first half's), so its "
              "means may not hold for another run, nor the split below.\n"
              "Unstable: a's step time drifts (the second half's mean step is 1.42x the first half's), so its "
              "means may not hold for another run, nor the split below.\n"
              "Why b is slower than a: +0.5 ms per step (means over 10 and 10 steps without kernel records), of "
              "which\n",
              0) == 0);
    CHECK(contains(c.explanation,
                   "  - everything else (data loading, other phases, host time outside the "
                   "forward/backward/optimizer wall times): +0.0 ms (0%)\n"));
  }
  SECTION("p10..p90 apart: explained") {
    // b: 20..29 ms: p10 20.9 above a's p90 18.1.
    const auto c = compare_two(a, cpu_run("b", ramp(19)));
    REQUIRE(c.gap);
    CHECK_FALSE(c.gap->noise.within);
    CHECK(c.gap->gap_ms == Approx(10));
    CHECK(contains(c.explanation, "Why b is slower than a: +10.0 ms per step"));
  }
  SECTION("with repeats the ranges of the repeats' medians decide") {
    // a's repeats: medians 14.5 and 15.5. Both b's below have p10..p90 ranges that overlap a's.
    const auto a2 = cpu_run("a", ramp(10));
    const auto overlapping = compare_runs(
        {make_compared_run("a", {a, a2}), make_compared_run("b", {cpu_run("b", ramp(10)), cpu_run("b", ramp(10.8))})});
    REQUIRE(overlapping.gap);  // b: medians 15.5 and 16.3 (representative: the upper median, 16.3)
    CHECK(overlapping.gap->noise.repeats);
    CHECK(overlapping.gap->noise.within);
    CHECK(overlapping.runs[1].spread_lo_ms == Approx(15.5));
    CHECK(contains(overlapping.explanation,
                   "ranges of the repeats' median step times: b 15.5..16.3 ms, a 14.5..15.5 ms"));
    const auto apart = compare_runs(
        {make_compared_run("a", {a, a2}), make_compared_run("b", {cpu_run("b", ramp(11)), cpu_run("b", ramp(11.5))})});
    REQUIRE(apart.gap);  // b: medians 16.5 and 17.0, above a's 15.5
    CHECK_FALSE(apart.gap->noise.within);
    CHECK(contains(apart.explanation, "per step (means over"));
  }
}

TEST_CASE("an unstable run is said to be so before the split, a steady one is not", "[compare][noise]") {
  // a: 10 steps of 11 ms, steady. b: 12 steps of 20 and 40 ms (1 ms residual), each half of the run
  // three of each (no drift): two groups, 50% of the steps in the smaller; p10..p90 20..40 ms, apart
  // from a's 11..11, so no noise line.
  const auto a = cpu_run("a", std::vector<double>(10, 10.0));
  const auto b = cpu_run("b", {19, 39, 39, 19, 19, 39, 39, 19, 19, 39, 39, 19});
  const auto c = compare_two(a, b);
  REQUIRE(c.gap);
  CHECK_FALSE(c.gap->noise.within);
  CHECK_FALSE(c.gap->fast_unstable);
  REQUIRE(c.gap->slow_unstable);
  CHECK(c.gap->slow_unstable->why_unstable == instability::bimodal);
  CHECK(c.explanation.rfind("Unstable: b's steps fall into two groups (20.0 and 40.0 ms, the smaller one 50% of the "
                            "steps), so its means may not hold for another run, nor the split below.\n"
                            "Why b is slower than a: +19.0 ms per step (means over 12 and 10 steps",
                            0) == 0);
  CHECK_FALSE(contains(c.explanation, "Noise:"));
  // Steady runs apart: the explanation starts with the split, as before.
  const auto steady = compare_two(a, cpu_run("b", std::vector<double>(10, 20.0)));
  CHECK(steady.explanation.rfind("Why b is slower than a: +10.0 ms per step", 0) == 0);
}

TEST_CASE("the comparison object carries the columns, the gap with its noise check, and the explanation",
          "[compare][json]") {
  const auto c = compare_two(make_run("1x4", slow_phases, 1, 10), make_run("4x1", fast_phases, 1, 10));
  const auto j = comparison_json(c);
  CHECK(contains(j, "\"ratio\":\"median step / fastest median step\""));
  CHECK(contains(j, "\"runs\":[{\"name\":\"1x4\",\"repeats\":1,\"steps\":40,\"measured_steps\":40,"));
  CHECK(contains(
      j,
      "\"gap\":{\"slow\":\"1x4\",\"fast\":\"4x1\",\"slow_steps\":32,\"fast_steps\":32,\"untraced\":true,\"gap_ms\":"));
  CHECK(contains(j, "\"noise\":{\"within\":false,\"basis\":\"p10..p90\""));
  CHECK(contains(j, "\"kernels\":{\"steps\":4,"));
  std::string escaped;
  detail::json_writer w(escaped);
  w.value(c.explanation);
  CHECK(contains(j, "\"explanation\":" + escaped + "}"));
}
