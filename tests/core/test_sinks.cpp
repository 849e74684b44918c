// Outputs parsed back: terminal table, JSON summary, step JSONL, Chrome trace; failures reported once.
// The GPU figures are checked on mixed_run.hpp's hand-made run against its hand-computed values.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <csignal>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "mixed_run.hpp"
#include "test_helpers.hpp"

using namespace traceml;
using nlohmann::json;

namespace {
run_result sample_run() {
  std::vector<step_result> steps;
  for (int i = 0; i < 4; ++i) {
    step_result st;
    st.step = i;
    st.wall_ms = 10 + i;
    st.residual_ms = 0.5;
    st.microbatches = 2;
    st.phases.push_back({phase_kind::forward, "forward", 4 + i * 0.5, 2, true});
    st.phases.push_back({phase_kind::user, "say \"hi\"\n", 1, 1, false});
    steps.push_back(st);
  }
  run_result r;
  r.name = "1x4";
  r.config = {{"schedule", "1x4"}, {"dtype", "bf16"}};
  r.steps = steps;
  r.summary = summarize_run(steps, 1);
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("the JSON summary parses back and carries the summary's numbers", "[sinks][json]") {
  const auto run = sample_run();
  const json doc = json::parse(json_summary({run, run}));
  CHECK(doc["schema"] == "traceml.summary/3");
  REQUIRE(doc["runs"].size() == 2);
  const auto& r = doc["runs"][0];
  CHECK(r["name"] == "1x4");
  CHECK(r["config"]["dtype"] == "bf16");
  CHECK(r["summary"]["steps"] == 4);
  CHECK(r["summary"]["warmup_steps"] == 1);
  CHECK(r["summary"]["step_ms"]["mean"].get<double>() == Approx(run.summary.step_ms.mean));
  CHECK(r["summary"]["step_ms"]["p90"].get<double>() == Approx(run.summary.step_ms.p90));
  CHECK(r["summary"]["phases"][0]["name"] == "forward");
  CHECK(r["summary"]["phases"][0]["wall_ms"]["median"].get<double>() == Approx(run.summary.phases[0].wall_ms.median));
  CHECK(r["summary"]["phases"][1]["name"] == "say \"hi\"\n");  // escaping survives the round trip
  CHECK(r["summary"]["phases"][1]["top_level"] == false);
  REQUIRE(r["steps"].size() == 4);
  CHECK(r["steps"][0]["warmup"] == true);
  CHECK(r["steps"][1]["warmup"] == false);
  CHECK(r["steps"][3]["wall_ms"].get<double>() == Approx(13));
  CHECK(r["steps"][3]["phases"][0]["count"] == 2);
  CHECK_FALSE(r["steps"][0].contains("gpu"));
}

TEST_CASE("a step JSONL line is one self-contained JSON object", "[sinks][jsonl]") {
  const auto run = sample_run();
  const auto line = step_jsonl_line("2x2", run.steps[2]);
  CHECK(line.back() == '\n');
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  const json j = json::parse(line);
  CHECK(j["run"] == "2x2");
  CHECK(j["step"] == 2);
  CHECK(j["wall_ms"].get<double>() == Approx(12));
  CHECK(j["phases"].size() == 2);
}

namespace {
/// The cells of the table row that starts with `name` (split on spaces).
std::vector<std::string> table_row(const std::string& table, const std::string& name) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, name.size() + 1, name + " ") != 0) continue;
    std::istringstream cells(line.substr(name.size()));
    std::vector<std::string> out;
    for (std::string c; cells >> c;) out.push_back(c);
    return out;
  }
  return {};
}

/// Checks that a JSON kernel_summary object holds busy + idle = window and shares in [0, 1].
void check_kernel_summary(const json& k) {
  const double window = k["window_ms"]["mean"].get<double>();
  CHECK(k["busy_ms"]["mean"].get<double>() + k["idle_ms"]["mean"].get<double>() == Approx(window));
  for (const char* f : {"wall_ms", "window_ms", "kernel_ms", "busy_ms", "idle_ms"}) CHECK(k[f]["count"] == k["steps"]);
  for (const char* f : {"busy_share", "idle_share"}) {
    CHECK(k[f].get<double>() >= 0);
    CHECK(k[f].get<double>() <= 1);
  }
  CHECK(k["busy_share"].get<double>() + k["idle_share"].get<double>() == Approx(window > 0 ? 1 : 0));
}

/// Checks that a JSON counter_summary object rests on its own `steps`, busy + idle = window, and
/// every share is in [0, 1] or null (not sampled).
void check_counter_summary(const json& c) {
  for (const char* f : {"window_ms", "busy_ms", "idle_ms"}) CHECK(c[f]["count"] == c["steps"]);
  CHECK(c["busy_ms"]["mean"].get<double>() + c["idle_ms"]["mean"].get<double>() ==
        Approx(c["window_ms"]["mean"].get<double>()));
  const auto& a = c["agreement_on_recorded"];
  CHECK(a["steps"].get<std::uint64_t>() <= c["steps"].get<std::uint64_t>());
  for (const json* share : {&c["busy_share"], &c["sm_active_share"], &c["tensor_share"], &c["dram_share"],
                            &c["coverage"], &a["counters_busy_share"], &a["kernel_records_busy_share"]}) {
    if (share->is_null()) continue;
    CHECK(share->get<double>() >= 0);
    CHECK(share->get<double>() <= 1);
  }
}

/// The summary phase object named `name`.
const json& phase_named(
    const json& summary,
    const char* name) {  // not a std::string: a temporary argument would make GCC 13 see a dangling reference
  for (const auto& p : summary["phases"])
    if (p["name"] == name) return p;
  FAIL("no phase " << name);
  throw;
}
}  // namespace

