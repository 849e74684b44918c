// The attribution stage (attribution_stage.hpp): raw deliveries in, one report per step out.
// Synthetic deliveries mix recorded steps (attributed: kernels, busy, idle, window) and unrecorded
// ones (kernels_measured false, GPU time from CUDA events only); records a round cannot place wait
// for the next delivery.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "synthetic_records.hpp"
#include "traceml/gpu/attribution_stage.hpp"
#include "traceml/gpu/attribution_worker.hpp"

using namespace traceml;

namespace {

constexpr std::uint32_t stream = 7;

span_record span(phase_kind k, const char* name, std::int32_t step, std::int64_t b, std::int64_t e) {
  return traceml_test::span_of(k, name, step, b, e);
}

timed_span timed(const span_record& s, std::int64_t event_ns, std::uint64_t begin_marker = 0,
                 std::uint64_t end_marker = 0) {
  return timed_span{marked_span{s, begin_marker, end_marker}, event_ns, -1, {}};
}

gpu_record kernel(const char* name, std::int64_t b, std::int64_t e) {
  return traceml_test::kernel_record(name, b, e, stream);
}

marker_time marker(std::uint64_t seq, std::int64_t b, std::int64_t e) { return marker_time{seq, 0, stream, b, e}; }

const phase_gpu_facts* forward_of(const step_gpu_report& r) {
  for (auto& p : r.phases)
    if (std::string(p.name) == "forward") return &p;
  return nullptr;
}

/// Step 0: unrecorded, its forward phase run twice, timed by events. Step 1: recorded, with
/// markers (seq 1-4) and events. A kernel of step 1's forward and one launched after step 1 (it
/// belongs to step 2, whose markers have not arrived).
gpu_delivery first_delivery() {
  gpu_delivery d;
  step_activity s0;
  s0.step = 0;
  s0.recorded = false;
  s0.spans = {timed(span(phase_kind::step, "step", 0, 0, 900), 9000),
              timed(span(phase_kind::forward, "forward", 0, 100, 200), 4000),
              timed(span(phase_kind::forward, "forward", 0, 300, 400), 1000)};
  s0.memory = memory_sample{111, 222};
  s0.dropped_records = 3;
  step_activity s1;
  s1.step = 1;
  s1.recorded = true;
  s1.spans = {timed(span(phase_kind::step, "step", 1, 1000, 2000), 8000, 1, 4),
              timed(span(phase_kind::forward, "forward", 1, 1100, 1500), 5000, 2, 3)};
  d.steps = {s0, s1};
  d.markers = {marker(1, 1200, 1210), marker(2, 1300, 1310), marker(3, 1600, 1610), marker(4, 1900, 1910)};
  d.records = {kernel("gemm", 1400, 1500), kernel("late", 2500, 2600)};
  return d;
}

/// Step 2: unrecorded, timed by events only.
gpu_delivery quiet_delivery() {
  step_activity u;
  u.step = 2;
  u.spans = {timed(span(phase_kind::step, "step", 2, 2100, 2200), 700)};
  gpu_delivery quiet;
  quiet.steps = {u};
  return quiet;
}

/// Step 3: recorded, no events (span_ns from its markers, seq 5-8), after the leftover kernel.
gpu_delivery recorded_delivery() {
  step_activity s3;
  s3.step = 3;
  s3.recorded = true;
  s3.spans = {timed(span(phase_kind::step, "step", 3, 3000, 4000), -1, 5, 8),
              timed(span(phase_kind::forward, "forward", 3, 3100, 3500), -1, 6, 7)};
  gpu_delivery next;
  next.steps = {s3};
  next.markers = {marker(5, 2400, 2410), marker(6, 2450, 2460), marker(7, 2700, 2710), marker(8, 2800, 2810)};
  return next;
}

}  // namespace

