// A step with more phases on one thread than its ring holds: the ring keeps room for the step's own
// record, so the step is recorded, computed from the phases that fit, and says how many it lost (in
// its step_result, its JSONL line and the JSON summary's steps); the summary's dropped_records is
// the run's total, the table and the JSON count the steps that lost phases, and the one message
// names the first such step and its count.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <traceml/traceml.hpp>

#include "test_helpers.hpp"

using namespace traceml;
using traceml_test::contains;
using traceml_test::reset_recorder;
using traceml_test::temp_path;

namespace {

std::size_t messages_containing(const std::string& part) {
  std::size_t n = 0;
  for (const auto& m : diagnostic_messages())
    if (contains(m, part)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a step with more phases than its ring holds is kept and says how many it lost", "[profiler][ring]") {
  reset_recorder();
  constexpr int steps = 5;
  constexpr std::uint64_t phases_per_step = 20000;  // > thread_ring::capacity: every step overflows
  constexpr std::uint64_t kept = detail::thread_ring::phase_room;
  constexpr std::uint64_t lost = phases_per_step - kept;
  static_assert(phases_per_step > detail::thread_ring::capacity);

  const std::string jsonl = temp_path("ring_overflow_steps.jsonl");
  const std::string json = temp_path("ring_overflow_summary.json");
  profiler_options opts;
  opts.run_name = "ring_overflow";
  opts.print_table = false;
  opts.warmup_steps = 1;
  opts.jsonl_path = jsonl;
  opts.json_path = json;
  profiler prof(opts);
  for (int s = 0; s < steps; ++s) {
    TRACEML_STEP();
    { TRACEML_PHASE(dataloader); }  // one phase before the flood: kept, counted once
    for (std::uint64_t i = 0; i < phases_per_step - 1; ++i) {
      TRACEML_PHASE(forward);
    }
  }
  const run_result& r = prof.finish();

  // Every step is recorded, each with the phases that fit and the count of those that did not.
  REQUIRE(r.summary.steps == steps);
  REQUIRE(r.steps.size() == steps);
  std::uint64_t sum = 0;
  for (int s = 0; s < steps; ++s) {
    const step_result& st = r.steps[static_cast<std::size_t>(s)];
    INFO("step " << s);
    CHECK(st.step == s);
    CHECK(st.lost_phases == lost);
    sum += st.lost_phases;
    const phase_time* dl = st.find(phase_kind::dataloader, "dataloader");
    const phase_time* fw = st.find(phase_kind::forward, "forward");
    REQUIRE(dl != nullptr);
    REQUIRE(fw != nullptr);
    CHECK(dl->count == 1);
    CHECK(static_cast<std::uint64_t>(fw->count) == kept - 1);  // the rest of the ring's phase room
    CHECK(st.wall_ms > 0);
  }
  CHECK(r.summary.dropped_records == sum);
  CHECK(r.summary.dropped_records == steps * lost);
  CHECK(r.summary.steps_with_lost_phases == steps);
  CHECK(r.summary.measured_steps_with_lost_phases == steps - 1);  // one warm-up step
  CHECK(r.summary.step_ms.count == steps - 1);

  // Said once, with the first step's number and count.
  CHECK(messages_containing("full ring") == 1);
  CHECK(messages_containing("step 0 lost " + std::to_string(lost) + " phase records to a full ring") == 1);

  // Each JSONL line carries its step's loss.
  std::ifstream lines(jsonl);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    INFO(line.substr(0, 200));
    CHECK(j.at("step").get<int>() == n);
    CHECK(j.at("lost_phases").get<std::uint64_t>() == lost);
    ++n;
  }
  CHECK(n == steps);

  // The JSON summary: the run's total, the steps that lost phases, each step's loss.
  std::ifstream in(json);
  const auto doc = nlohmann::json::parse(in);
  const auto& run = doc.at("runs").at(0);
  CHECK(run.at("summary").at("dropped_records").get<std::uint64_t>() == steps * lost);
  CHECK(run.at("summary").at("steps_with_lost_phases").get<std::uint64_t>() == steps);
  CHECK(run.at("summary").at("measured_steps_with_lost_phases").get<std::uint64_t>() == steps - 1);
  REQUIRE(run.at("steps").size() == static_cast<std::size_t>(steps));
  for (const auto& st : run.at("steps")) CHECK(st.at("lost_phases").get<std::uint64_t>() == lost);

  // The table's warning names the count and the steps its figures rest on.
  const std::string table = format_table(r);
  INFO(table);
  CHECK(contains(table, "warning: " + std::to_string(steps * lost) +
                            " CPU records dropped (ring full): 5 of 5 steps "
                            "lost phases to a full ring, 4 of the 4 measured"));
  std::remove(jsonl.c_str());
  std::remove(json.c_str());
}

TEST_CASE("a step that fits its ring loses nothing and says so", "[profiler][ring]") {
  reset_recorder();
  profiler_options opts;
  opts.print_table = false;
  opts.warmup_steps = 0;
  profiler prof(opts);
  for (int s = 0; s < 3; ++s) {
    TRACEML_STEP();
    for (std::size_t i = 0; i < detail::thread_ring::phase_room - 1; ++i) {
      TRACEML_PHASE(forward);
    }
    TRACEML_PHASE(backward);  // the last phase that fits; the step's record takes the reserve
  }
  const run_result& r = prof.finish();
  REQUIRE(r.steps.size() == 3);
  for (const auto& st : r.steps) {
    CHECK(st.lost_phases == 0);
    REQUIRE(st.find(phase_kind::forward, "forward") != nullptr);
    CHECK(static_cast<std::size_t>(st.find(phase_kind::forward, "forward")->count) ==
          detail::thread_ring::phase_room - 1);
  }
  CHECK(r.summary.dropped_records == 0);
  CHECK(r.summary.steps_with_lost_phases == 0);
  CHECK(messages_containing("full ring") == 0);
  CHECK(!contains(format_table(r), "ring full"));
  CHECK(contains(step_jsonl_line("x", r.steps[0]), "\"lost_phases\":0"));
}

TEST_CASE("a step scope that closes on a full ring still ends its step", "[scopes][ring]") {
  reset_recorder();
  // Without a profiler, the ring is not drained at the step's end: the step record still has room
  // after a flood of phases, and the drop count is the phases'.
  {
    TRACEML_STEP();
    for (std::size_t i = 0; i < detail::thread_ring::capacity; ++i) {
      TRACEML_PHASE(forward);
    }
  }
  std::size_t steps_kept = 0, phases_kept = 0;
  const auto dropped =
      detail::drain_all([&](const span_record& r) { (r.kind == phase_kind::step ? steps_kept : phases_kept) += 1; });
  CHECK(steps_kept == 1);
  CHECK(phases_kept == detail::thread_ring::phase_room);
  CHECK(dropped == detail::thread_ring::reserved);
}
