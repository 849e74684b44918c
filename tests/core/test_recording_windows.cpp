// Runs recorded by a schedule (gpu/recording_schedule.hpp): the summary's recording section with
// contiguous recorded steps and warm-up steps, the windows gathered from emitted steps
// (recording_window.hpp), and the profiler handing each window to on_trace_ready, fed by a
// synthetic GPU source that lays out its steps as the CUPTI source does under a schedule.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_helpers.hpp"
#include "traceml/gpu/kernel_name.hpp"
#include "traceml/gpu/recording_schedule.hpp"
#include "traceml/recording_window.hpp"

using namespace traceml;
using nlohmann::json;
using traceml_test::spin_for;
using namespace std::chrono_literals;

namespace {

/// A step of `wall` ms whose GPU report sits at `slot` of a schedule; active steps are recorded.
step_result scheduled_step(std::int32_t step, double wall, schedule_slot slot) {
  step_result st;
  st.step = step;
  st.wall_ms = wall;
  st.residual_ms = wall;
  step_gpu_report g;
  g.step = step;
  g.schedule = slot;
  g.kernels_measured = slot.phase == schedule_phase::active;
  if (g.kernels_measured) {  // one 1 us kernel in a 2 us window
    g.total.kernel_ns = 1000;
    g.total.kernel_count = 1;
    g.total.window_ns = 2000;
    g.total.busy_ns = 1000;
    g.total.idle_ns = 1000;
  }
  st.gpu = g;
  return st;
}

/// Kernel names need stable storage (activities point at them, as at the CUPTI source's).
const char* kernel_name(std::int32_t step) {
  static const char* names[] = {"k0",  "k1",  "k2",  "k3",  "k4",  "k5",  "k6",  "k7",  "k8",  "k9",
                                "k10", "k11", "k12", "k13", "k14", "k15", "k16", "k17", "k18", "k19"};
  return step >= 0 && step < 20 ? names[step] : "k?";
}

/// What the CUPTI source delivers under a schedule, one step late: warm-up and active steps ran with
/// records on (one kernel "k<step>" inside the forward phase; a warm-up step's is discarded), every
/// other step without records.
struct scheduled_source : gpu_source {
  explicit scheduled_source(recording_schedule s) : schedule(s) {}
  recording_schedule schedule;
  std::vector<std::vector<span_record>> ended;
  std::size_t delivered = 0;
  const char* name() const noexcept override { return "scheduled"; }
  void step_ended(std::int32_t step, const std::vector<span_record>& spans) override {
    ended.emplace_back();
    for (const auto& s : spans)
      if (s.step == step) ended.back().push_back(s);
  }
  gpu_delivery collect(bool final) override {
    gpu_delivery d;
    d.final = final;
    const std::size_t ready = final ? ended.size() : (ended.empty() ? 0 : ended.size() - 1);
    for (std::size_t i = delivered; i < ready; ++i) {
      step_activity a;
      for (const auto& s : ended[i]) {
        if (s.kind == phase_kind::microbatch) continue;
        a.step = s.step;
        a.spans.push_back(timed_span{marked_span{s, 0, 0}, -1, -1, {}});
      }
      a.schedule = schedule.at(a.step);
      a.recorded = a.schedule.phase == schedule_phase::active;
      a.discard_records = a.schedule.phase == schedule_phase::warmup;
      if (a.schedule.records_on())
        for (const auto& s : ended[i]) {
          if (s.kind != phase_kind::forward) continue;
          gpu_record k;  // no markers: placed by CPU time, inside the forward phase it started in
          k.begin_ns = s.begin_ns + 1000;
          k.end_ns = k.begin_ns + 5000;
          k.name = kernel_name(a.step);
          d.records.push_back(k);
        }
      d.steps.push_back(std::move(a));
    }
    delivered = ready;
    return d;
  }
  std::string status() const override { return "scheduled source: " + schedule.describe(); }
};

void one_step() {
  TRACEML_STEP();
  {
    TRACEML_PHASE(forward);
    spin_for(200us);
  }
  {
    TRACEML_PHASE(optimizer);
    spin_for(50us);
  }
}

struct seen_window {
  std::int32_t cycle = -1;
  bool complete = false;
  std::vector<std::int32_t> steps;
  std::vector<bool> measured;  // kernels_measured per step
  bool training_thread = false;
  int during_step = -1;  // the loop's step count when it arrived; -1: at finish()
  json trace;
};

std::vector<json> events_of(const json& trace, int pid) {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == pid) out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE(
    "a scheduled run: warm-up steps are neither recorded nor baseline, and the recording cost pairs "
    "each recorded step with the untraced steps before its window",
    "[schedule][stats]") {
  // skip_first 1, then 2 cycles of wait 1, warm-up 1, active 2:   s | w u a L | w u a L | . . . .
  const recording_schedule sch(1, 1, 2, 2, 1);
  const double wall[] = {10, 10, 40, 20, 22, 14, 40, 24, 26, 13, 10, 10, 10};
  std::vector<step_result> steps;
  for (std::int32_t i = 0; i < 13; ++i) steps.push_back(scheduled_step(i, wall[i], sch.at(i)));
  const run_summary s = summarize_run(steps, 0);
  // Recorded: the active steps 3, 4, 7, 8. Baseline: 0, 1, 10, 11, 12 (records off, not right after
  // a step with records on: 2 and 6 are warm-up steps, 5 and 9 follow a window).
  CHECK(s.recording.recorded_steps == 4);
  CHECK(s.recording.recorded_step_ms == Approx(23.0));  // median of 20, 22, 24, 26
  CHECK(s.baseline.steps == 5);
  CHECK(s.baseline.step_ms == Approx(10.0));
  CHECK(s.recording.untraced_step_ms == Approx(10.0));
  // Every recorded step against the median of the untraced steps before it (steps 0 and 1, all
  // 10 ms): 2.0, 2.2, 2.4, 2.6, median 2.3. Pairing a recorded step with its recorded neighbour
  // (22 / 20) or with a warm-up step (median of 10, 10, 40) would give another figure.
  CHECK(s.recording.paired_steps == 4);
  REQUIRE(s.recording.cost);
  CHECK(*s.recording.cost == Approx(1.3));
  REQUIRE(s.step_kernels);
  CHECK(s.step_kernels->steps == 4);  // kernel figures rest on the active steps only
}

TEST_CASE("windows gather the active steps of a cycle and close at its last one", "[schedule][windows]") {
  const recording_schedule sch(1, 1, 3, 2);  // w u a a L | w u a a L | .
  detail::window_collector c("win");
  std::vector<recording_window> done;
  for (std::int32_t i = 0; i < 11; ++i) {
    step_result st = scheduled_step(i, 10, sch.at(i));
    gpu_activity k;
    k.name = kernel_name(i);
    k.begin_ns = 100 * i;
    k.end_ns = k.begin_ns + 50;
    k.step = i;
    st.gpu->activities.push_back(k);
    span_record sp;
    sp.kind = phase_kind::step;
    sp.name = "step";
    sp.step = i;
    c.add(st, {sp}, st.gpu->activities, done);
    if (i == 3) CHECK(done.empty());  // step 4 closes window 0
    if (i == 4) CHECK(done.size() == 1);
  }
  c.finish(done);
  REQUIRE(done.size() == 2);
  for (int w = 0; w < 2; ++w) {
    const auto& win = done[static_cast<std::size_t>(w)];
    const std::int32_t first = w == 0 ? 2 : 7;
    CHECK(win.cycle == w);
    CHECK(win.complete);
    CHECK(win.run_name == "win");
    CHECK(win.step_numbers() == std::vector<std::int32_t>{first, first + 1, first + 2});
    REQUIRE(win.activities.size() == 3);
    CHECK(std::string(win.activities[0].name) == kernel_name(first));
    REQUIRE(win.spans.size() == 3);
    CHECK(win.spans[2].step == first + 2);
    for (const auto& st : win.steps) CHECK(st.gpu->activities.empty());  // in win.activities only
  }
  CHECK(done[1].describe() == "window 1: steps 7-9 (3 steps, complete)");
  CHECK(c.windows() == 2);
}

TEST_CASE("a window is cut short by the end of the run or by a step of it that never arrived", "[schedule][windows]") {
  const recording_schedule sch(0, 0, 3);  // a a L a a L ...
  SECTION("the run ends inside the second window") {
    detail::window_collector c("cut");
    std::vector<recording_window> done;
    for (std::int32_t i = 0; i < 5; ++i) c.add(scheduled_step(i, 10, sch.at(i)), {}, {}, done);
    REQUIRE(done.size() == 1);
    CHECK(done[0].complete);
    c.finish(done);
    REQUIRE(done.size() == 2);
    CHECK_FALSE(done[1].complete);
    CHECK(done[1].step_numbers() == std::vector<std::int32_t>{3, 4});
    CHECK(done[1].describe() == "window 1: steps 3-4 (2 steps, cut short: the run ended first)");
    c.finish(done);
    CHECK(done.size() == 2);  // nothing left open
  }
  SECTION("step 2 (the first window's last) is lost: step 3 closes the first window, incomplete") {
    detail::window_collector c("lost");
    std::vector<recording_window> done;
    for (std::int32_t i : {0, 1, 3}) c.add(scheduled_step(i, 10, sch.at(i)), {}, {}, done);
    REQUIRE(done.size() == 1);
    CHECK_FALSE(done[0].complete);
    CHECK(done[0].step_numbers() == std::vector<std::int32_t>{0, 1});
  }
  SECTION("unscheduled steps (the budget) open no window") {
    detail::window_collector c("budget");
    std::vector<recording_window> done;
    step_result st = scheduled_step(0, 10, schedule_slot{});
    st.gpu->kernels_measured = true;
    c.add(st, {}, {}, done);
    c.finish(done);
    CHECK(done.empty());
  }
}

TEST_CASE("on_trace_ready: each window once, in order, on the training thread, with a trace of its own",
          "[schedule][windows][profiler]") {
  traceml_test::reset_recorder();
  std::vector<seen_window> seen;
  int loop_step = 0;
  const auto main_thread = std::this_thread::get_id();
  profiler_options o;
  o.run_name = "sched";
  o.print_table = false;
  o.warmup_steps = 0;
  o.trace_path = traceml_test::temp_path("sched_run.trace.json");  // the run's trace keeps every kernel too
  o.on_trace_ready = [&](const recording_window& w) {
    seen_window s;
    s.cycle = w.cycle;
    s.complete = w.complete;
    s.steps = w.step_numbers();
    for (const auto& st : w.steps) s.measured.push_back(st.gpu && st.gpu->kernels_measured);
    s.training_thread = std::this_thread::get_id() == main_thread;
    s.during_step = loop_step;
    const std::string path = traceml_test::temp_path("window_" + std::to_string(w.cycle) + ".json");
    CHECK(w.write_chrome_trace(path));
    s.trace = json::parse(std::ifstream(path));
    std::remove(path.c_str());
    seen.push_back(std::move(s));
  };
  const recording_schedule sch(1, 1, 3, 2);  // w u a a L | w u a a L | . . .
  profiler prof(o);
  prof.set_gpu_source(std::make_unique<scheduled_source>(sch));
  for (; loop_step < 12; ++loop_step) one_step();
  // The attribution worker runs beside the loop: a window arrives at the first step end after its
  // last step's report is done. Steps past the schedule's end let the second one arrive.
  for (int extra = 0; seen.size() < 2 && extra < 2000; ++extra, ++loop_step) {
    std::this_thread::sleep_for(1ms);
    one_step();
  }
  const int steps_run = loop_step;
  loop_step = -1;
  const auto& run = prof.finish();

  REQUIRE(seen.size() == 2);
  for (std::size_t w = 0; w < 2; ++w) {
    const auto& s = seen[w];
    const std::int32_t first = w == 0 ? 2 : 7;
    INFO("window " << w);
    CHECK(s.cycle == static_cast<std::int32_t>(w));
    CHECK(s.complete);
    CHECK(s.steps == std::vector<std::int32_t>{first, first + 1, first + 2});
    CHECK(s.measured == std::vector<bool>{true, true, true});
    CHECK(s.training_thread);
    CHECK(s.during_step > first + 2);  // at a step's end, after the window's last step
    CHECK(s.during_step < steps_run);  // not deferred to finish()
    // The window's trace: its own steps' CPU records and kernels, nothing of the warm-up step
    // (records on, kernel discarded) or of any other step.
    std::set<std::int64_t> cpu_steps;
    for (const auto& e : events_of(s.trace, 1)) cpu_steps.insert(e["args"]["step"].get<std::int64_t>());
    CHECK(cpu_steps == std::set<std::int64_t>{first, first + 1, first + 2});
    std::vector<std::string> kernels;
    for (const auto& e : events_of(s.trace, 100)) kernels.push_back(e["name"].get<std::string>());
    CHECK(kernels == std::vector<std::string>{kernel_name(first), kernel_name(first + 1), kernel_name(first + 2)});
    CHECK(s.trace["otherData"]["run"] == "sched");
    CHECK(s.trace["otherData"]["steps"].get<std::string>().find("complete") != std::string::npos);
  }
  // The summary rests on the same steps: six recorded, warm-up steps 1 and 6 not among them.
  CHECK(run.summary.recording.recorded_steps == 6);
  REQUIRE(run.steps.size() == static_cast<std::size_t>(steps_run));
  CHECK(run.steps[1].gpu->schedule.phase == schedule_phase::warmup);
  CHECK_FALSE(run.steps[1].gpu->kernels_measured);
  CHECK(run.steps[2].gpu->schedule.cycle == 0);
  CHECK(diagnostic_messages().empty());
  const json whole = json::parse(std::ifstream(o.trace_path));
  CHECK(events_of(whole, 100).size() == 6);  // the six active steps' kernels, none of the warm-up steps'
  std::remove(o.trace_path.c_str());
}

TEST_CASE("on_trace_ready: a window the run ended inside arrives at finish(), cut short",
          "[schedule][windows][profiler]") {
  traceml_test::reset_recorder();
  std::vector<std::pair<std::vector<std::int32_t>, bool>> seen;
  bool finishing = false;
  std::vector<bool> at_finish;
  profiler_options o;
  o.print_table = false;
  o.warmup_steps = 0;
  o.on_trace_ready = [&](const recording_window& w) {
    seen.emplace_back(w.step_numbers(), w.complete);
    at_finish.push_back(finishing);
  };
  profiler prof(o);
  prof.set_gpu_source(std::make_unique<scheduled_source>(recording_schedule(0, 0, 3)));  // a a L a a L ...
  for (int i = 0; i < 5; ++i) one_step();
  finishing = true;
  prof.finish();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::make_pair(std::vector<std::int32_t>{0, 1, 2}, true));
  CHECK(seen[1] == std::make_pair(std::vector<std::int32_t>{3, 4}, false));
  CHECK(at_finish[1]);
}