TEST_CASE("unrecorded steps: GPU time from events, no kernel figures, memory and drops kept", "[stage]") {
  attribution_stage stage;
  const auto reports = stage.add(first_delivery());
  REQUIRE(reports.size() == 2);
  const auto& r = reports[0];
  CHECK(r.step == 0);
  CHECK_FALSE(r.kernels_measured);
  CHECK(r.total.span_ns == 9000);
  CHECK(r.total.window_ns == -1);
  CHECK(r.total.kernel_count == 0);
  CHECK(r.peak_allocated_bytes == 111);
  CHECK(r.peak_reserved_bytes == 222);
  CHECK(r.dropped_records == 3);
  REQUIRE(r.phases.size() == 1);  // one entry per (phase, micro-batch), its scopes summed
  CHECK(r.phases[0].facts.span_ns == 5000);
  CHECK(r.phases[0].facts.window_ns == -1);
  CHECK(r.phases[0].kernels.empty());
}

TEST_CASE("recorded steps: kernels and windows from markers, span_ns from the same events as every step", "[stage]") {
  attribution_stage stage;
  int rounds = 0;
  stage.set_round_tap([&](const attribution_input& in, const attribution_output&) {
    ++rounds;
    CHECK(in.spans.size() == 5);    // both steps: the unrecorded one claims records switched off late
    CHECK(in.markers.size() == 4);  // the recorded step's
  });
  const auto reports = stage.add(first_delivery());
  REQUIRE(reports.size() == 2);
  CHECK(rounds == 1);
  const auto& r = reports[1];
  CHECK(r.step == 1);
  CHECK(r.kernels_measured);
  CHECK(r.total.span_ns == 8000);  // events, not the markers' 1900 - 1210
  CHECK(r.total.kernel_count == 1);
  const auto* f = forward_of(r);
  REQUIRE(f);
  CHECK(f->facts.span_ns == 5000);
  CHECK(f->facts.kernel_count == 1);
  CHECK(f->facts.kernel_ns == 100);
  CHECK(f->facts.window_ns == 1600 - 1310);  // end marker's begin - begin marker's end
  CHECK(f->facts.busy_ns == 100);
  CHECK(f->facts.busy_ns + f->facts.idle_ns == f->facts.window_ns);
  REQUIRE(f->kernels.size() == 1);
  CHECK(f->kernels[0].name == "gemm");
  CHECK(stage.leftover_records() == 1);  // the kernel launched after step 1 waits for step 2
}

TEST_CASE("leftover records wait through unrecorded rounds and land in the next recorded step", "[stage]") {
  attribution_stage stage;
  int rounds = 0;
  stage.set_round_tap([&](const attribution_input&, const attribution_output&) { ++rounds; });
  stage.add(first_delivery());
  REQUIRE(stage.leftover_records() == 1);

  // An unrecorded step in between: a round runs for the leftover, which was launched after this
  // step too, so it stays for the next one.
  const auto q = stage.add(quiet_delivery());
  REQUIRE(q.size() == 1);
  CHECK_FALSE(q[0].kernels_measured);
  CHECK(q[0].total.span_ns == 700);
  CHECK(q[0].unattributed_kernels == 0);
  CHECK(rounds == 2);
  CHECK(stage.leftover_records() == 1);

  const auto reports = stage.add(recorded_delivery());
  REQUIRE(reports.size() == 1);
  CHECK(rounds == 3);
  const auto& r = reports[0];
  CHECK(r.kernels_measured);
  CHECK(r.total.span_ns == 2800 - 2410);
  const auto* f = forward_of(r);
  REQUIRE(f);
  CHECK(f->facts.kernel_count == 1);  // the leftover kernel, [2500, 2600]
  CHECK(f->facts.span_ns == 2700 - 2460);
  CHECK(f->facts.window_ns == 2700 - 2460);
  CHECK(f->facts.busy_ns == 100);
  CHECK(stage.leftover_records() == 0);
  CHECK(stage.leftover_markers() == 0);
}

TEST_CASE("records of an unrecorded step (recording switched off late) are neither kept nor unattributed", "[stage]") {
  attribution_stage stage;
  stage.add(first_delivery());
  REQUIRE(stage.leftover_records() == 1);  // [2500, 2600], launched after step 1
  gpu_delivery next;
  step_activity u;
  u.step = 2;
  u.spans = {timed(span(phase_kind::step, "step", 2, 2100, 3000), 700)};
  next.steps = {u};
  const auto reports = stage.add(next);
  REQUIRE(reports.size() == 1);
  CHECK_FALSE(reports[0].kernels_measured);
  CHECK(reports[0].total.kernel_count == 0);
  CHECK(reports[0].unattributed_kernels == 0);
  CHECK(stage.leftover_records() == 0);
}

