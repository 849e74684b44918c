// The accumulation experiment's table and explanation (examples/qwen3/comparison.hpp), computed from
// hand-made runs whose gap decomposes into known parts.
#include <catch2/catch.hpp>

#include <tuple>

#include "comparison.hpp"

using namespace traceml;

namespace {
struct phase_spec {
  phase_kind kind;
  const char* name;
  double wall_ms, busy_ms, kernels;  // per step
  int micro;                         // micro-batches it runs in (kernels split evenly)
};

/// `steps` identical steps: phases as given plus `residual_ms`, GPU facts with kernels_measured.
run_result make_run(const std::string& name, std::vector<phase_spec> phases, double residual_ms, int steps = 6) {
  std::vector<step_result> out;
  for (int s = 0; s < steps; ++s) {
    step_result st;
    st.step = s;
    st.residual_ms = residual_ms;
    st.wall_ms = residual_ms;
    step_gpu_report g;
    g.step = s;
    g.kernels_measured = true;
    for (const auto& p : phases) {
      st.wall_ms += p.wall_ms;
      st.phases.push_back({p.kind, p.name, p.wall_ms, p.micro, true});
      for (int m = 0; m < p.micro; ++m) {
        phase_gpu_facts f;
        f.kind = p.kind;
        f.name = p.name;
        f.microbatch = p.kind == phase_kind::optimizer ? -1 : m;
        f.facts.kernel_ns = static_cast<std::int64_t>(p.busy_ms * 1e6 / p.micro);
        f.facts.busy_ns = f.facts.kernel_ns;
        f.facts.idle_ns = static_cast<std::int64_t>((p.wall_ms - p.busy_ms) * 1e6 / p.micro);
        f.facts.kernel_count = static_cast<std::uint64_t>(p.kernels / p.micro);
        f.top_kernels = {{std::string(name == "1x4" ? "gemm_small_tile" : "gemm_big_tile") + "_" + p.name,
                          f.facts.kernel_count, f.facts.kernel_ns}};
        g.phases.push_back(f);
        g.total.kernel_ns += f.facts.kernel_ns;
      }
    }
    st.gpu = g;
    out.push_back(st);
  }
  run_result r;
  r.name = name;
  r.steps = out;
  r.summary = summarize_run(out, 1);
  return r;
}
}  // namespace

TEST_CASE("the gap between schedules splits into idle, busy, optimizer and the rest", "[comparison]") {
  const auto slow = make_run("1x4", {{phase_kind::forward, "forward", 30, 10, 400, 4},
                                     {phase_kind::backward, "backward", 60, 20, 800, 4},
                                     {phase_kind::optimizer, "optimizer", 2, 1, 10, 1}}, 1);
  const auto fast = make_run("4x1", {{phase_kind::forward, "forward", 12, 8, 100, 1},
                                     {phase_kind::backward, "backward", 24, 16, 200, 1},
                                     {phase_kind::optimizer, "optimizer", 2, 1, 10, 1}}, 1);
  std::vector<qwen3::schedule_row> rows = {qwen3::make_row("1x4", {slow}, 14.6e12, 790e12),
                                           qwen3::make_row("4x1", {fast}, 14.6e12, 790e12)};
  qwen3::rank_rows(rows);
  CHECK(rows[0].median_ms == Approx(93));
  CHECK(rows[1].median_ms == Approx(39));
  CHECK(rows[0].ratio_to_fastest == Approx(93.0 / 39));
  CHECK(rows[1].ratio_to_fastest == Approx(1));
  CHECK(rows[0].kernels_per_microbatch == Approx(300));  // (400 + 800) / 4
  CHECK(rows[1].kernels_per_microbatch == Approx(300));
  CHECK(rows[0].kernels_per_step == Approx(1210));
  CHECK(rows[0].fb_idle_pct == Approx(100.0 * 60 / 90));
  REQUIRE(rows[1].mfu);
  CHECK(*rows[1].mfu == Approx(14.6e12 / 0.039 / 790e12));

  const auto g = qwen3::break_down_gap(rows);
  REQUIRE(g);
  CHECK(g->slow == "1x4");
  CHECK(g->fast == "4x1");
  CHECK(g->gap_ms == Approx(54));
  CHECK(g->fb_idle_ms == Approx(48));   // (20 + 40) - (4 + 8)
  CHECK(g->fb_busy_ms == Approx(6));    // (10 + 20) - (8 + 16)
  CHECK(g->optimizer_ms == Approx(0));
  CHECK(g->other_ms == Approx(0).margin(1e-9));
  CHECK(g->fb_idle_ms + g->fb_busy_ms + g->optimizer_ms + g->other_ms == Approx(g->gap_ms));
  CHECK(g->kernel_ratio == Approx(1210.0 / 310));
  CHECK(g->slow_mean_kernel_us == Approx(30e3 / 1200));
  CHECK(g->fast_mean_kernel_us == Approx(24e3 / 300));
  // Kernel by kernel, per step: the small-tile GEMMs of 1x4 against the big-tile ones of 4x1.
  REQUIRE(g->kernels.size() == 4);
  CHECK(g->kernels[0].name == "gemm_small_tile_backward");
  CHECK(g->kernels[0].slow_ms == Approx(20));
  CHECK(g->kernels[0].slow_count == 800);

  const auto text = qwen3::explain(*g);
  CHECK(text.find("+54.0 ms per optimizer step") != std::string::npos);
  CHECK(text.find("GPU idle inside forward/backward: +48.0 ms (89%)") != std::string::npos);
  CHECK(text.find("GPU busy inside forward/backward: +6.0 ms (11%)") != std::string::npos);
  CHECK(text.find("3.9x as many kernels") != std::string::npos);

  const auto j = qwen3::comparison_json(rows, g);
  CHECK(j["gap"]["fb_idle_ms"].get<double>() == Approx(48));
  CHECK(j["schedules"][0]["name"] == "1x4");
  CHECK(j["explanation"] == text);
}

