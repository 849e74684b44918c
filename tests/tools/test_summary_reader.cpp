// tools/summary_reader.hpp: a saved summary read back is the run that was written (summary -> JSON
// -> reader -> JSON gives the same text, and the same table), and every bad input is one error
// that says what and where. And the readers' limits: JSON nested too deep, a step number twice; and
// names printed with their control characters escaped.
#include <catch2/catch.hpp>

#include <traceml/analysis/run_accumulator.hpp>
#include <traceml/sinks/json_summary.hpp>
#include <traceml/sinks/report_table.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "mixed_run.hpp"
#include "outside_run.hpp"
#include "steps_reader.hpp"
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
  r.summary.dropped_records = 3;                                            // the CPU losses, each its own count
  r.summary.capped_records = 1234;
  r.summary.overlapping_steps = 2;
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
  const std::vector<run_result> runs = {traceml_test::mixed_run(),
                                        cpu_run(),
                                        long_run,
                                        traceml_test::mixed_run_as_counted(),
                                        traceml_test::mixed_run_side_by_side(),
                                        traceml_test::mixed_run_idle_split()};
  const std::string written = json_summary(runs);
  const auto read = parse_summary(written);
  REQUIRE(read.runs.size() == 6);
  const auto optimizer_of = [](const run_result& r) {
    for (const auto& p : r.summary.phases)
      if (p.name == "optimizer") return p.kernels->hidden_share;
    return -1.0;
  };
  CHECK(optimizer_of(read.runs[4]) == Approx(0.4));
  CHECK(optimizer_of(read.runs[0]) == 0);
  {  // the idle split and copies of the recorded step, read back (mixed_run_idle_split)
    const auto& fwd = *read.runs[5].summary.phases[1].kernels;
    CHECK(fwd.idle_host_ms == Approx(3));
    CHECK(fwd.idle_kernel_gap_ms == Approx(1));
    CHECK(fwd.idle_other_ms == Approx(1));
    CHECK(fwd.idle_host_ms + fwd.idle_kernel_gap_ms + fwd.idle_other_ms == Approx(fwd.idle_ms.mean));
    const auto& data = *read.runs[5].summary.phases[0].kernels;
    CHECK(data.copy_ms == Approx(0.4));
    CHECK(data.copy_share == Approx(0.4));  // 0.4 of a 1 ms window
    CHECK(read.runs[0].summary.timeline[5].memory_steps == 1);
    CHECK(read.runs[0].summary.timeline[5].allocated_bytes == Approx((2LL << 30) + (1LL << 20)));
  }
  CHECK(read.runs[3].summary.counted_interval_us == Approx(100));
  CHECK(read.runs[3].summary.launch_engine_us == Approx(1.5));
  CHECK(read.runs[3].summary.step_counters->recorded_counted_share == Approx(21.5 / 31.5));
  CHECK(read.runs[0].summary.step_counters->recorded_counted_share == -1);
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
    CHECK(g.phases[1].kernels[0].total_ns == 1'800'000);                // gemm 60 x 30 us
    CHECK(read.runs[0].steps[4].gpu->phases[2].facts.window_ns == -1);  // unrecorded: not measured
    CHECK(read.runs[1].config[0].first == "zeta");                      // written order kept
    CHECK(std::isnan(read.runs[1].summary.residual_ms.stddev));
    CHECK(read.runs[1].summary.dropped_records == 3);
    CHECK(read.runs[1].summary.capped_records == 1234);
    CHECK(read.runs[1].summary.overlapping_steps == 2);
    CHECK(read.runs[2].steps.empty());
  }
  SECTION("the hardware counters are the hand-computed ones too, per phase, per step and per entry") {
    const auto& s = read.runs[0].summary;
    REQUIRE(s.phases[1].counters);
    const auto& c = *s.phases[1].counters;
    CHECK(c.steps == 9);
    CHECK(c.busy_ms.count == 9);
    CHECK(c.busy_ms.mean == Approx(34.6 / 9));
    CHECK(c.busy_share == Approx(34.6 / 67));
    CHECK(c.sm_active_share == Approx(0.25));
    CHECK(c.tensor_share == Approx(0.2));
    CHECK(c.dram_share == Approx(0.1));
    CHECK(c.coverage == Approx(1));
    CHECK(c.recorded_steps == 1);
    CHECK(c.recorded_counter_busy_share == Approx(0.6));
    CHECK(c.recorded_kernel_busy_share == Approx(6.0 / 11));
    CHECK(s.phases[1].baseline.counter_busy_ms == Approx(3.5));
    CHECK(s.phases[1].baseline.counter_steps == 8);
    REQUIRE(s.phases[4].counters);                                   // eval: never on a recorded step
    CHECK(s.phases[4].counters->recorded_counter_busy_share == -1);  // null read back as "not measured"
    CHECK(s.phases[4].counters->recorded_kernel_busy_share == -1);
    REQUIRE(s.step_counters);
    CHECK(s.step_counters->busy_share == Approx(129.7 / 202.5));
    CHECK_FALSE(read.runs[1].summary.step_counters);  // the CPU run: none, and no baseline either
    CHECK(read.runs[1].summary.phases[0].baseline.counter_busy_ms == -1);
    // Per step: what was written, exactly (shares, covered time, samples); step 6 was not sampled.
    const auto& written_steps = runs[0].steps;
    for (std::size_t i = 0; i < written_steps.size(); ++i) {
      INFO("step " << i);
      const auto& a = written_steps[i].gpu->total.counters;
      const auto& b = read.runs[0].steps[i].gpu->total.counters;
      CHECK(b.measured() == (i != 6));
      CHECK(b.covered_ns == a.covered_ns);
      CHECK(b.samples == a.samples);
      CHECK(busy_share(b) == busy_share(a));
      CHECK(sm_active_share(b) == sm_active_share(a));
      CHECK(tensor_share(b) == tensor_share(a));
      CHECK(dram_share(b) == dram_share(a));
    }
    const auto& f = read.runs[0].steps[5].gpu->phases[1].facts.counters;  // the recorded step's forward
    CHECK(f.covered_ns == 5'500'000);
    CHECK(f.samples == 275);
    CHECK(busy_share(f) == Approx(0.6));
  }
  SECTION("the terminal table of a saved run is the profiler's") {
    for (std::size_t i = 0; i < runs.size(); ++i) CHECK(format_table(read.runs[i]) == format_table(runs[i]));
  }
}