TEST_CASE("the table prints each GPU figure over its own steps and says which", "[sinks][table]") {
  const auto table = format_table(traceml_test::mixed_run());
  // mean median p10 p90 min max std share | gpu ms | kernel ms busy% idle% kernels/step
  const auto fwd = table_row(table, "forward");
  REQUIRE(fwd.size() == 13);
  CHECK(fwd[0] == "8.600");                    // wall mean over the 10 measured steps
  CHECK(fwd[8] == "7.400");                    // GPU time (events) over the same 10 steps
  CHECK(fwd[9] == "4.800");                    // kernel time of the recorded step: 2 x (60 x 30 + 40 x 15) us
  CHECK(fwd[10] == "54.5");                    // busy 6 of an 11 ms window
  CHECK(fwd[11] == "45.5");                    // idle 5 of 11
  CHECK(fwd[12] == "200");                     // launches per recorded step
  const auto eval = table_row(table, "eval");  // 2 of 10 steps, never on the recorded one
  REQUIRE(eval.size() == 13);
  CHECK(eval[0] == "800.0us");  // below 1 ms: in microseconds
  CHECK(eval[8] == "700.0us");  // 2 x 3.5 / 10
  CHECK(eval[9] == "-");        // no kernel figures: zeros would read "no kernels"
  CHECK(eval[10] == "-");
  const auto step = table_row(table, "step");
  REQUIRE(step.size() == 13);
  CHECK(step[0] == "26.100");
  CHECK(step[8] == "22.300");  // (20.5 x 7 + 24 x 2 + 31.5) / 10
  CHECK(step[9] == "16.200");
  CHECK(step[10] == "58.7");  // 18.5 of 31.5
  CHECK(step[11] == "41.3");
  CHECK(step[12] == "510");
  CHECK(table.find("wall: 10 steps; gpu ms: 10 of 10 steps (CUDA events); kernel ms, busy/idle % of the GPU window, "
                   "kernels/step: 1 of 10 steps (recorded, CUPTI); recording cost +45.8% per recorded step "
                   "(median of each against the untraced steps before it)\n") != std::string::npos);
  SECTION("every busy and idle share is within [0, 100]") {
    for (const char* name : {"dataloader", "forward", "backward", "optimizer", "step"}) {
      const auto row = table_row(table, name);
      REQUIRE(row.size() == 13);
      for (int i : {10, 11}) {
        INFO(name << " column " << i);
        CHECK(std::stod(row[i]) >= 0);
        CHECK(std::stod(row[i]) <= 100);
      }
      CHECK(std::stod(row[10]) + std::stod(row[11]) == Approx(100).margin(0.11));
    }
  }
  SECTION("without a GPU source: no GPU columns, no footer") {
    const auto cpu = format_table(sample_run());
    CHECK(cpu.find("gpu ms") == std::string::npos);
    CHECK(cpu.find("busy %") == std::string::npos);
    CHECK(cpu.find("wall:") == std::string::npos);
  }
}

TEST_CASE("the JSON summary carries every sample set with its count", "[sinks][json]") {
  const json doc = json::parse(json_summary({traceml_test::mixed_run()}));
  const auto& s = doc["runs"][0]["summary"];
  CHECK(s["step_ms"]["count"] == 10);
  CHECK(s["step_ms"]["mean"].get<double>() == Approx(26.1));
  CHECK(s["step_ms"]["quantile_error"] == 0);  // 10 values: exact quantiles
  const auto& fwd = s["phases"][1];
  REQUIRE(fwd["name"] == "forward");
  CHECK(fwd["wall_ms"]["count"] == 10);
  CHECK(fwd["wall_ms"]["mean"].get<double>() == Approx(8.6));
  CHECK(fwd["gpu_ms"]["count"] == 10);
  CHECK(fwd["gpu_ms"]["mean"].get<double>() == Approx(7.4));
  const auto& k = fwd["kernels"];
  CHECK(k["steps"] == 1);
  CHECK(k["wall_ms"]["mean"].get<double>() == Approx(12));
  CHECK(k["window_ms"]["mean"].get<double>() == Approx(11));
  CHECK(k["busy_ms"]["mean"].get<double>() == Approx(6));
  CHECK(k["idle_ms"]["mean"].get<double>() == Approx(5));
  CHECK(k["busy_share"].get<double>() == Approx(6.0 / 11));
  CHECK(k["kernels_per_step"].get<double>() == Approx(200));
  CHECK(k["kernels_per_microbatch"].get<double>() == Approx(100));
  CHECK(k["mean_kernel_us"].get<double>() == Approx(24));  // 4.8 ms over 200 launches
  REQUIRE(k["top_kernels"].size() == 2);
  CHECK(k["top_kernels"][0]["name"] == "gemm");
  CHECK(k["top_kernels"][0]["launches_per_step"].get<double>() == Approx(120));
  CHECK(k["top_kernels"][0]["ms_per_step"].get<double>() == Approx(3.6));
  CHECK(fwd["baseline"]["wall_ms"].get<double>() == Approx(8));
  CHECK(fwd["baseline"]["gpu_ms"].get<double>() == Approx(7));
  const auto& eval = s["phases"][4];
  REQUIRE(eval["name"] == "eval");
  CHECK(eval["wall_ms"]["mean"].get<double>() == Approx(0.8));
  CHECK_FALSE(eval.contains("kernels"));
  CHECK(eval["baseline"]["gpu_ms"].get<double>() == Approx(0.875));
  for (const auto& p : s["phases"])
    if (p.contains("kernels")) check_kernel_summary(p["kernels"]);
  const auto& g = s["gpu"];
  CHECK(g["step_gpu_ms"]["count"] == 10);
  CHECK(g["step_gpu_ms"]["mean"].get<double>() == Approx(22.3));
  CHECK(g["step_kernels"]["steps"] == 1);
  CHECK(g["step_kernels"]["window_ms"]["mean"].get<double>() == Approx(31.5));
  CHECK(g["step_kernels"]["busy_ms"]["mean"].get<double>() == Approx(18.5));
  check_kernel_summary(g["step_kernels"]);
  CHECK(s["recording"]["recorded_steps"] == 1);
  CHECK(s["recording"]["recorded_step_ms"].get<double>() == Approx(35));
  CHECK(s["recording"]["untraced_step_ms"].get<double>() == Approx(24));
  CHECK(s["recording"]["cost"].get<double>() == Approx(35.0 / 24 - 1));
  CHECK(s["baseline"]["steps"] == 8);
  CHECK(s["baseline"]["untraced"] == true);
  CHECK(s["baseline"]["step_ms"].get<double>() == Approx(25));

  SECTION("no recorded step: no kernel objects, the cost is null") {
    const json cpu = json::parse(json_summary({sample_run()}))["runs"][0]["summary"];
    CHECK(cpu["recording"]["cost"].is_null());
    CHECK_FALSE(cpu["gpu"].contains("step_kernels"));
    CHECK_FALSE(cpu["phases"][0].contains("kernels"));
    CHECK_FALSE(cpu["phases"][0].contains("gpu_ms"));
    CHECK_FALSE(cpu["phases"][0].contains("counters"));  // no hardware counters either
    CHECK_FALSE(cpu["gpu"].contains("step_counters"));
    CHECK(cpu["phases"][0]["baseline"]["counter_busy_ms"].is_null());
  }
}

