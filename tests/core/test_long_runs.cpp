// Statistics in bounded memory: the quantile sketch against exact quantiles, running_stats against
// summarize(), and the run summary of a run longer than the exact-quantile limit.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "mixed_run.hpp"
#include "test_helpers.hpp"

using namespace traceml;

namespace {
std::vector<double> lognormal(std::size_t n, unsigned seed, double mu = 3, double sigma = 0.6) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> d(mu, sigma);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

double exact_quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return quantile_sorted(v, q);
}
}  // namespace

TEST_CASE("quantile sketch: every quantile within the stated relative error", "[stats][sketch]") {
  const double a = GENERATE(0.005, 0.01, 0.02);
  for (unsigned seed : {1u, 2u, 3u}) {
    auto values = lognormal(50000, seed);
    values.push_back(0.0);  // zero, and a negative value (a residual may be one), are ranked too
    values.push_back(-4.5);
    quantile_sketch s(a);
    for (double v : values) s.add(v);
    CHECK(s.count() == values.size());
    for (double q : {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0}) {
      const double exact = exact_quantile(values, q);
      INFO("a=" << a << " q=" << q << " exact=" << exact << " sketch=" << s.quantile(q));
      CHECK(std::fabs(s.quantile(q) - exact) <= a * std::fabs(exact) + 1e-12);
    }
  }
}

TEST_CASE("quantile sketch: memory grows with the value range, not the count, merges exactly", "[stats][sketch]") {
  quantile_sketch s(0.005), half1(0.005), half2(0.005);
  const auto values = lognormal(200000, 9);
  for (std::size_t i = 0; i < values.size(); ++i) {
    s.add(values[i]);
    (i % 2 ? half1 : half2).add(values[i]);
  }
  const double range =
      *std::max_element(values.begin(), values.end()) / *std::min_element(values.begin(), values.end());
  // ln(range) / ln(gamma) buckets at most, gamma = 1.005 / 0.995.
  CHECK(s.buckets() <= static_cast<std::size_t>(std::log(range) / std::log(1.005 / 0.995)) + 2);
  CHECK(s.buckets() < 2000);
  REQUIRE(half1.merge(half2));
  for (double q : {0.1, 0.5, 0.9}) CHECK(half1.quantile(q) == s.quantile(q));
  CHECK_FALSE(half1.merge(quantile_sketch(0.01)));  // different error: refused, unchanged
  CHECK(half1.count() == values.size());
}

TEST_CASE("running_stats: exact up to the limit, sketch beyond, count, mean, stddev, extremes always exact",
          "[stats][sketch]") {
  const auto values = lognormal(25000, 4);
  running_stats r(10000);
  std::vector<double> so_far;
  for (std::size_t i = 0; i < values.size(); ++i) {
    r.add(values[i]);
    so_far.push_back(values[i]);
    if (i + 1 == 10000) {  // at the limit: identical to summarize()
      const auto a = r.summary(), b = summarize(so_far);
      CHECK(r.exact());
      CHECK(a.quantile_error == 0);
      CHECK(a.median == b.median);
      CHECK(a.p10 == b.p10);
      CHECK(a.p90 == b.p90);
      CHECK(a.mean == Approx(b.mean).epsilon(1e-12));
      CHECK(a.stddev == Approx(b.stddev).epsilon(1e-9));
    }
  }
  CHECK_FALSE(r.exact());
  const auto a = r.summary(), b = summarize(values);
  CHECK(a.count == 25000);
  CHECK(a.quantile_error == 0.005);
  CHECK(a.mean == Approx(b.mean).epsilon(1e-12));
  CHECK(a.stddev == Approx(b.stddev).epsilon(1e-9));
  CHECK(a.min == b.min);
  CHECK(a.max == b.max);
  CHECK(std::fabs(a.median - b.median) <= 0.005 * b.median);
  CHECK(std::fabs(a.p10 - b.p10) <= 0.005 * b.p10);
  CHECK(std::fabs(a.p90 - b.p90) <= 0.005 * b.p90);

  running_stats repeats;  // add(v, n) equals n single adds
  repeats.add(2.0, 3);
  repeats.add(8.0);
  const auto rs = repeats.summary();
  CHECK(rs.count == 4);
  CHECK(rs.mean == Approx(3.5));
  CHECK(rs.stddev == Approx(summarize({2, 2, 2, 8}).stddev));
}