TEST_CASE("kernels no step can claim are unattributed, also when the round begins with an unrecorded step", "[stage]") {
  attribution_stage stage;
  auto d = first_delivery();
  d.records.push_back(kernel("early", -100, -50));  // before every step of the round
  const auto reports = stage.add(d);
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].unattributed_kernels == 1);  // on the delivery's first report, step 0 (unrecorded)
  CHECK(reports[1].unattributed_kernels == 0);
  CHECK(stage.leftover_records() == 1);

  gpu_delivery last;  // the end of the run, no step left: what remains is unattributed
  last.final = true;
  const auto none = stage.add(last);
  CHECK(none.empty());
  CHECK(stage.leftover_records() == 0);
}

TEST_CASE("activities for the trace are kept only when asked", "[stage]") {
  attribution_stage stage;
  auto reports = stage.add(first_delivery());
  CHECK(reports[1].activities.empty());
  attribution_stage keeping;
  keeping.keep_activities(true);
  reports = keeping.add(first_delivery());
  REQUIRE(reports[1].activities.size() == 1);
  CHECK(std::string(reports[1].activities[0].name) == "gemm");
  CHECK(std::string(reports[1].activities[0].phase_name) == "forward");
  CHECK(reports[1].activities[0].step == 1);
}

TEST_CASE("a schedule's warm-up step claims its own records by its markers, and reports none of them",
          "[stage][schedule]") {
  // Step 0: warm-up (records on, markers 1-4), its kernel "warm" ran late on the GPU, while step 1
  // was already running on the CPU. Step 1: active (markers 5-8), kernel "hot" in its forward.
  step_activity warm;
  warm.step = 0;
  warm.discard_records = true;
  warm.schedule = schedule_slot{schedule_phase::warmup, 0, false};
  warm.spans = {timed(span(phase_kind::step, "step", 0, 0, 900), -1, 1, 4),
                timed(span(phase_kind::forward, "forward", 0, 100, 800), -1, 2, 3)};
  step_activity hot;
  hot.step = 1;
  hot.recorded = true;
  hot.schedule = schedule_slot{schedule_phase::active, 0, true};
  hot.spans = {timed(span(phase_kind::step, "step", 1, 1000, 2000), -1, 5, 8),
               timed(span(phase_kind::forward, "forward", 1, 1100, 1500), -1, 6, 7)};
  gpu_delivery d;
  d.steps = {warm, hot};
  d.markers = {marker(1, 1100, 1110), marker(2, 1120, 1130), marker(3, 1400, 1410), marker(4, 1420, 1430),
               marker(5, 1500, 1510), marker(6, 1520, 1530), marker(7, 1700, 1710), marker(8, 1720, 1730)};
  d.records = {kernel("warm", 1300, 1350), kernel("hot", 1600, 1650)};
  attribution_stage stage;
  stage.keep_activities(true);
  const auto reports = stage.add(d);
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].schedule.phase == schedule_phase::warmup);
  CHECK_FALSE(reports[0].kernels_measured);
  CHECK(reports[0].total.kernel_count == 0);
  CHECK(reports[0].activities.empty());
  CHECK(reports[0].unattributed_kernels == 0);
  CHECK(reports[1].schedule == (schedule_slot{schedule_phase::active, 0, true}));
  CHECK(reports[1].kernels_measured);
  CHECK(reports[1].total.kernel_count == 1);  // "warm", inside step 1's CPU window, is not in it
  REQUIRE(reports[1].activities.size() == 1);
  CHECK(std::string(reports[1].activities[0].name) == "hot");
  CHECK(reports[1].unattributed_kernels == 0);
  CHECK(stage.leftover_records() == 0);

  SECTION("a delivery holding only a warm-up step still runs a round: its records are not left over") {
    attribution_stage alone;
    gpu_delivery only_warm;
    only_warm.steps = {warm};
    only_warm.markers = {marker(1, 1100, 1110), marker(2, 1120, 1130), marker(3, 1400, 1410), marker(4, 1420, 1430)};
    only_warm.records = {kernel("warm", 1300, 1350)};
    int rounds = 0;
    alone.set_round_tap([&](const attribution_input&, const attribution_output&) { ++rounds; });
    const auto r = alone.add(only_warm);
    REQUIRE(r.size() == 1);
    CHECK(rounds == 1);
    CHECK(r[0].total.kernel_count == 0);
    CHECK(alone.leftover_records() == 0);
  }
}