TEST_CASE("a /3 document written before capped_records and overlapping_steps reads them as 0", "[reader]") {
  auto doc = nlohmann::ordered_json::parse(json_summary({cpu_run()}));
  auto& s = doc["runs"][0]["summary"];
  s.erase("capped_records");
  s.erase("overlapping_steps");
  const auto read = parse_summary(doc.dump());
  REQUIRE(read.runs.size() == 1);
  CHECK(read.runs[0].summary.dropped_records == 3);
  CHECK(read.runs[0].summary.capped_records == 0);
  CHECK(read.runs[0].summary.overlapping_steps == 0);
}

TEST_CASE("a traceml.summary/2 document, written before hardware counters, reads as a run without them", "[reader]") {
  // The /2 layout is the /3 one less every counter field.
  auto doc = nlohmann::ordered_json::parse(json_summary({traceml_test::mixed_run()}));
  doc["schema"] = "traceml.summary/2";
  auto& run = doc["runs"][0];
  run["summary"]["gpu"].erase("step_counters");
  for (auto& p : run["summary"]["phases"]) {
    p.erase("counters");
    p["baseline"].erase("counter_busy_ms");
    p["baseline"].erase("counter_steps");
  }
  for (auto& st : run["steps"]) {
    st["gpu"].erase("counters");
    for (auto& p : st["gpu"]["phases"]) p.erase("counters");
  }
  const auto read = parse_summary(doc.dump());
  REQUIRE(read.runs.size() == 1);
  const auto& s = read.runs[0].summary;
  CHECK_FALSE(s.step_counters);
  for (const auto& p : s.phases) {
    INFO(p.name);
    CHECK_FALSE(p.counters);
    CHECK(p.baseline.counter_busy_ms == -1);
  }
  for (const auto& st : read.runs[0].steps) CHECK_FALSE(st.gpu->total.counters.measured());
  // Everything else as written.
  CHECK(s.step_ms.mean == Approx(26.1));
  REQUIRE(s.phases[1].kernels);
  CHECK(s.phases[1].kernels->busy_ms.mean == Approx(6));
  CHECK(s.phases[1].baseline.gpu_ms == Approx(7));
  // Written again it is a /3 document without counters, which reads back the same.
  const std::string again = json_summary(read.runs);
  CHECK(again.find("\"schema\":\"traceml.summary/3\"") != std::string::npos);
  CHECK(json_summary(parse_summary(again).runs) == again);

  SECTION("a /3 document must have the counter fields its schema always writes") {
    auto bad = nlohmann::ordered_json::parse(json_summary({traceml_test::mixed_run()}));
    bad["runs"][0]["summary"]["phases"][0]["baseline"].erase("counter_busy_ms");
    CHECK(message_of(bad.dump()) == "runs[0].summary.phases[0].baseline: missing \"counter_busy_ms\"");
  }
}