TEST_CASE("a run longer than the exact-quantile limit: figures from streaming statistics, one sample set each",
          "[stats][long]") {
  // 30,000 steps of the mixed run's pattern: every 1000th step recorded, an "eval" phase only from
  // step 20,000 on (it must count as 0 ms on the 19,990 measured steps before).
  run_accumulator acc(10);
  const auto pattern = traceml_test::mixed_run().steps;  // steps 2..11: 24, 28, 24, 35 (recorded), ...
  std::vector<double> walls, eval_walls;
  for (int i = 0; i < 30000; ++i) {
    step_result st = pattern[2 + (i % 1000 == 500 ? 3 : i % 2 == 0 ? 0 : 2)];  // 24 ms, or 35 ms recorded
    st.step = i;
    const bool recorded = i % 1000 == 500;
    if (!recorded) st.gpu->kernels_measured = false;
    const bool eval = i >= 20000 && i % 10 == 0;
    if (eval) {
      st.phases.push_back({phase_kind::user, "eval", 4, 1, true});
      st.wall_ms += 4;
    }
    acc.add(st);
    if (i >= 10) {
      walls.push_back(st.wall_ms);
      eval_walls.push_back(eval ? 4 : 0);
    }
  }
  const auto s = acc.summary();
  CHECK(s.steps == 30000);
  CHECK(s.warmup_steps == 10);
  CHECK(s.step_ms.count == 29990);
  CHECK(s.step_ms.quantile_error == sketch_relative_error);
  const auto exact = summarize(walls);
  CHECK(s.step_ms.mean == Approx(exact.mean));
  CHECK(std::fabs(s.step_ms.p90 - exact.p90) <= sketch_relative_error * exact.p90);
  CHECK(s.recording.recorded_steps == 30);
  REQUIRE(s.recording.cost);
  CHECK(*s.recording.cost == Approx(35.0 / 24 - 1).epsilon(0.01));
  CHECK(s.baseline.steps == 29990 - 30 - 30);  // not recorded, not after a recorded step
  const phase_summary* eval = nullptr;
  const phase_summary* fwd = nullptr;
  for (const auto& p : s.phases) {
    if (p.name == "eval") eval = &p;
    if (p.name == "forward") fwd = &p;
  }
  REQUIRE(eval);
  CHECK(eval->wall_ms.count == 29990);
  CHECK(eval->wall_ms.mean == Approx(summarize(eval_walls).mean));
  REQUIRE(fwd);
  REQUIRE(fwd->kernels);
  CHECK(fwd->kernels->steps == 30);
  CHECK(fwd->kernels->window_ms.mean == Approx(11));
  CHECK(fwd->kernels->busy_share == Approx(6.0 / 11));
  CHECK(fwd->kernels->kernels_per_step == Approx(200));

  // The timeline: bounded, every step in exactly one bucket, in order, the same total time.
  CHECK(s.timeline.size() <= timeline_points);
  CHECK(s.timeline.size() > timeline_points / 2);
  std::uint64_t covered = 0;
  double total = 0;
  for (const auto& b : s.timeline) {
    CHECK(b.first_step == static_cast<std::int32_t>(covered));
    CHECK(b.min_ms <= b.mean_ms + 1e-9);
    CHECK(b.mean_ms <= b.max_ms + 1e-9);
    covered += b.steps;
    total += b.mean_ms * b.steps;
  }
  CHECK(covered == 30000);
  CHECK(total == Approx(s.total_wall_ms));
}

TEST_CASE("run_accumulator mid-run: warm-up never more than half, statistics of the steps so far", "[stats][long]") {
  const auto run = traceml_test::mixed_run();
  run_accumulator acc(2);
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    acc.add(run.steps[i]);
    const std::size_t n = i + 1, warm = std::min<std::size_t>(2, n / 2);
    std::vector<double> walls;
    for (std::size_t k = warm; k < n; ++k) walls.push_back(run.steps[k].wall_ms);
    const auto a = acc.summary();
    CHECK(a.steps == n);
    CHECK(a.warmup_steps == warm);
    CHECK(a.step_ms.count == walls.size());
    CHECK(a.step_ms.median == summarize(walls).median);
    CHECK(a.step_ms.mean == Approx(summarize(walls).mean));
  }
  const auto s = acc.summary();
  CHECK(s.step_ms.mean == Approx(26.1));
  CHECK(s.total_wall_ms == Approx(26.1 * 10 + 2 * 3 * 24));
  REQUIRE(s.timeline.size() == run.steps.size());  // short runs: one step per point
  for (std::size_t i = 0; i < run.steps.size(); ++i) CHECK(s.timeline[i].mean_ms == run.steps[i].wall_ms);
}