TEST_CASE(
    "records as counted see across rounds: a step delivered alone reads its edges as in one round with "
    "its neighbours",
    "[stage][counters]") {
  // Step 0: forward (markers 2-3) whose last kernel ends just before the step does. Step 1: a short
  // dataloader window with no work of its own, then a kernel of step 1 right after it.
  const auto recorded_step = [](std::int32_t step, std::vector<timed_span> spans) {
    step_activity s;
    s.step = step;
    s.recorded = true;
    s.spans = std::move(spans);
    return s;
  };
  const auto step0 = recorded_step(0, {timed(span(phase_kind::step, "step", 0, 0, 1000), -1, 1, 4),
                                       timed(span(phase_kind::forward, "forward", 0, 10, 990), -1, 2, 3)});
  const auto step1 = recorded_step(1, {timed(span(phase_kind::step, "step", 1, 1000, 2000), -1, 5, 8),
                                       timed(span(phase_kind::dataloader, "dataloader", 1, 1003, 1062), -1, 6, 7)});
  const std::vector<marker_time> markers0 = {marker(1, 10, 12), marker(2, 20, 22), marker(3, 980, 982),
                                             marker(4, 990, 992)};
  const std::vector<marker_time> markers1 = {marker(5, 1000, 1002), marker(6, 1003, 1005), marker(7, 1060, 1062),
                                             marker(8, 1990, 1992)};
  const gpu_record tail = kernel("tail", 900, 978), next = kernel("next", 1070, 1400);
  const records_as_counted view{160, 5};  // markers and kernels begun 5 ns earlier, wherever they are counted

  gpu_delivery both;
  both.steps = {step0, step1};
  both.markers = markers0;
  both.markers.insert(both.markers.end(), markers1.begin(), markers1.end());
  both.records = {tail, next};
  attribution_stage one_round;
  one_round.counter_view(view);
  const auto together = one_round.add(both);
  REQUIRE(together.size() == 2);

  // Apart: step 1's kernel and markers arrive with step 0 (left over for step 1: one buffer of
  // CUPTI records held them all), step 0's kernel is gone before step 1.
  gpu_delivery first, second;
  first.steps = {step0};
  first.markers = both.markers;
  first.records = {tail, next};
  second.steps = {step1};
  attribution_stage two_rounds;
  two_rounds.counter_view(view);
  auto apart = two_rounds.add(first);
  for (auto& r : two_rounds.add(second)) apart.push_back(std::move(r));
  REQUIRE(apart.size() == 2);

  const auto phase_of = [](const step_gpu_report& r, const char* name) -> const gpu_facts& {
    for (const auto& p : r.phases)
      if (std::string(p.name) == name) return p.facts;
    FAIL("no phase " << name);
    return r.total;
  };
  const gpu_facts& data_together = phase_of(together[1], "dataloader");
  const gpu_facts& data_apart = phase_of(apart[1], "dataloader");
  CHECK(data_apart.busy_ns == 0);  // the records' own figure: nothing ran inside it
  // Step 0's last kernel leaks into the dataloader's first samples, delivered together or apart.
  CHECK(data_together.counted_busy_ns > 0);
  CHECK(data_apart.counted_busy_ns == data_together.counted_busy_ns);
  // And step 1's first kernel and markers into step 0's last samples, though they waited for step 1.
  CHECK(phase_of(apart[0], "forward").counted_busy_ns == phase_of(together[0], "forward").counted_busy_ns);
  CHECK(apart[0].total.counted_busy_ns == together[0].total.counted_busy_ns);
  CHECK(apart[1].total.counted_busy_ns == together[1].total.counted_busy_ns);
}