TEST_CASE("the JSON summary's hardware counters rest on the sampled steps, with their count", "[sinks][json]") {
  const json doc = json::parse(json_summary({traceml_test::mixed_run()}));
  const auto& s = doc["runs"][0]["summary"];
  const auto& fwd = phase_named(s, "forward");
  REQUIRE(fwd.contains("counters"));
  const auto& c = fwd["counters"];
  CHECK(c["steps"] == 9);  // measured steps 2..11 without the unsampled step 6
  CHECK(c["window_ms"]["count"] == 9);
  CHECK(c["window_ms"]["mean"].get<double>() == Approx(67.0 / 9));
  CHECK(c["busy_ms"]["mean"].get<double>() == Approx(34.6 / 9));
  CHECK(c["idle_ms"]["mean"].get<double>() == Approx((67.0 - 34.6) / 9));
  CHECK(c["busy_share"].get<double>() == Approx(34.6 / 67));
  CHECK(c["sm_active_share"].get<double>() == Approx(0.25));
  CHECK(c["tensor_share"].get<double>() == Approx(0.2));
  CHECK(c["dram_share"].get<double>() == Approx(0.1));
  CHECK(c["coverage"].get<double>() == Approx(1));
  CHECK(c["samples_per_step"].get<double>() == Approx(3350.0 / 9));
  const auto& a = c["agreement_on_recorded"];
  CHECK(a["steps"] == 1);  // the one step with both kernel records and samples
  CHECK(a["counters_busy_share"].get<double>() == Approx(0.6));
  CHECK(a["kernel_records_busy_share"].get<double>() == Approx(6.0 / 11));
  CHECK(fwd["baseline"]["counter_busy_ms"].get<double>() == Approx(3.5));  // every baseline step sampled
  CHECK(phase_named(s, "backward")["baseline"]["counter_busy_ms"].get<double>() == Approx(8.8));
  // The optimizer's tensor pipes were sampled and idle: 0, a measurement, not null.
  CHECK(phase_named(s, "optimizer")["counters"]["tensor_share"] == 0);
  CHECK(phase_named(s, "dataloader")["counters"]["busy_share"] == 0);

  const auto& eval = phase_named(s, "eval");  // ran on 2 of the 9 sampled steps, never a recorded one
  REQUIRE(eval.contains("counters"));
  CHECK(eval["counters"]["steps"] == 9);
  CHECK(eval["counters"]["busy_ms"]["mean"].get<double>() == Approx(7.0 / 9));
  CHECK(eval["counters"]["busy_share"].get<double>() == Approx(1));
  CHECK(eval["counters"]["agreement_on_recorded"]["steps"] == 0);
  CHECK(eval["counters"]["agreement_on_recorded"]["counters_busy_share"].is_null());
  CHECK(eval["counters"]["agreement_on_recorded"]["kernel_records_busy_share"].is_null());
  CHECK(eval["baseline"]["counter_busy_ms"].get<double>() == Approx(0.875));

  const auto& st = s["gpu"]["step_counters"];
  CHECK(st["steps"] == 9);
  CHECK(st["busy_share"].get<double>() == Approx(129.7 / 202.5));
  CHECK(st["busy_ms"]["mean"].get<double>() == Approx(129.7 / 9));
  CHECK(st["window_ms"]["mean"].get<double>() == Approx(202.5 / 9));
  CHECK(st["agreement_on_recorded"]["steps"] == 1);
  CHECK(st["agreement_on_recorded"]["counters_busy_share"].get<double>() == Approx(19.5 / 31.5));
  CHECK(st["agreement_on_recorded"]["kernel_records_busy_share"].get<double>() == Approx(18.5 / 31.5));
  check_counter_summary(st);
  for (const auto& p : s["phases"]) {
    INFO(p["name"]);
    REQUIRE(p.contains("counters"));
    check_counter_summary(p["counters"]);
  }

  SECTION("a GPU without tensor or DRAM counters: those shares are null, the others stay") {
    auto run = traceml_test::mixed_run();
    for (auto& step : run.steps) {
      auto& g = *step.gpu;
      g.total.counters.tensor_covered_ns = g.total.counters.dram_covered_ns = 0;
      for (auto& p : g.phases) p.facts.counters.tensor_covered_ns = p.facts.counters.dram_covered_ns = 0;
    }
    run.summary = summarize_run(run.steps, 2);
    const json plain = json::parse(json_summary({run}))["runs"][0]["summary"];
    const auto& pc = phase_named(plain, "forward")["counters"];
    CHECK(pc["tensor_share"].is_null());
    CHECK(pc["dram_share"].is_null());
    CHECK(pc["busy_share"].get<double>() == Approx(34.6 / 67));
    CHECK(plain["gpu"]["step_counters"]["tensor_share"].is_null());
    const json line = json::parse(step_jsonl_line("mixed", run.steps[4]));
    CHECK_FALSE(line["gpu"]["counters"].contains("tensor_share"));  // not sampled: absent, not 0
    CHECK_FALSE(line["gpu"]["phases"][1]["counters"].contains("dram_share"));
  }
}