TEST_CASE("a schedule that ran out of memory is a result, not a crash", "[comparison]") {
  const auto ok = make_run("4x1", {{phase_kind::forward, "forward", 12, 8, 100, 1}}, 1);
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
  CHECK(g->fb_wall_ms == Approx(10));
  CHECK(qwen3::explain(*g).find("cannot be told apart") != std::string::npos);
}

TEST_CASE("with CUDA graphs the split uses the GPU-side windows and still adds up", "[comparison]") {
  // The CPU leaves forward/backward after 1-2 ms (a graph replay); the GPU works on for tens of ms,
  // which the step-end synchronization puts outside any phase.
  auto run = [](const std::string& name, double fwd_busy, double bwd_busy, double fwd_idle, double bwd_idle,
                double residual) {
    std::vector<step_result> steps;
    for (int s = 0; s < 4; ++s) {
      step_result st;
      st.step = s;
      st.phases = {{phase_kind::forward, "forward", 2, 1, true}, {phase_kind::backward, "backward", 3, 1, true}};
      st.residual_ms = residual;
      st.wall_ms = 5 + residual;
      step_gpu_report g;
      g.step = s;
      g.kernels_measured = true;
      for (auto [kind, pname, busy, idle] : {std::tuple{phase_kind::forward, "forward", fwd_busy, fwd_idle},
                                             std::tuple{phase_kind::backward, "backward", bwd_busy, bwd_idle}}) {
        phase_gpu_facts f;
        f.kind = kind;
        f.name = pname;
        f.microbatch = 0;
        f.facts.busy_ns = f.facts.kernel_ns = static_cast<std::int64_t>(busy * 1e6);
        f.facts.idle_ns = static_cast<std::int64_t>(idle * 1e6);
        f.facts.kernel_count = 1000;
        g.phases.push_back(f);
      }
      st.gpu = g;
      steps.push_back(st);
    }
    run_result r;
    r.name = name;
    r.steps = steps;
    r.summary = summarize_run(steps, 0);
    return qwen3::make_row(name, {r}, 0, 0);
  };
  std::vector<qwen3::schedule_row> rows = {run("1x4", 29, 41, 3, 5, 71), run("4x1", 21, 26, 1, 2, 45)};
  CHECK(rows[0].fb_idle_pct == Approx(100.0 * 8 / 78));  // idle share of the GPU-side windows
  const auto g = qwen3::break_down_gap(rows);
  REQUIRE(g);
  CHECK(g->gap_ms == Approx(26));
  CHECK(g->fb_busy_ms == Approx(23));
  CHECK(g->fb_idle_ms == Approx(5));
  CHECK(g->other_ms == Approx(-2));
  CHECK(g->fb_idle_ms + g->fb_busy_ms + g->optimizer_ms + g->other_ms == Approx(g->gap_ms));
}
