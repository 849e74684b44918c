// What the accumulation experiment adds to traceml's comparison (examples/qwen3/comparison.hpp): the
// MFU of each schedule and the schedules that ran out of memory. The engine itself is tested in
// tests/core/test_compare.cpp.
#include <catch2/catch.hpp>

#include "comparison.hpp"
#include "mixed_run.hpp"

using namespace traceml;

namespace {
qwen3::schedule_result schedule(const std::string& name, double fb_scale) {
  traceml_test::mixed_run_shape shape;
  shape.name = name;
  shape.fb_scale = fb_scale;
  return {name, {traceml_test::mixed_run(shape)}, ""};
}
}  // namespace

TEST_CASE("each schedule gets its MFU from its median step", "[comparison]") {
  // Medians: 44 ms (forward and backward twice as long) and 24 ms; 14.6 TFLOP per step at 790 TFLOP/s.
  const auto c = qwen3::compare_schedules({schedule("1x4", 2), schedule("4x1", 1)}, 14.6e12, 790e12);
  REQUIRE(c.mfu.size() == 2);
  REQUIRE(c.mfu[0]);
  CHECK(*c.mfu[0] == Approx(14.6e12 / 0.044 / 790e12));
  CHECK(*c.mfu[1] == Approx(14.6e12 / 0.024 / 790e12));
  CHECK(c.compared.runs[0].ratio_to_fastest == Approx(44.0 / 24));
  REQUIRE(c.compared.gap);
  CHECK(c.compared.gap->gap_ms == Approx(20));  // baseline means 45 - 25
  const auto table = qwen3::format_schedules(c);
  CHECK(table.find("MFU % (median step)") != std::string::npos);
  CHECK(table.find("77.0") != std::string::npos);  // 14.6e12 / 0.024 / 790e12 = 0.770
  const auto j = qwen3::comparison_json(c);
  CHECK(j["runs"][1]["mfu"].get<double>() == Approx(0.770).epsilon(1e-3));
  // Busy from the hardware counters of the baseline steps: the same shares of twice the windows,
  // (0.5 x 14 + 0.8 x 22) - (0.5 x 7 + 0.8 x 11) ms.
  CHECK(j["gap"]["busy_from"] == "hardware counters");
  CHECK(j["gap"]["fb_busy_ms"].get<double>() == Approx(12.3));
  CHECK(j["explanation"] == c.compared.explanation);

  SECTION("an unknown peak: no MFU") {
    const auto no_peak = qwen3::compare_schedules({schedule("1x4", 2), schedule("4x1", 1)}, 14.6e12, 0);
    CHECK_FALSE(no_peak.mfu[0]);
    CHECK(qwen3::comparison_json(no_peak)["runs"][0].count("mfu") == 0);
  }
}

TEST_CASE("a schedule that ran out of memory is a result, not a crash", "[comparison]") {
  const auto c = qwen3::compare_schedules(
      {{"1x4", {}, "OOM: CUDA out of memory"}, schedule("2x2", 1.5), schedule("4x1", 1)}, 14.6e12, 790e12);
  REQUIRE(c.compared.runs.size() == 2);
  REQUIRE(c.failed.size() == 1);
  CHECK(c.compared.runs[1].ratio_to_fastest == Approx(1));
  const auto table = qwen3::format_schedules(c);
  CHECK(table.find("schedule 1x4: out of GPU memory (OOM): OOM: CUDA out of memory") != std::string::npos);
  const auto j = qwen3::comparison_json(c);
  REQUIRE(j["runs"].size() == 3);
  CHECK(j["runs"][2]["name"] == "1x4");
  CHECK(j["runs"][2]["failed"] == true);

  SECTION("one schedule left: nothing to explain") {
    const auto one = qwen3::compare_schedules({{"1x4", {}, "OOM: CUDA out of memory"}, schedule("4x1", 1)}, 0, 0);
    CHECK_FALSE(one.compared.gap);
    CHECK(one.compared.explanation.rfind("Nothing to explain", 0) == 0);
  }
}