TEST_CASE(
    "work side by side: each phase's hidden share over the recorded step, in the JSON and as a table "
    "column only when some phase has it",
    "[sinks][json][table]") {
  const auto run = traceml_test::mixed_run_side_by_side();
  const json s = json::parse(json_summary({run}))["runs"][0]["summary"];
  CHECK(phase_named(s, "optimizer")["kernels"]["hidden_share"].get<double>() == Approx(0.4));  // 0.2 / 0.5
  CHECK(phase_named(s, "backward")["kernels"]["hidden_share"].get<double>() == Approx(0.4 / 12));
  CHECK(phase_named(s, "forward")["kernels"]["hidden_share"].get<double>() == 0);
  const json plain = json::parse(json_summary({traceml_test::mixed_run()}))["runs"][0]["summary"];
  CHECK(phase_named(plain, "optimizer")["kernels"]["hidden_share"].get<double>() == 0);

  const std::string table = format_table(run);
  CHECK(table.find("kernels/step  hidden %") != std::string::npos);
  const auto main_table = table.substr(0, table.find("\nhardware counters "));
  const auto opt = table_row(main_table, "optimizer");
  CHECK(opt.back() == "40.0");
  CHECK(table_row(main_table, "backward").back() == "3.3");
  CHECK(table_row(main_table, "eval").back() == "-");  // never on the recorded step
  CHECK(table_row(main_table, "step").back() == "-");
  CHECK(table.find("hidden %: of a phase's own GPU time, the share other work ran beside it") != std::string::npos);
  CHECK(format_table(traceml_test::mixed_run()).find("hidden") == std::string::npos);  // one stream: no column
}

TEST_CASE("counter shares resting on under 5 samples per step are said to be coarse, by phase", "[sinks][table]") {
  auto run = traceml_test::mixed_run();
  CHECK(format_table(run).find("coarse") == std::string::npos);  // 25 and more samples per phase and step
  for (auto& p : run.summary.phases)
    if (p.name == "dataloader" || p.name == "optimizer") p.counters->samples_per_step = 2.6;
  CHECK(format_table(run).find("; coarse in dataloader, optimizer (under 5 samples per step: its edges weigh as "
                               "much as its inside)\n") != std::string::npos);
}

TEST_CASE(
    "the JSON summary's records as counted: beside the counters, over the same recorded steps, with how "
    "they were seen",
    "[sinks][json]") {
  const json plain = json::parse(json_summary({traceml_test::mixed_run()}))["runs"][0]["summary"];
  CHECK_FALSE(plain["gpu"].contains("records_as_counted"));  // not modelled: no figure, and null shares
  CHECK(
      phase_named(plain, "forward")["counters"]["agreement_on_recorded"]["kernel_records_as_counted_share"].is_null());

  const json s = json::parse(json_summary({traceml_test::mixed_run_as_counted()}))["runs"][0]["summary"];
  CHECK(s["gpu"]["records_as_counted"]["sample_interval_us"].get<double>() == Approx(100));
  CHECK(s["gpu"]["records_as_counted"]["launch_engine_us"].get<double>() == Approx(1.5));
  const auto& fa = phase_named(s, "forward")["counters"]["agreement_on_recorded"];
  CHECK(fa["steps"] == 1);
  CHECK(fa["kernel_records_busy_share"].get<double>() == Approx(6.0 / 11));
  CHECK(fa["kernel_records_as_counted_share"].get<double>() == Approx(6.8 / 11));
  CHECK(fa["counters_busy_share"].get<double>() == Approx(0.6));
  const auto& ba = phase_named(s, "backward")["counters"]["agreement_on_recorded"];
  CHECK(ba["kernel_records_as_counted_share"].get<double>() == Approx(12.4 / 17));
  CHECK(phase_named(s, "optimizer")["counters"]["agreement_on_recorded"]["kernel_records_as_counted_share"]
            .get<double>() == Approx(0.9 / 2.5));
  // The dataloader: records 0 of its 1 ms, as counted 0.2 (its neighbours leak in at its edges).
  CHECK(phase_named(s, "dataloader")["counters"]["agreement_on_recorded"]["kernel_records_as_counted_share"]
            .get<double>() == Approx(0.2));
  // The eval phase never ran on the recorded step: no agreement at all, modelled or not.
  CHECK(phase_named(s, "eval")["counters"]["agreement_on_recorded"]["kernel_records_as_counted_share"].is_null());
  CHECK(s["gpu"]["step_counters"]["agreement_on_recorded"]["kernel_records_as_counted_share"].get<double>() ==
        Approx(21.5 / 31.5));
}