TEST_CASE("the attribution worker gives the stage's reports, in order, off the calling thread", "[stage][worker]") {
  // The three deliveries of the leftover case, through the worker: the reports must equal the stage's.
  const std::vector<gpu_delivery> deliveries = {first_delivery(), quiet_delivery(), recorded_delivery()};
  attribution_stage stage;
  std::vector<step_gpu_report> direct;
  for (const auto& d : deliveries)
    for (auto& r : stage.add(d)) direct.push_back(std::move(r));

  attribution_worker worker;
  const auto caller = std::this_thread::get_id();
  std::thread::id worker_thread;
  worker.set_round_tap(
      [&](const attribution_input&, const attribution_output&) { worker_thread = std::this_thread::get_id(); });
  std::vector<step_gpu_report> via;
  for (const auto& d : deliveries) {
    worker.submit(d);
    for (auto& r : worker.take_ready()) via.push_back(std::move(r));
  }
  gpu_delivery last;
  last.final = true;
  for (auto& r : worker.finish(last)) via.push_back(std::move(r));
  CHECK(worker_thread != caller);
  REQUIRE(via.size() == direct.size());
  for (std::size_t i = 0; i < via.size(); ++i) {
    CHECK(via[i].step == direct[i].step);
    CHECK(via[i].kernels_measured == direct[i].kernels_measured);
    CHECK(via[i].total.span_ns == direct[i].total.span_ns);
    CHECK(via[i].total.kernel_count == direct[i].total.kernel_count);
    CHECK(via[i].total.busy_ns == direct[i].total.busy_ns);
  }
  CHECK(via.back().step == 3);
  CHECK(via.back().total.kernel_count == 1);
}

TEST_CASE("the attribution worker measures its CPU on kernel records, not on unrecorded steps", "[stage][worker]") {
  // What the recording budget is charged (recording_budget::charge_processing): the worker's CPU on
  // deliveries that bring kernel records or finish a recorded step, and nothing for the events of
  // unrecorded steps.
  attribution_worker worker;
  const auto wait_for_step = [&](std::int32_t step, std::vector<step_gpu_report>& got) {
    for (int i = 0; i < 10000 && (got.empty() || got.back().step != step); ++i) {
      for (auto& r : worker.take_ready()) got.push_back(std::move(r));
      if (got.empty() || got.back().step != step) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE_FALSE(got.empty());
    REQUIRE(got.back().step == step);
  };
  std::vector<step_gpu_report> got;
  constexpr std::int32_t quiet_steps = 200;
  for (std::int32_t s = 0; s < quiet_steps; ++s) {
    step_activity u;
    u.step = s;
    u.spans.push_back(timed(span(phase_kind::step, "step", s, s * 1000, s * 1000 + 500), 400));
    gpu_delivery d;
    d.steps = {u};
    worker.submit(std::move(d));
  }
  wait_for_step(quiet_steps - 1, got);
  CHECK(got.size() == static_cast<std::size_t>(quiet_steps));
  CHECK(worker.take_record_cpu_ns() == 0);

  // A recorded step of 20,000 kernels in its forward phase: milliseconds of attribution.
  constexpr std::int32_t rec = quiet_steps;
  constexpr std::int64_t t0 = 1'000'000;
  step_activity r;
  r.step = rec;
  r.recorded = true;
  r.spans.push_back(timed(span(phase_kind::step, "step", rec, t0, t0 + 100'000), -1, 1, 4));
  r.spans.push_back(timed(span(phase_kind::forward, "forward", rec, t0 + 1'000, t0 + 99'000), -1, 2, 3));
  gpu_delivery d;
  d.steps = {r};
  d.markers = {marker(1, t0 + 10, t0 + 20), marker(2, t0 + 1'010, t0 + 1'020), marker(3, t0 + 98'000, t0 + 98'010),
               marker(4, t0 + 99'500, t0 + 99'510)};
  constexpr int kernels = 20000;
  for (int k = 0; k < kernels; ++k) d.records.push_back(kernel("gemm", t0 + 2'000 + 4 * k, t0 + 2'003 + 4 * k));
  worker.submit(std::move(d));
  wait_for_step(rec, got);
  CHECK(got.back().kernels_measured);
  CHECK(got.back().total.kernel_count == kernels);
  CHECK(worker.take_record_cpu_ns() > 0);
  CHECK(worker.take_record_cpu_ns() == 0);  // taken: the budget is charged once
  gpu_delivery last;
  last.final = true;
  (void)worker.finish(last);
}
