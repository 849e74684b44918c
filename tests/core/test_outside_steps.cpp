// Time outside steps: phases recorded while no step is open, the gaps between steps, epoch marks.
// The figures on a hand-made run (outside_run.hpp), the same figures in each of the four outputs
// (table, JSON summary, Chrome trace, HTML), and a real run through the profiler whose files are
// parsed back.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "mixed_run.hpp"
#include "outside_run.hpp"
#include "test_helpers.hpp"

using namespace traceml;
using traceml_test::contains;
using traceml_test::outside_ns;

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const outside_phase* find_phase(const outside_steps_summary& s, const std::string& name) {
  for (const auto& p : s.phases)
    if (p.name == name) return &p;
  return nullptr;
}

/// The Chrome trace's events of category `cat` called `name`.
std::vector<nlohmann::json> events(const nlohmann::json& trace, const std::string& name, const std::string& cat = "") {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace["traceEvents"])
    if (e.value("name", "") == name && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  return out;
}
}  // namespace

TEST_CASE("outside steps: phases, gaps and epoch gaps of a hand-made run", "[outside]") {
  const auto run = traceml_test::make_outside_run();
  const auto s = run.acc.summary();
  REQUIRE(s.phases.size() == 3);
  CHECK(s.phases[0].name == "evaluation");  // longest first
  CHECK(s.phases[0].count == 2);
  CHECK(s.phases[0].total_ms == Approx(80));
  CHECK(s.phases[0].mean_ms == Approx(40));
  CHECK(s.phases[0].max_ms == Approx(60));
  CHECK(s.phases[0].top_level);
  CHECK(s.phases[1].name == "forward");
  CHECK_FALSE(s.phases[1].top_level);
  CHECK(s.phases[2].name == "checkpoint");
  CHECK(s.phases[2].total_ms == Approx(5));
  CHECK(s.phases_ms == Approx(85));  // the nested forward is inside an evaluation already
  CHECK(s.gaps.count == 3);
  CHECK(s.gaps.total_ms == Approx(103));
  CHECK(s.gaps.largest_ms == Approx(100));
  CHECK(s.gaps.largest_after_step == 1);
  CHECK(s.epoch_gaps.count == 1);
  CHECK(s.epoch_gaps.total_ms == Approx(100));
  CHECK(s.epoch_gaps.largest_after_step == 1);
  CHECK(s.epoch_marks == 2);
  CHECK(s.steps_span_ms == Approx(143));
  CHECK(s.gap_share == Approx(103.0 / 143));
  REQUIRE(run.gaps.size() == 3);
  CHECK_FALSE(run.gaps[0].epoch);
  CHECK(run.gaps[1].epoch);
  CHECK(run.gaps[1].begin_ns == outside_ns(22));
  CHECK(run.gaps[1].end_ns == outside_ns(122));
}

TEST_CASE("outside steps: a mark inside a step counts for the gap after it, one before the first step for none",
          "[outside]") {
  outside_steps_accumulator acc;
  acc.add_epoch_mark(outside_ns(1));  // before the first step
  CHECK_FALSE(acc.add_step(0, outside_ns(2), outside_ns(10)));
  acc.add_epoch_mark(outside_ns(9));  // at the last batch of an epoch, inside step 0
  const auto g1 = acc.add_step(1, outside_ns(15), outside_ns(20));
  REQUIRE(g1);
  CHECK(g1->epoch);
  CHECK(g1->after_step == 0);
  const auto g2 = acc.add_step(2, outside_ns(21), outside_ns(30));
  REQUIRE(g2);
  CHECK_FALSE(g2->epoch);
  acc.add_record(traceml_test::outside_record(phase_kind::user, "in a step", 3, 4, 0, 0));  // of step 0: not outside
  const auto s = acc.summary();
  CHECK(s.phases.empty());
  CHECK(s.epoch_marks == 2);
  CHECK(s.epoch_gaps.count == 1);
  CHECK(s.epoch_gaps.total_ms == Approx(5));
  CHECK(s.gaps.total_ms == Approx(6));
  CHECK(s.steps_span_ms == Approx(28));
  CHECK_FALSE(s.empty());
  CHECK(outside_steps_accumulator().summary().empty());
}

TEST_CASE("outside steps: distinct names beyond the bound are counted, not listed", "[outside]") {
  outside_steps_accumulator acc;
  static std::vector<std::string> names;
  names.clear();
  for (std::size_t i = 0; i < max_outside_phase_names + 3; ++i) names.push_back("p" + std::to_string(i));
  for (const auto& n : names) acc.add_record(traceml_test::outside_record(phase_kind::user, n.c_str(), 0, 1));
  const auto s = acc.summary();
  CHECK(s.phases.size() == max_outside_phase_names);
  CHECK(s.names_left_out == 3);
}