TEST_CASE("a JSONL line has kernel fields only for a recorded step, busy + idle = window", "[sinks][jsonl]") {
  const auto run = traceml_test::mixed_run();
  const json rec = json::parse(step_jsonl_line("mixed", run.steps[5]));
  const auto& g = rec["gpu"];
  CHECK(g["kernels_measured"] == true);
  CHECK(g["gpu_span_ms"].get<double>() == Approx(31.5));
  CHECK(g["window_ms"].get<double>() == Approx(31.5));
  CHECK(g["busy_ms"].get<double>() == Approx(18.5));
  CHECK(g["idle_ms"].get<double>() == Approx(13));
  CHECK(g["kernel_count"] == 510);
  for (const auto& p : g["phases"])
    CHECK(p["busy_ms"].get<double>() + p["idle_ms"].get<double>() == Approx(p["window_ms"].get<double>()));
  const auto& fwd = g["phases"][1];
  REQUIRE(fwd["name"] == "forward");
  CHECK(fwd["microbatch"] == 0);
  CHECK(fwd["window_ms"].get<double>() == Approx(5.5));
  CHECK(fwd["busy_ms"].get<double>() == Approx(3));
  REQUIRE(fwd["kernels"].size() == 2);
  CHECK(fwd["kernels"][0]["name"] == "gemm");
  CHECK(fwd["kernels"][0]["count"] == 60);
  CHECK(fwd["kernels"][0]["total_ms"].get<double>() == Approx(1.8));

  const json plain = json::parse(step_jsonl_line("mixed", run.steps[4]));
  const auto& u = plain["gpu"];
  CHECK(u["kernels_measured"] == false);
  CHECK(u["gpu_span_ms"].get<double>() == Approx(20.5));
  for (const char* f : {"window_ms", "busy_ms", "idle_ms", "kernel_ms", "kernel_count", "memcpy_ms"})
    CHECK_FALSE(u.contains(f));  // not measured, so not written as zeros
  CHECK(u["phases"][1]["gpu_span_ms"].get<double>() == Approx(3.5));
  CHECK_FALSE(u["phases"][1].contains("kernels"));
}

TEST_CASE("a JSONL line has hardware counters on every sampled step, recorded or not", "[sinks][jsonl]") {
  const auto run = traceml_test::mixed_run();
  const json plain = json::parse(step_jsonl_line("mixed", run.steps[4]));  // sampled, not recorded
  const auto& u = plain["gpu"]["counters"];
  CHECK(u["covered_ms"].get<double>() == Approx(20.5));  // every window covered whole
  CHECK(u["samples"] == 1025);                           // one per 20 us
  CHECK(u["busy_share"].get<double>() == Approx(12.9 / 20.5));
  const auto& f = plain["gpu"]["phases"][1]["counters"];
  REQUIRE(plain["gpu"]["phases"][1]["name"] == "forward");
  CHECK(f["covered_ms"].get<double>() == Approx(3.5));
  CHECK(f["samples"] == 175);
  CHECK(f["busy_share"].get<double>() == Approx(0.5));
  CHECK(f["sm_active_share"].get<double>() == Approx(0.25));
  CHECK(f["tensor_share"].get<double>() == Approx(0.2));
  CHECK(f["dram_share"].get<double>() == Approx(0.1));

  const json rec = json::parse(step_jsonl_line("mixed", run.steps[5]));  // recorded and sampled
  CHECK(rec["gpu"]["counters"]["covered_ms"].get<double>() == Approx(31.5));
  CHECK(rec["gpu"]["counters"]["samples"] == 1575);
  CHECK(rec["gpu"]["counters"]["busy_share"].get<double>() == Approx(19.5 / 31.5));
  CHECK(rec["gpu"]["phases"][1]["counters"]["busy_share"].get<double>() == Approx(0.6));
  CHECK(rec["gpu"]["phases"][1]["busy_ms"].get<double>() == Approx(3));  // the records' own figure beside it

  const json unsampled = json::parse(step_jsonl_line("mixed", run.steps[6]));
  CHECK_FALSE(unsampled["gpu"].contains("counters"));  // not measured, so not written as zeros
  for (const auto& p : unsampled["gpu"]["phases"]) CHECK_FALSE(p.contains("counters"));
}

TEST_CASE(
    "a rank of a data-parallel run says so in every output: the summary, every JSONL line, the trace's "
    "processes apart from every other rank's",
    "[sinks][rank]") {
  auto run = traceml_test::mixed_run();
  const json single = json::parse(json_summary({run}))["runs"][0];
  CHECK_FALSE(single.contains("rank"));  // not distributed: no rank anywhere
  CHECK_FALSE(json::parse(step_jsonl_line("mixed", run.steps[5])).contains("rank"));

  run.rank = rank_identity{2, 4};
  const json r = json::parse(json_summary({run}))["runs"][0];
  CHECK(r["rank"] == 2);
  CHECK(r["world_size"] == 4);
  for (const auto& st : run.steps) CHECK(json::parse(step_jsonl_line("mixed", st, run.rank))["rank"] == 2);

  std::vector<span_record> spans(1);
  spans[0] = {1'000'000, 9'000'000, "step", 0, -1, 0, phase_kind::step, 0};
  std::vector<gpu_activity> gpu(1);
  gpu[0] = {gpu_activity::type::kernel, "gemm", 3'000'000, 4'000'000, 1, 7, 0, 0, -1, phase_kind::step, "step"};
  // Two ranks' traces: their events put together are one trace with a host and a GPU process per rank.
  std::set<int> pids;
  std::map<int, std::string> names;
  for (int rank : {0, 1}) {
    chrome_trace_extras extras;
    extras.rank = rank_identity{rank, 2};
    const json doc = json::parse(chrome_trace("run", spans, gpu, extras));
    CHECK(doc["otherData"]["rank"] == rank);
    CHECK(doc["otherData"]["world_size"] == 2);
    for (const auto& e : doc["traceEvents"]) {
      pids.insert(e["pid"].get<int>());
      if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"].get<int>()] = e["args"]["name"];
    }
  }
  CHECK(pids == std::set<int>{1, 101, 1001, 1101});  // rank r: host 1 + 1000 r, GPU d 100 + d + 1000 r
  CHECK(names[1] == "rank 0: traceml CPU: run");
  CHECK(names[1101] == "rank 1: GPU 1");
  // Not distributed: the numbers and names of one process, as before.
  const json plain = json::parse(chrome_trace("run", spans, gpu));
  CHECK_FALSE(plain["otherData"].contains("rank"));
  for (const auto& e : plain["traceEvents"]) CHECK((e["pid"] == 1 || e["pid"] == 101));
}