namespace {
/// A scheduled source whose kernel names live in its own kernel_name_table, made as it runs and
/// destroyed with it, as the CUPTI reader's are: "kernel-<step>" for each active step. Says when it
/// is destroyed.
struct named_source : scheduled_source {
  named_source(recording_schedule s, bool& destroyed) : scheduled_source(s), destroyed_(destroyed) {}
  ~named_source() override { destroyed_ = true; }
  gpu_delivery collect(bool final) override {
    gpu_delivery d = scheduled_source::collect(final);
    for (auto& r : d.records) r.name = table->keep("kernel-" + std::string(r.name).substr(1));
    return d;
  }
  std::shared_ptr<const kernel_name_table> kernel_names() const noexcept override { return table; }
  std::shared_ptr<kernel_name_table> table = std::make_shared<kernel_name_table>();
  bool& destroyed_;
};
}  // namespace

TEST_CASE("kernel names outlive their source: the run's trace and kept windows name every kernel",
          "[schedule][windows][profiler]") {
  traceml_test::reset_recorder();
  std::vector<recording_window> kept;  // kept past the run, as a program may
  profiler_options o;
  o.run_name = "names";
  o.print_table = false;
  o.warmup_steps = 0;
  o.trace_path = traceml_test::temp_path("names_run.trace.json");
  o.on_trace_ready = [&](const recording_window& w) { kept.push_back(w); };
  bool destroyed = false;
  std::weak_ptr<const kernel_name_table> table;
  {
    profiler prof(o);
    auto source = std::make_unique<named_source>(recording_schedule(0, 0, 3), destroyed);  // a a L a a L
    table = source->table;
    prof.set_gpu_source(std::move(source));
    for (int i = 0; i < 6; ++i) one_step();
    prof.finish();
    // finish() released the source (CUPTI is shut down before the files are written) and wrote the
    // trace after that: its kernel names come from the table the trace kept.
    CHECK(destroyed);
    CHECK(prof.gpu() == nullptr);
    CHECK_FALSE(table.expired());
    const json trace = json::parse(std::ifstream(o.trace_path));
    std::vector<std::string> names;
    for (const auto& e : events_of(trace, 100)) names.push_back(e["name"].get<std::string>());
    CHECK(names == std::vector<std::string>{"kernel-0", "kernel-1", "kernel-2", "kernel-3", "kernel-4", "kernel-5"});
  }
  // The profiler is gone too: the windows still read their kernels, each holding the table.
  REQUIRE(kept.size() == 2);
  REQUIRE_FALSE(table.expired());
  CHECK(table.lock()->size() == 6);
  for (std::size_t w = 0; w < kept.size(); ++w) {
    CHECK(kept[w].kernel_names == table.lock());
    REQUIRE(kept[w].activities.size() == 3);
    for (std::size_t k = 0; k < 3; ++k)
      CHECK(std::string(kept[w].activities[k].name) == "kernel-" + std::to_string(3 * w + k));
  }
  kept.clear();
  CHECK(table.expired());  // the last holder released it
  std::remove(o.trace_path.c_str());
}