TEST_CASE("a file that is not a traceml summary is one error naming the problem", "[reader]") {
  const std::string good = json_summary({traceml_test::mixed_run()});
  SECTION("another schema") {
    CHECK(message_of(edited(good, "traceml.summary/3", "traceml.summary/1")) ==
          "not a traceml summary (schema \"traceml.summary/1\", expected \"traceml.summary/3\")");
    CHECK(message_of(edited(good, "traceml.summary/3", "traceml.summary/4")) ==
          "not a traceml summary (schema \"traceml.summary/4\", expected \"traceml.summary/3\")");
  }
  SECTION("no schema, or not an object") {
    CHECK(message_of("{\"runs\": []}") ==
          "not a traceml summary (no \"schema\" member, expected \"traceml.summary/3\")");
    CHECK(message_of("[1, 2]") == "not a traceml summary (an array, not an object, expected \"traceml.summary/3\")");
  }
  SECTION("malformed: the line and column") {
    const auto m = message_of("{\n  \"schema\": \"traceml.summary/3\",\n  oops\n}\n");
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
  SECTION("a number beyond a double: said, not thrown past the reader (found by fuzzing)") {
    CHECK(message_of("{\"schema\": \"traceml.summary/3\", \"runs\": [1e999]}") == "number overflow parsing '1e999'");
  }
  SECTION("a missing or mistyped field: where it is") {
    CHECK(message_of(edited(good, "\"median\":", "\"medians\":")) == "runs[0].summary.step_ms: missing \"median\"");
    CHECK(message_of(edited(good, "\"warmup_steps\":2", "\"warmup_steps\":\"2\"")) ==
          "runs[0].summary.warmup_steps: expected a count (an integer >= 0), found a string");
    CHECK(message_of(edited(good, "\"kind\":\"forward\"", "\"kind\":\"forwards\"")) ==
          "runs[0].summary.phases[1].kind: unknown phase kind \"forwards\"");
    CHECK(message_of(edited(good, "\"steps_included\":true", "\"steps_included\":false")) ==
          "runs[0].steps: steps listed, but steps_included is false");
    CHECK(message_of(edited(good, "\"covered_ms\":", "\"covered_time\":")) ==
          "runs[0].steps[0].gpu.counters: missing \"covered_ms\"");
    CHECK(message_of("{\"schema\":\"traceml.summary/3\",\"traceml_version\":\"0.1.0\"}") == "missing \"runs\"");
  }
  SECTION("an impossible value: what and where (a negative time, a share outside [0, 1])") {
    using ojson = nlohmann::ordered_json;
    const auto with = [&](const std::function<void(ojson&)>& edit) {
      ojson j = ojson::parse(good);
      edit(j);
      return message_of(j.dump());
    };
    CHECK(with([](ojson& j) { j["runs"][0]["summary"]["step_ms"]["median"] = -5; }) ==
          "runs[0].summary.step_ms.median: -5 is impossible for a time (milliseconds, at least 0)");
    CHECK(with([](ojson& j) { j["runs"][0]["steps"][0]["phases"][0]["wall_ms"] = -0.25; }) ==
          "runs[0].steps[0].phases[0].wall_ms: -0.25 is impossible for a time (milliseconds, at least 0)");
    CHECK(with([](ojson& j) { j["runs"][0]["summary"]["phases"][1]["kernels"]["busy_share"] = 1.5; }) ==
          "runs[0].summary.phases[1].kernels.busy_share: 1.5 is impossible for a share (0 to 1, shown as 0..100%)");
    CHECK(with([](ojson& j) { j["runs"][0]["summary"]["gpu"]["step_counters"]["coverage"] = -0.5; }) ==
          "runs[0].summary.gpu.step_counters.coverage: -0.5 is impossible for a share (0 to 1, shown as 0..100%)");
    CHECK(with([](ojson& j) { j["runs"][0]["summary"]["phases"][0]["share"] = -0.1; }) ==
          "runs[0].summary.phases[0].share: -0.1 is impossible for a share (at least 0)");
    // A residual is a difference of times: slightly below 0 is not refused.
    CHECK(with([](ojson& j) { j["runs"][0]["summary"]["residual_ms"]["min"] = -0.001; }) == "(no error)");
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

TEST_CASE("names reach the terminal with their control characters escaped", "[reader][printable]") {
  using traceml::detail::printable;
  CHECK(printable("forward") == "forward");
  CHECK(printable(std::string("a\x1b[31mb\0c\x7f", 10)) == "a\\x1b[31mb\\x00c\\x7f");
  CHECK(printable("two\nlines\t") == "two\\x0alines\\x09");
  CHECK(printable("two\nlines", /*keep_newlines=*/true) == "two\nlines");
  CHECK(printable("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\xa5") ==
        "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\xa5");  // UTF-8 as it is
  CHECK(printable("csi\xc2\x9b"
                  "2J") == "csi\\u009b2J");  // U+009B, a C1 control
  CHECK(printable("raw\x9b"
                  "2J") == "raw\\x9b2J");  // not UTF-8
  CHECK(printable("cut\xe2\x86") == "cut\\xe2\\x86");
  CHECK(printable("\xc0\xaf \xed\xa0\x80") == "\\xc0\\xaf \\xed\\xa0\\x80");  // overlong, surrogate

  // The profiler's own table (what finish() prints) escapes run and phase names too.
  run_result r = cpu_run();
  r.name = std::string("run\x1b]0;x\x07\0tail", 14);
  r.summary.phases[0].name = "fwd\x1b[2J";
  const std::string table = format_table(r);
  CHECK(table.find('\x1b') == std::string::npos);
  CHECK(table.find('\0') == std::string::npos);
  CHECK(table.rfind("traceml: run\\x1b]0;x\\x07\\x00tail  (", 0) == 0);
  CHECK(table.find("\nfwd\\x1b[2J ") != std::string::npos);
}

TEST_CASE("JSON nested too deep is refused before it is parsed", "[reader][limits]") {
  const std::string deep = "{\"schema\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  CHECK(tools::too_deep_at(deep) == 137);
  CHECK(tools::too_deep_at(std::string(128, '[') + std::string(128, ']')) == std::string::npos);
  CHECK(tools::too_deep_at("[\"[[[\\\"[[[\"]", 2) == std::string::npos);  // brackets in strings do not count
  try {
    parse_summary("\n  " + deep);
    FAIL("no error");
  } catch (const summary_error& e) {
    CHECK(std::string(e.what()) == "nested deeper than 128 levels (line 2, column 140)");
  }
}

TEST_CASE("a rank's file says its run: one run name and world size on every line, and each step's micro-batches",
          "[reader][steps]") {
  const auto read = tools::parse_rank_steps(
      "{\"run\":\"a\",\"rank\":1,\"world_size\":2,\"step\":0,\"wall_ms\":1,\"microbatches\":4}\n"
      "{\"run\":\"a\",\"rank\":1,\"world_size\":2,\"step\":1,\"wall_ms\":1,\"microbatches\":2}\n",
      0);
  CHECK(read.run == "a");
  CHECK(read.world_size == 2);
  CHECK(read.steps.rank == 1);
  CHECK(read.microbatches == std::vector<int>{4, 2});
  const auto error_of = [](const std::string& text) {
    try {
      tools::parse_rank_steps(text, 0);
    } catch (const tools::steps_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(error_of("{\"run\":\"a\",\"step\":0,\"wall_ms\":1}\n{\"run\":\"b\",\"step\":1,\"wall_ms\":1}\n") ==
        "line 2: run \"b\", where the lines before say run \"a\"");
  CHECK(error_of("{\"rank\":0,\"world_size\":2,\"step\":0,\"wall_ms\":1}\n{\"rank\":0,\"step\":1,\"wall_ms\":1}\n") ==
        "line 2: no world size, where the lines before say world size 2");
}

TEST_CASE("a step number twice in a rank's file is an error naming both lines", "[reader][steps]") {
  const std::string text =
      "{\"step\":1,\"wall_ms\":1}\n{\"step\":2,\"wall_ms\":1}\n\n{\"step\":2,\"wall_ms\":1}\n"
      "{\"step\":1,\"wall_ms\":1}\n";
  try {
    tools::parse_rank_steps(text, 0);
    FAIL("no error");
  } catch (const tools::steps_error& e) {
    CHECK(std::string(e.what()) == "line 4: step 2 again (first on line 2)");
  }
  CHECK(tools::parse_rank_steps("{\"step\":2,\"wall_ms\":1}\n{\"step\":1,\"wall_ms\":1}\n", 0).steps.steps.size() == 2);
}

TEST_CASE("the time outside steps is read back: phases, gaps, epoch gaps", "[reader][outside]") {
  auto run = traceml_test::mixed_run();
  run.summary.outside_steps = traceml_test::make_outside_run().acc.summary();
  const std::string written = json_summary({run});
  const auto read = parse_summary(written);
  REQUIRE(read.runs.size() == 1);
  const auto& o = read.runs[0].summary.outside_steps;
  REQUIRE(o.phases.size() == 3);
  CHECK(o.phases[0].name == "evaluation");
  CHECK(o.phases[0].count == 2);
  CHECK(o.phases[0].total_ms == Approx(80));
  CHECK_FALSE(o.phases[1].top_level);
  CHECK(o.phases[1].kind == traceml::phase_kind::forward);
  CHECK(o.gaps.count == 3);
  CHECK(o.gaps.largest_after_step == 1);
  CHECK(o.epoch_gaps.total_ms == Approx(100));
  CHECK(o.epoch_marks == 2);
  CHECK(o.gap_share == Approx(103.0 / 143));
  CHECK(json_summary(read.runs) == written);
  // `traceml show` prints the table of what it read: the section is there.
  CHECK(format_table(read.runs[0]).find("between steps                3     103.000") != std::string::npos);

  SECTION("a document written before outside_steps reads as a run without time outside steps") {
    auto doc = nlohmann::ordered_json::parse(written);
    doc["runs"][0]["summary"].erase("outside_steps");
    CHECK(parse_summary(doc.dump()).runs[0].summary.outside_steps.empty());
  }
  SECTION("impossible figures are refused with their path") {
    auto doc = nlohmann::ordered_json::parse(written);
    doc["runs"][0]["summary"]["outside_steps"]["gaps"]["largest_ms"] = 500;
    CHECK_THROWS_WITH(parse_summary(doc.dump()), Catch::Contains("runs[0].summary.outside_steps.gaps.largest_ms"));
    doc = nlohmann::ordered_json::parse(written);
    doc["runs"][0]["summary"]["outside_steps"]["epoch_gaps"]["count"] = 4;
    CHECK_THROWS_WITH(parse_summary(doc.dump()), Catch::Contains("more epoch gaps than gaps"));
    doc = nlohmann::ordered_json::parse(written);
    doc["runs"][0]["summary"]["outside_steps"]["gap_share"] = 1.5;
    CHECK_THROWS_WITH(parse_summary(doc.dump()), Catch::Contains("impossible for a share"));
  }
}