TEST_CASE(
    "the rank comes from RANK and WORLD_SIZE as torchrun sets them - values that are not a rank are said "
    "once and left out",
    "[sinks][rank]") {
  reset_diagnostics(/*quiet=*/true);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  CHECK_FALSE(rank_from_environment().distributed());
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  CHECK(rank_from_environment().rank == 3);
  CHECK(rank_from_environment().world_size == 8);
  CHECK(diagnostic_messages().empty());
  for (const auto& [rank, world] : std::vector<std::pair<const char*, const char*>>{
           {"8", "8"}, {"-1", "8"}, {"1.5", "8"}, {"x", "8"}, {"1", "0"}, {"99999999999", "99999999999"}}) {
    INFO(rank << " of " << world);
    setenv("RANK", rank, 1);
    setenv("WORLD_SIZE", world, 1);
    CHECK_FALSE(rank_from_environment().distributed());
  }
  setenv("RANK", "0", 1);
  unsetenv("WORLD_SIZE");
  CHECK_FALSE(rank_from_environment().distributed());  // half of it is not enough
  const auto msgs = diagnostic_messages();
  REQUIRE(msgs.size() == 1);  // said once
  CHECK(msgs[0].find("RANK=8 WORLD_SIZE=8 is not a rank of a run (need whole numbers, 0 <= RANK < WORLD_SIZE)") !=
        std::string::npos);
  unsetenv("RANK");
}

TEST_CASE("the Chrome trace parses and has CPU spans, GPU tracks and launch flows", "[sinks][trace]") {
  std::vector<span_record> spans(2);
  spans[0] = {1'000'000, 9'000'000, "step", 0, -1, 0, phase_kind::step, 0};
  spans[1] = {2'000'000, 5'000'000, "forward", 0, 0, 0, phase_kind::forward, 0};
  std::vector<gpu_activity> gpu(3);
  gpu[0] = {gpu_activity::type::kernel, "gemm", 3'000'000, 4'000'000, 0, 7, 0, 0, 0, phase_kind::forward, "forward"};
  gpu[1] = {gpu_activity::type::kernel, "relu", 4'000'000, 4'500'000, 0, 7, 0, 0, 0, phase_kind::forward, "forward"};
  gpu[2] = {gpu_activity::type::memcpy, "memcpy HtoD", 1'500'000, 1'600'000, 0, 8, 4096, -1, -1, phase_kind::user, ""};
  const json doc = json::parse(chrome_trace("run", spans, gpu));
  int cpu_x = 0, gpu_x = 0, flows_s = 0, flows_f = 0;
  bool gpu_process_named = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == 1) ++cpu_x;
    if (e["ph"] == "X" && e["pid"] == 100) ++gpu_x;
    if (e["ph"] == "s") ++flows_s;
    if (e["ph"] == "f") ++flows_f;
    if (e["ph"] == "M" && e["pid"] == 100 && e["name"] == "process_name") gpu_process_named = true;
    if (e["ph"] == "X" && e["name"] == "forward") {
      CHECK(e["ts"].get<double>() == Approx(1000));  // µs after the first record (the step at 1 ms)
      CHECK(e["dur"].get<double>() == Approx(3000));
      CHECK(e["args"]["microbatch"] == 0);
    }
    if (e["ph"] == "X" && e["name"] == "memcpy HtoD") CHECK(e["args"]["bytes"] == 4096);
  }
  CHECK(cpu_x == 2);
  CHECK(gpu_x == 3);
  CHECK(flows_s == 1);  // one arrow per (step, micro-batch, phase), to its first kernel
  CHECK(flows_f == 1);
  CHECK(gpu_process_named);
}