TEST_CASE("outside steps appear in the table, the JSON summary, the Chrome trace and the HTML report",
          "[outside][sinks]") {
  const auto made = traceml_test::make_outside_run();
  auto run = traceml_test::mixed_run();  // steps recorded and not, as the sink tests use
  run.summary.outside_steps = made.acc.summary();

  SECTION("table: a section below the steps") {
    const std::string table = format_table(run);
    const auto steps_at = table.find("\nstep ");
    const auto outside_at = table.find("outside steps");
    REQUIRE(steps_at != std::string::npos);
    REQUIRE(outside_at != std::string::npos);
    CHECK(outside_at > steps_at);
    CHECK(contains(table, "evaluation                   2      80.000      40.000      60.000"));
    CHECK(contains(table, "  forward (nested)           1      10.000      10.000      10.000"));
    CHECK(contains(table, "between steps                3     103.000      34.333     100.000"));
    CHECK(contains(table, "  at an epoch's end          1     100.000     100.000     100.000"));
    CHECK(contains(table,
                   "between steps: 72.0% of the 143.0 ms from the first step's start to the last step's end "
                   "(largest gap after step 1); epoch marks: 2"));
    CHECK(contains(table, "verdict outside_steps: 72% of the run (103.0 of 143.0 ms"));
  }
  SECTION("JSON summary: the outside_steps object and the verdict") {
    const auto doc = nlohmann::json::parse(json_summary({run}));
    const auto& o = doc["runs"][0]["summary"]["outside_steps"];
    REQUIRE(o["phases"].size() == 3);
    CHECK(o["phases"][0]["name"] == "evaluation");
    CHECK(o["phases"][0]["kind"] == "user");
    CHECK(o["phases"][0]["count"] == 2);
    CHECK(o["phases"][0]["total_ms"].get<double>() == Approx(80));
    CHECK(o["phases"][0]["max_ms"].get<double>() == Approx(60));
    CHECK(o["phases"][1]["top_level"] == false);
    CHECK(o["phases_ms"].get<double>() == Approx(85));
    CHECK(o["gaps"]["count"] == 3);
    CHECK(o["gaps"]["total_ms"].get<double>() == Approx(103));
    CHECK(o["gaps"]["largest_after_step"] == 1);
    CHECK(o["epoch_gaps"]["count"] == 1);
    CHECK(o["epoch_gaps"]["total_ms"].get<double>() == Approx(100));
    CHECK(o["epoch_marks"] == 2);
    CHECK(o["steps_span_ms"].get<double>() == Approx(143));
    CHECK(o["gap_share"].get<double>() == Approx(103.0 / 143));
    bool verdict = false;
    for (const auto& v : doc["runs"][0]["verdicts"])
      if (v["code"] == "outside_steps") {
        verdict = true;
        CHECK(v["figures"]["gaps_ms"].get<double>() == Approx(103));
        CHECK(v["figures"]["epoch_gaps_ms"].get<double>() == Approx(100));
      }
    CHECK(verdict);
  }
  SECTION("Chrome trace: outside phases as slices on their thread, gaps and epoch marks on their own track") {
    chrome_trace_extras extras;
    extras.gaps = made.gaps;
    extras.epoch_marks = made.marks;
    const auto trace = nlohmann::json::parse(chrome_trace("outside", traceml_test::outside_records(), {}, extras));
    const auto eval = events(trace, "evaluation");
    REQUIRE(eval.size() == 2);
    CHECK(eval[0]["args"]["step"] == -1);
    CHECK(eval[0]["dur"].get<double>() == Approx(60000));  // microseconds
    const auto between = events(trace, "between steps", "outside_steps");
    REQUIRE(between.size() == 2);
    CHECK(between[0]["dur"].get<double>() == Approx(2000));
    CHECK(between[1]["args"]["after_step"] == 2);
    const auto epoch = events(trace, "epoch boundary", "outside_steps");
    REQUIRE(epoch.size() == 1);
    CHECK(epoch[0]["dur"].get<double>() == Approx(100000));
    CHECK(epoch[0]["args"]["after_step"] == 1);
    CHECK(epoch[0]["args"]["epoch"] == true);
    // Times are from the first event: the step-0 gap begins at 10 ms, the earliest thing here.
    CHECK(between[0]["ts"].get<double>() == Approx(0));
    CHECK(epoch[0]["ts"].get<double>() == Approx(12000));
    const auto marks = events(trace, "epoch mark", "outside_steps");
    REQUIRE(marks.size() == 2);
    CHECK(marks[0]["ph"] == "i");
    CHECK(marks[0]["ts"].get<double>() == Approx(50000));
    CHECK(events(trace, "thread_name").size() >= 2);  // the "between steps" track is named
  }
  SECTION("HTML: a small section under the phases") {
    const std::string html = html_report({run});
    const auto phases_at = html.find("Phases of mixed");
    const auto outside_at = html.find("<caption>Outside steps");
    REQUIRE(phases_at != std::string::npos);
    REQUIRE(outside_at != std::string::npos);
    CHECK(outside_at > phases_at);
    CHECK(contains(html,
                   "<td>evaluation</td><td class=\"num\">2</td><td class=\"num\">80.00</td>"
                   "<td class=\"num\">40.00</td><td class=\"num\">60.00</td>"));
    CHECK(contains(html, "<td>between steps</td><td class=\"num\">3</td><td class=\"num\">103.0</td>"));
    CHECK(contains(html, "at an epoch's end</td><td class=\"num\">1</td><td class=\"num\">100.0</td>"));
    CHECK(contains(html, "72.0% of the 143.0 ms"));
    CHECK(contains(html, "<code>outside_steps</code>"));
  }
  SECTION("a run without time outside its steps shows no section") {
    const auto plain = traceml_test::mixed_run();
    CHECK_FALSE(contains(format_table(plain), "outside steps"));
    CHECK_FALSE(contains(html_report({plain}), "Outside steps"));
  }
}