TEST_CASE("a profiled run longer than keep_steps: steps only in the JSONL, a bounded trace, full statistics",
          "[profiler][long]") {
  traceml_test::reset_recorder();
  const std::string dir = traceml_test::temp_path("long_run_dir");
  ::mkdir(dir.c_str(), 0755);  // may exist from an earlier run
  auto opts = profiler_options::named("long").write_all_to(dir);
  opts.print_table = false;
  opts.warmup_steps = 2;
  opts.keep_steps = 50;
  opts.trace_last_steps = 10;
  {
    profiler prof(opts);
    for (int s = 0; s < 200; ++s) {
      TRACEML_STEP();
      for (int m = 0; m < 2; ++m) {
        TRACEML_MICROBATCH();
        TRACEML_PHASE(forward);
      }
    }
    const auto& r = prof.finish();
    CHECK(r.steps.empty());  // dropped once past keep_steps
    CHECK(r.summary.steps == 200);
    CHECK(r.summary.step_ms.count == 198);
    CHECK(r.summary.timeline.size() == 200);
  }
  const auto summary = nlohmann::json::parse(slurp(dir + "/long_summary.json"));
  const auto& run = summary["runs"][0];
  CHECK(run["steps_included"] == false);
  CHECK(run["steps"].empty());
  CHECK(run["summary"]["steps"] == 200);
  CHECK(run["timeline"].size() == 200);
  std::size_t lines = 0;
  {
    std::ifstream jsonl(dir + "/long_steps.jsonl");
    for (std::string line; std::getline(jsonl, line);) ++lines;
  }
  CHECK(lines == 200);  // every step, streamed
  const auto trace = nlohmann::json::parse(slurp(dir + "/long_trace.json"));
  CHECK(trace["otherData"]["steps"].get<std::string>().rfind("10 of 200 steps", 0) == 0);
  std::set<int> steps_in_trace;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] != "outside_steps") steps_in_trace.insert(e["args"]["step"].get<int>());
  CHECK(steps_in_trace.size() == 10);
  CHECK(*steps_in_trace.begin() == 190);
}

TEST_CASE("a run whose step list would pass the summary's bound: aggregates only, the steps in the JSONL",
          "[profiler][long]") {
  traceml_test::reset_recorder();
  const std::string dir = traceml_test::temp_path("bounded_summary_dir");
  ::mkdir(dir.c_str(), 0755);
  auto opts = profiler_options::named("wide").write_all_to(dir);
  opts.print_table = false;
  opts.html_path.clear();
  opts.trace_path.clear();
  const int steps = 1500;  // within keep_steps: kept in memory, but 12 phases a step make ~1 KB each
  static const char* const names[] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10", "p11"};
  {
    profiler prof(opts);
    for (int s = 0; s < steps; ++s) {
      TRACEML_STEP();
      for (const char* n : names) TRACEML_PHASE_NAMED(n);
    }
    const auto& r = prof.finish();
    REQUIRE(r.steps.size() == static_cast<std::size_t>(steps));  // result() keeps them ...
  }
  const std::string text = slurp(dir + "/wide_summary.json");
  CHECK(text.size() < (std::size_t{1} << 20));  // ... the file does not
  const auto summary = nlohmann::json::parse(text);
  const auto& run = summary["runs"][0];
  CHECK(run["steps_included"] == false);
  CHECK(run["steps"].empty());
  CHECK(run["summary"]["steps"] == steps);
  CHECK(run["summary"]["phases"].size() == 12);
  std::size_t lines = 0;
  std::ifstream jsonl(dir + "/wide_steps.jsonl");
  for (std::string line; std::getline(jsonl, line);) ++lines;
  CHECK(lines == static_cast<std::size_t>(steps));
  // The same steps, 100 of them: their list fits, and the summary carries it.
  traceml_test::reset_recorder();
  profiler_options few_opts = profiler_options::named("few");
  few_opts.print_table = false;
  profiler few(few_opts);
  for (int s = 0; s < 100; ++s) {
    TRACEML_STEP();
    for (const char* n : names) TRACEML_PHASE_NAMED(n);
  }
  const auto few_run = nlohmann::json::parse(json_summary({few.finish()}))["runs"][0];
  CHECK(few_run["steps_included"] == true);
  CHECK(few_run["steps"].size() == 100);
}

TEST_CASE("trace window: the last steps, and before them the last recorded ones", "[profiler][long]") {
  detail::trace_window w(3, 2);
  for (int s = 0; s < 20; ++s) {
    span_record r;
    r.step = s;
    w.add(s, {r}, {}, s % 5 == 0);  // steps 0, 5, 10, 15 recorded
  }
  std::vector<int> kept;
  for (const auto& r : w.spans()) kept.push_back(r.step);
  CHECK(kept == std::vector<int>{10, 15, 17, 18, 19});
  CHECK(w.coverage().rfind("5 of 20 steps", 0) == 0);
}