TEST_CASE("the Chrome trace's extras: OS thread ids and names, sort order, GPU memory counters", "[sinks][trace]") {
  // Threads 0 and 1 are known to the OS as 4242 ("trainer") and 4243 (unnamed); thread 2 has no
  // identity (past the recorder's bound, or a caller that passed none) and keeps its index.
  std::vector<span_record> spans(4);
  spans[0] = {1'000'000, 9'000'000, "step", 0, -1, 0, phase_kind::step, 0};
  spans[1] = {2'000'000, 5'000'000, "forward", 0, -1, 0, phase_kind::forward, 0};
  spans[2] = {2'500'000, 3'000'000, "dataloader", 0, -1, 1, phase_kind::dataloader, 0};
  spans[3] = {3'000'000, 3'500'000, "prefetch", 0, -1, 2, phase_kind::user, 0};
  std::vector<gpu_activity> gpu(2);
  gpu[0] = {gpu_activity::type::kernel, "gemm", 3'000'000, 4'000'000, 1, 7, 0, 0, -1, phase_kind::forward, "forward"};
  gpu[1] = {gpu_activity::type::kernel, "relu", 4'000'000, 4'500'000, 0, 9, 0, 0, -1, phase_kind::forward, "forward"};
  chrome_trace_extras extras;
  extras.coverage = "1 of 1 steps";
  extras.threads = {{0, 4242, "trainer"}, {1, 4243, ""}};
  extras.memory = {{0, 1'000'000, {3 << 20, 4 << 20}}, {1, 9'000'000, {-1, 5 << 20}}, {2, 10'000'000, {-1, -1}}};
  const json doc = json::parse(chrome_trace("run", spans, gpu, extras));
  CHECK(doc["otherData"]["steps"] == "1 of 1 steps");
  std::map<std::uint64_t, std::string> names;
  std::map<std::uint64_t, std::int64_t> thread_order;
  std::map<int, std::int64_t> process_order;
  std::map<std::pair<int, std::uint64_t>, std::int64_t> stream_order;
  std::map<std::string, std::uint64_t> tid_of;
  std::vector<json> counters;
  std::uint64_t flow_tid = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["pid"] == 1 && e["name"] == "thread_name") names[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["pid"] == 1 && e["name"] == "thread_sort_index")
      thread_order[e["tid"]] = e["args"]["sort_index"];
    if (e["ph"] == "M" && e["pid"] != 1 && e["name"] == "thread_sort_index")
      stream_order[{e["pid"].get<int>(), e["tid"].get<std::uint64_t>()}] = e["args"]["sort_index"];
    if (e["ph"] == "M" && e["name"] == "process_sort_index") process_order[e["pid"]] = e["args"]["sort_index"];
    if (e["ph"] == "X" && e["pid"] == 1) tid_of[e["name"]] = e["tid"];
    if (e["ph"] == "s") flow_tid = e["tid"];
    if (e["ph"] == "C") counters.push_back(e);
  }
  CHECK(tid_of ==
        std::map<std::string, std::uint64_t>{{"step", 4242}, {"forward", 4242}, {"dataloader", 4243}, {"prefetch", 2}});
  CHECK(flow_tid == 4242);  // the launch arrow starts on the OS thread too
  CHECK(names == std::map<std::uint64_t, std::string>{{4242, "trainer"}, {4243, "thread 1"}, {2, "thread 2"}});
  CHECK(thread_order == std::map<std::uint64_t, std::int64_t>{{4242, 0}, {4243, 1}, {2, 2}});
  // Host first, then the GPUs by device (device 0 holds the memory counter), streams by id.
  CHECK(process_order == std::map<int, std::int64_t>{{1, 0}, {100, 1}, {101, 2}});
  CHECK(stream_order == std::map<std::pair<int, std::uint64_t>, std::int64_t>{{{100, 9}, 9}, {{101, 7}, 7}});
  REQUIRE(counters.size() == 2);  // the step with no known peak is left out
  CHECK(counters[0]["pid"] == 100);
  CHECK(counters[0]["ts"].get<double>() == Approx(0));
  CHECK(counters[0]["args"]["allocated"] == 3 << 20);
  CHECK(counters[0]["args"]["reserved"] == 4 << 20);
  CHECK(counters[1]["ts"].get<double>() == Approx(8000));
  CHECK_FALSE(counters[1]["args"].contains("allocated"));  // unknown, not -1
  CHECK(counters[1]["args"]["reserved"] == 5 << 20);

  SECTION("an OS id reused by a later thread is named once") {
    extras.threads = {{0, 4242, "trainer"}, {1, 4242, "worker"}, {2, 77, "x"}};
    int named = 0;
    const json reused = json::parse(chrome_trace("run", spans, gpu, extras));
    for (const auto& e : reused["traceEvents"])
      named += e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 4242;
    CHECK(named == 1);
  }
  SECTION("without extras: thread indices, no counters, the process order still fixed") {
    int c = 0, sort = 0;
    const json plain = json::parse(chrome_trace("run", spans, gpu));
    for (const auto& e : plain["traceEvents"]) {
      c += e["ph"] == "C";
      sort += e["ph"] == "M" && e["name"] == "process_sort_index";
      if (e["ph"] == "X" && e["name"] == "dataloader") CHECK(e["tid"] == 1);
    }
    CHECK(c == 0);
    CHECK(sort == 3);
  }
}

TEST_CASE("an output that cannot be written says so once and returns false", "[sinks][errors]") {
  reset_diagnostics(true);
  const auto run = sample_run();
  SECTION("missing directory") {
    CHECK_FALSE(write_json_summary("/nonexistent-traceml-dir/summary.json", {run}));
    CHECK_FALSE(write_json_summary("/nonexistent-traceml-dir/summary.json", {run}));
    const auto msgs = diagnostic_messages();
    REQUIRE(msgs.size() == 1);
    CHECK(msgs[0].find("/nonexistent-traceml-dir/summary.json") != std::string::npos);
    CHECK(msgs[0].find("No such file or directory") != std::string::npos);
  }
  SECTION("a full disk") {
    CHECK_FALSE(write_chrome_trace("/dev/full", "run", {}, {}));
    const auto msgs = diagnostic_messages();
    REQUIRE(msgs.size() == 1);
    CHECK(msgs[0].find("No space left on device") != std::string::npos);
    CHECK(std::filesystem::exists("/dev/full"));  // a device is not the output's to remove
  }
  SECTION("a write cut short leaves no partial file") {
    // RLIMIT_FSIZE of 1 KiB with SIGXFSZ ignored: the summary's write fails part-way (EFBIG).
    const auto path = traceml_test::temp_path("cut_summary.json");
    std::filesystem::remove(path);
    rlimit before{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &before) == 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = before;
    small.rlim_cur = 1024;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    const bool written = write_json_summary(path, {run});
    setrlimit(RLIMIT_FSIZE, &before);
    std::signal(SIGXFSZ, old_handler);
    CHECK_FALSE(written);
    CHECK_FALSE(std::filesystem::exists(path));
    const auto msgs = diagnostic_messages();
    REQUIRE(msgs.size() == 1);
    CHECK(msgs[0].find("File too large") != std::string::npos);
  }
}