TEST_CASE("on_trace_ready without a schedule is never called, and the run says so once", "[schedule][profiler]") {
  traceml_test::reset_recorder();
  int calls = 0;
  profiler_options o;
  o.print_table = false;
  o.on_trace_ready = [&](const recording_window&) { ++calls; };
  profiler prof(o);
  for (int i = 0; i < 3; ++i) one_step();
  prof.finish();
  CHECK(calls == 0);
  REQUIRE(diagnostic_messages().size() == 1);
  CHECK(diagnostic_messages()[0].find("on_trace_ready was never called") != std::string::npos);
}

TEST_CASE("a throwing on_trace_ready is said once and does not stop the run", "[schedule][profiler][errors]") {
  traceml_test::reset_recorder();
  int calls = 0;
  profiler_options o;
  o.print_table = false;
  o.warmup_steps = 0;
  o.on_trace_ready = [&](const recording_window&) {
    ++calls;
    throw std::runtime_error("disk full");
  };
  profiler prof(o);
  prof.set_gpu_source(std::make_unique<scheduled_source>(recording_schedule(0, 0, 1)));  // every step a window
  for (int i = 0; i < 4; ++i) one_step();
  const auto& run = prof.finish();
  CHECK(calls == 4);
  CHECK(run.steps.size() == 4);
  REQUIRE(diagnostic_messages().size() == 1);
  CHECK(diagnostic_messages()[0].find("on_trace_ready threw: disk full") != std::string::npos);
}
