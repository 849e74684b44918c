// tools/summary_reader.hpp: a saved summary read back is the run that was written (summary -> JSON
// -> reader -> JSON gives the same text, and the same table), and every bad input is one error
// that says what and where.
#include <catch2/catch.hpp>

#include <traceml/run_accumulator.hpp>
#include <traceml/sinks/json_summary.hpp>
#include <traceml/sinks/report_table.hpp>

#include <cmath>
#include <cstdio>
#include <limits>

#include "mixed_run.hpp"
#include "summary_reader.hpp"

using namespace traceml;
using traceml::tools::parse_summary;
using traceml::tools::summary_error;

namespace {
/// A CPU-only run with a nested phase, throughput, config in unsorted order and a non-finite figure.
run_result cpu_run() {
  std::vector<step_result> steps;
  for (int i = 0; i < 5; ++i) {
    step_result st;
    st.step = i;
    st.wall_ms = 10 + i;
    st.residual_ms = 1;
    st.microbatches = 1;
    st.phases.push_back({phase_kind::forward, "forward", 6.0 + i, 1, true});
    st.phases.push_back({phase_kind::user, "attention", 2.5, 3, false});
    st.phases.push_back({phase_kind::optimizer, "optimizer", 3, 1, true});
    steps.push_back(st);
  }
  run_result r;
  r.name = "cpu \"quoted\"";
  r.config = {{"zeta", "1"}, {"alpha", "two"}};
  r.steps = steps;
  r.summary = summarize_run(steps, 1, 512, 4);
  r.summary.gpu_status = "no GPU source";
  r.summary.residual_ms.stddev = std::numeric_limits<double>::quiet_NaN();  // written as null
  return r;
}

std::string message_of(const std::string& text) {
  try {
    parse_summary(text);
  } catch (const summary_error& e) {
    return e.what();
  }
  return "(no error)";
}

/// `text` with the first occurrence of `from` replaced by `to` (which must be there).
std::string edited(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}
}  // namespace

TEST_CASE("a summary read back writes the same text", "[reader]") {
  auto long_run = traceml_test::mixed_run();
  long_run.name = "long";
  long_run.steps.clear();  // a run longer than keep_steps: summary only, "steps_included": false
  const std::vector<run_result> runs = {traceml_test::mixed_run(), cpu_run(), long_run};
  const std::string written = json_summary(runs);
  const auto read = parse_summary(written);
  REQUIRE(read.runs.size() == 3);
  CHECK(read.traceml_version == TRACEML_VERSION_STRING);
  CHECK(json_summary(read.runs) == written);

  SECTION("the figures are the hand-computed ones of mixed_run.hpp") {
    const auto& s = read.runs[0].summary;
    CHECK(s.step_ms.mean == Approx(26.1));
    CHECK(s.baseline.step_ms == Approx(25));
    REQUIRE(s.recording.cost);
    CHECK(*s.recording.cost == Approx(35.0 / 24 - 1));
    REQUIRE(s.phases[1].kernels);
    CHECK(s.phases[1].kernels->busy_ms.mean == Approx(6));
    CHECK(s.total_wall_ms == Approx(3 * 24 * 2 + 24 * 6 + 28 * 2 + 35 + 26));  // from the timeline
    REQUIRE(read.runs[0].steps[5].gpu);
    const auto& g = *read.runs[0].steps[5].gpu;
    CHECK(g.kernels_measured);
    CHECK(std::string(g.phases[1].name) == "forward");
    CHECK(g.phases[1].facts.busy_ns == 3'000'000);
    CHECK(g.phases[1].kernels[0].total_ns == 1'800'000);  // gemm 60 x 30 us
    CHECK(read.runs[0].steps[4].gpu->phases[2].facts.window_ns == -1);  // unrecorded: not measured
    CHECK(read.runs[1].config[0].first == "zeta");  // written order kept
    CHECK(std::isnan(read.runs[1].summary.residual_ms.stddev));
    CHECK(read.runs[2].steps.empty());
  }
  SECTION("the terminal table of a saved run is the profiler's") {
    for (std::size_t i = 0; i < runs.size(); ++i) CHECK(format_table(read.runs[i]) == format_table(runs[i]));
  }
}

TEST_CASE("a file that is not a traceml summary is one error naming the problem", "[reader]") {
  const std::string good = json_summary({traceml_test::mixed_run()});
  SECTION("another schema") {
    CHECK(message_of(edited(good, "traceml.summary/2", "traceml.summary/1")) ==
          "not a traceml summary (schema \"traceml.summary/1\", expected \"traceml.summary/2\")");
  }
  SECTION("no schema, or not an object") {
    CHECK(message_of("{\"runs\": []}") == "not a traceml summary (no \"schema\" member, expected \"traceml.summary/2\")");
    CHECK(message_of("[1, 2]") == "not a traceml summary (an array, not an object, expected \"traceml.summary/2\")");
  }
  SECTION("malformed: the line and column") {
    const auto m = message_of("{\n  \"schema\": \"traceml.summary/2\",\n  oops\n}\n");
    CHECK(m.rfind("parse error at line 3, column 3: syntax error while parsing object key", 0) == 0);
  }
  SECTION("truncated") {
    // Cut after a member, as a writer killed mid-way leaves it, and inside a string.
    const auto m = message_of(good.substr(0, good.find("\"timeline\"")));
    CHECK(m.rfind("parse error at line 1, column ", 0) == 0);
    CHECK(m.find("unexpected end of input") != std::string::npos);
    CHECK(message_of(good.substr(0, good.find("forward") + 3)).find("missing closing quote") != std::string::npos);
    CHECK(message_of("").find("unexpected end of input") != std::string::npos);
  }
  SECTION("a missing or mistyped field: where it is") {
    CHECK(message_of(edited(good, "\"median\":", "\"medians\":")) == "runs[0].summary.step_ms: missing \"median\"");
    CHECK(message_of(edited(good, "\"warmup_steps\":2", "\"warmup_steps\":\"2\"")) ==
          "runs[0].summary.warmup_steps: expected a count (an integer >= 0), found a string");
    CHECK(message_of(edited(good, "\"kind\":\"forward\"", "\"kind\":\"forwards\"")) ==
          "runs[0].summary.phases[1].kind: unknown phase kind \"forwards\"");
    CHECK(message_of(edited(good, "\"steps_included\":true", "\"steps_included\":false")) ==
          "runs[0].steps: steps listed, but steps_included is false");
    CHECK(message_of("{\"schema\":\"traceml.summary/2\",\"traceml_version\":\"0.1.0\"}") == "missing \"runs\"");
  }
  SECTION("a file that cannot be opened: the system's reason") {
    try {
      tools::read_summary_file("no/such/dir/summary.json");
      FAIL("no error");
    } catch (const summary_error& e) {
      CHECK(std::string(e.what()) == "cannot open: No such file or directory");
    }
  }
}