TEST_CASE("write_json_summary writes the file it was asked to", "[sinks][json]") {
  const auto path = traceml_test::temp_path("summary.json");
  REQUIRE(write_json_summary(path, {sample_run()}));
  CHECK(json::parse(slurp(path))["runs"][0]["name"] == "1x4");
  std::remove(path.c_str());
}

TEST_CASE("the table's hardware-counter block: sampled shares per phase, and the steps they rest on",
          "[sinks][table][counters]") {
  const auto run = traceml_test::mixed_run();
  const auto table = format_table(run);
  const auto at = table.find("\nhardware counters ");
  REQUIRE(at != std::string::npos);
  const auto block = table.substr(at + 1);  // under the main table, whose rows keep their 13 cells
  CHECK(table_row(table, "forward").size() == 13);
  // busy ms | busy % SM % tensor % DRAM % | rec. counters % rec. kernels %
  CHECK(table_row(block, "forward") ==
        std::vector<std::string>{"3.844", "51.6", "25.0", "20.0", "10.0", "60.0", "54.5"});
  const auto bwd = table_row(block, "backward");
  REQUIRE(bwd.size() == 7);
  CHECK(bwd[1] == "78.4");  // (0.8 x 88 + 0.7 x 17) / 105
  CHECK(bwd[2] == "60.0");
  // eval ran on no recorded step: nothing to hold the sources against.
  CHECK(table_row(block, "eval") == std::vector<std::string>{"777.8us", "100.0", "90.0", "80.0", "20.0", "-", "-"});
  CHECK(table_row(block, "step") == std::vector<std::string>{"14.411", "64.0", "43.9", "35.3", "23.9", "61.9", "58.7"});
  CHECK(block.find(
            "busy ms, busy/SM/tensor/DRAM % of the sampled GPU window: 9 of 10 steps (sampled, hardware counters); "
            "rec. counters/kernels %: GPU busy from counters and from kernel records on the same 1 recorded step; "
            "samples covered 100.0% of the step's GPU window\n") != std::string::npos);
  // The kernel records' note is the same as without counters.
  CHECK(table.find("kernel ms, busy/idle % of the GPU window, kernels/step: 1 of 10 steps (recorded, CUPTI); recording "
                   "cost +45.8% per recorded step (median of each against the untraced steps before it)\n") < at);
  SECTION("records as counted: a third agreement column, over the same recorded step, and how they were seen") {
    const auto modelled = format_table(traceml_test::mixed_run_as_counted());
    const auto m = modelled.substr(modelled.find("\nhardware counters ") + 1);
    CHECK(m.find("rec. as counted %") != std::string::npos);
    CHECK(table_row(m, "forward") ==
          std::vector<std::string>{"3.844", "51.6", "25.0", "20.0", "10.0", "60.0", "54.5", "61.8"});  // 6.8 / 11
    CHECK(table_row(m, "eval") == std::vector<std::string>{"777.8us", "100.0", "90.0", "80.0", "20.0", "-", "-", "-"});
    CHECK(table_row(m, "step").back() == "68.3");  // 21.5 / 31.5
    CHECK(m.find("; rec. as counted %: the step's records as the counters count (100 us samples, 1.50 us of engine "
                 "time per launch)") != std::string::npos);
    CHECK(block.find("as counted") == std::string::npos);  // not modelled: no such column
    auto no_launch = traceml_test::mixed_run_as_counted();
    no_launch.summary.launch_engine_us = 0;  // the engine's launch time not given: the column would repeat the records
    CHECK(format_table(no_launch).find("as counted") == std::string::npos);
  }
  SECTION("every share within [0, 100]") {
    for (const char* name : {"dataloader", "forward", "backward", "optimizer", "eval", "step"}) {
      const auto row = table_row(block, name);
      REQUIRE(row.size() == 7);
      for (std::size_t i = 1; i < row.size(); ++i) {
        if (row[i] == "-") continue;
        INFO(name << " column " << i);
        CHECK(std::stod(row[i]) >= 0);
        CHECK(std::stod(row[i]) <= 100);
      }
    }
  }
  SECTION("a share past its whole prints as 100.0, a counter not sampled as -") {
    auto odd = run;
    for (auto& p : odd.summary.phases)
      if (p.name == "forward") {
        p.counters->busy_share = 1.004;
        p.counters->tensor_share = -1;
      }
    const auto t = format_table(odd);
    const auto row = table_row(t.substr(t.find("\nhardware counters ") + 1), "forward");
    REQUIRE(row.size() == 7);
    CHECK(row[1] == "100.0");
    CHECK(row[3] == "-");
  }
  SECTION("counters without kernel records: no agreement columns") {
    auto unrecorded = run;
    for (auto& st : unrecorded.steps) st.gpu->kernels_measured = false;
    unrecorded.summary = summarize_run(unrecorded.steps, 2);
    const auto t = format_table(unrecorded);
    const auto b = t.substr(t.find("\nhardware counters ") + 1);
    CHECK(b.find("rec. counters %") == std::string::npos);
    CHECK(table_row(b, "forward").size() == 5);
    CHECK(b.find("9 of 10 steps (sampled, hardware counters); samples covered") != std::string::npos);
  }
  SECTION("no counters: no block") {
    auto plain = run;
    for (auto& st : plain.steps) {
      st.gpu->total.counters = {};
      for (auto& p : st.gpu->phases) p.facts.counters = {};
    }
    plain.summary = summarize_run(plain.steps, 2);
    const auto t = format_table(plain);
    CHECK(t.find("hardware counters ") == std::string::npos);
    CHECK(t.find("SM %") == std::string::npos);
    CHECK(t.find("(sampled, hardware counters)") == std::string::npos);
  }
}