TEST_CASE("a real run: an evaluation between two epochs of traceml::steps reaches every output",
          "[outside][profiler]") {
  traceml_test::reset_recorder();
  const std::string base = traceml_test::temp_path("outside_run");
  profiler_options opts = profiler_options::named("outside");
  opts.warmup_steps = 0;
  opts.print_table = false;
  opts.write_all_as(base);
  std::vector<int> batches = {1, 2, 3};
  run_result result;
  {
    profiler prof(opts);
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (int b : traceml::steps(batches)) {
        (void)b;
        traceml_test::spin_for(std::chrono::microseconds(500));
      }
      TRACEML_PHASE_NAMED("evaluation");  // outside any step: the range ended
      traceml_test::spin_for(std::chrono::milliseconds(20));
    }
    result = prof.finish();
  }
  const auto& o = result.summary.outside_steps;
  CHECK(result.summary.steps == 6);
  const outside_phase* eval = find_phase(o, "evaluation");
  REQUIRE(eval);
  CHECK(eval->count == 2);
  CHECK(eval->total_ms >= 40);
  CHECK(o.gaps.count == 5);
  CHECK(o.epoch_marks == 2);  // each range's end
  CHECK(o.epoch_gaps.count == 1);
  CHECK(o.epoch_gaps.largest_after_step == 2);
  CHECK(o.epoch_gaps.total_ms >= 20);
  CHECK(o.gaps.largest_after_step == 2);
  CHECK(o.gap_share > 0.3);
  CHECK(o.gap_share <= 1);

  const std::string table = format_table(result);
  CHECK(contains(table, "outside steps"));
  CHECK(contains(table, "evaluation                   2"));
  CHECK(contains(table, "verdict outside_steps"));

  const auto doc = nlohmann::json::parse(read_file(base + "_summary.json"));
  const auto& jo = doc["runs"][0]["summary"]["outside_steps"];
  REQUIRE(jo["phases"].size() == 1);
  CHECK(jo["phases"][0]["name"] == "evaluation");
  CHECK(jo["phases"][0]["count"] == 2);
  CHECK(jo["gaps"]["count"] == 5);
  CHECK(jo["epoch_gaps"]["count"] == 1);
  CHECK(jo["epoch_marks"] == 2);

  const auto trace = nlohmann::json::parse(read_file(base + "_trace.json"));
  const auto eval_slices = events(trace, "evaluation", "user");
  REQUIRE(eval_slices.size() == 2);
  CHECK(eval_slices[0]["args"]["step"] == -1);
  CHECK(eval_slices[0]["dur"].get<double>() >= 20000);
  CHECK(events(trace, "between steps", "outside_steps").size() == 4);
  const auto epoch = events(trace, "epoch boundary", "outside_steps");
  REQUIRE(epoch.size() == 1);
  CHECK(epoch[0]["args"]["after_step"] == 2);
  CHECK(epoch[0]["dur"].get<double>() >= eval_slices[0]["dur"].get<double>());  // the evaluation is inside it
  CHECK(events(trace, "epoch mark", "outside_steps").size() == 2);

  const std::string html = read_file(base + "_report.html");
  CHECK(contains(html, "<caption>Outside steps"));
  CHECK(contains(html, "<td>evaluation</td><td class=\"num\">2</td>"));
  for (const char* suffix : {"_summary.json", "_steps.jsonl", "_trace.json", "_report.html"})
    std::remove((base + suffix).c_str());
}

TEST_CASE("TRACEML_EPOCH marks an epoch between hand-written steps", "[outside][profiler]") {
  traceml_test::reset_recorder();
  profiler_options opts = profiler_options::named("epoch_macro");
  opts.warmup_steps = 0;
  opts.print_table = false;
  run_result result;
  {
    profiler prof(opts);
    TRACEML_EPOCH();  // before the first step: no gap
    for (int i = 0; i < 4; ++i) {
      if (i == 2) TRACEML_EPOCH();
      TRACEML_STEP();
      traceml_test::spin_for(std::chrono::microseconds(200));
    }
    result = prof.finish();
  }
  const auto& o = result.summary.outside_steps;
  CHECK(o.epoch_marks == 2);
  CHECK(o.gaps.count == 3);
  CHECK(o.epoch_gaps.count == 1);
  CHECK(o.epoch_gaps.largest_after_step == 1);
  CHECK(o.phases.empty());
}

namespace {
bool said(const std::string& part) {
  for (const auto& m : diagnostic_messages())
    if (contains(m, part)) return true;
  return false;
}
}  // namespace

TEST_CASE("TRACEML_OUT beside the program's own profiler: one message says which one collects", "[never-silent]") {
  traceml_test::reset_recorder();
  const std::string dir = traceml_test::temp_path("out_beside");
  REQUIRE(setenv("TRACEML_OUT", dir.c_str(), 1) == 0);
  profiler_options opts = profiler_options::named("own");
  opts.print_table = false;
  opts.json_path = traceml_test::temp_path("own_summary.json");
  {
    profiler prof(opts);
    TRACEML_STEP();
  }
  CHECK(said("TRACEML_OUT=" + dir +
             " is set, but the program attached its own traceml::profiler ('own'): that "
             "profiler collects, writing " +
             opts.json_path + "; TRACEML_OUT is not used"));
  CHECK(detail::activation().decided.load());  // no session starts behind it later
  std::size_t count = 0;
  for (const auto& m : diagnostic_messages()) count += contains(m, "TRACEML_OUT=") ? 1 : 0;
  CHECK(count == 1);

  SECTION("the session's own profiler says nothing of the kind") {
    traceml::reset_diagnostics(true);
    profiler_options session_like = profiler_options::named("session");
    session_like.print_table = false;
    session_like.config.emplace_back("started_by", "TRACEML_OUT");
    { profiler prof(session_like); }
    CHECK_FALSE(said("is set, but the program attached"));
  }
  unsetenv("TRACEML_OUT");
  std::remove(opts.json_path.c_str());
}

TEST_CASE("a run whose GPU source could not be made gives the reason and the fix in every output", "[never-silent]") {
  traceml_test::reset_recorder();
  const std::string why =
      "GPU timing off: no NVIDIA driver (the CUDA runtime found no libcuda; install the NVIDIA "
      "driver on a machine with a GPU); phases are timed on the CPU";
  detail::note_no_gpu_source(why);  // what make_best_gpu_source notes when it attaches none
  profiler_options opts = profiler_options::named("nodriver");
  opts.print_table = false;
  opts.warmup_steps = 0;
  opts.json_path = traceml_test::temp_path("nodriver_summary.json");
  opts.html_path = traceml_test::temp_path("nodriver_report.html");
  run_result run;
  {
    profiler prof(opts);
    for (int i = 0; i < 2; ++i) {
      TRACEML_STEP();
    }
    run = prof.finish();
  }
  detail::note_no_gpu_source("");
  CHECK(run.summary.gpu_status == why);
  CHECK(contains(format_table(run), "\ngpu: " + why + "\n"));
  const auto doc = nlohmann::json::parse(read_file(opts.json_path));
  CHECK(doc["runs"][0]["summary"]["gpu"]["status"] == why);
  CHECK(contains(read_file(opts.html_path), "<td>" + why + "</td>"));
  std::remove(opts.json_path.c_str());
  std::remove(opts.html_path.c_str());

  SECTION("without a noted reason, the status says how to attach a source") {
    profiler_options plain = profiler_options::named("plain");
    plain.print_table = false;
    profiler prof(plain);
    { TRACEML_STEP(); }
    CHECK(prof.finish().summary.gpu_status == no_gpu_source_status);
  }
}
