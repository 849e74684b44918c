// The profiler end to end: scopes or hooks in, table/JSON/JSONL/trace out, GPU sources plugged in.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <memory>

#include "test_helpers.hpp"

using namespace traceml;
using nlohmann::json;
using traceml_test::spin_for;
using namespace std::chrono_literals;

namespace {
std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

void one_step(int microbatches) {
  TRACEML_STEP();
  for (int m = 0; m < microbatches; ++m) {
    TRACEML_MICROBATCH();
    { TRACEML_PHASE(dataloader); spin_for(100us); }
    { TRACEML_PHASE(forward); spin_for(300us); }
    { TRACEML_PHASE(backward); spin_for(500us); }
  }
  spin_for(50us);  // outside any phase: shows up as residual
  { TRACEML_PHASE(optimizer); spin_for(200us); }
}

/// A GPU source that delivers one step late, as CUPTI does (records arrive after the step ends):
/// raw activity only, every step recorded, one 1 ms kernel launched inside each forward phase. The
/// profiler's attribution stage turns it into reports.
struct lagging_source : gpu_source {
  std::vector<std::vector<span_record>> ended;
  int scope_begins = 0, scope_ends = 0;
  const char* name() const noexcept override { return "fake"; }
  bool wants_scope_hooks() const noexcept override { return true; }
  void on_scope_begin(phase_kind, const char*, std::int32_t, std::int32_t) noexcept override { ++scope_begins; }
  void on_scope_end(const span_record&) noexcept override { ++scope_ends; }
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
      a.recorded = true;
      for (const auto& s : ended[i]) {
        if (s.kind == phase_kind::microbatch) continue;
        a.step = s.step;
        a.spans.push_back(timed_span{marked_span{s, 0, 0}, -1});
        if (s.kind != phase_kind::forward) continue;
        gpu_record k;  // no markers: placed by CPU time, in the forward phase it started in
        k.begin_ns = s.begin_ns + 1000;
        k.end_ns = k.begin_ns + 1'000'000;
        k.name = "k";
        d.records.push_back(k);
      }
      d.steps.push_back(std::move(a));
    }
    delivered = ready;
    return d;
  }
  std::string status() const override { return "fake source: 1 kernel per forward"; }
  std::size_t delivered = 0;
};
}  // namespace

TEST_CASE("phases and residual add up to the step, and the JSON matches the table", "[profiler]") {
  traceml_test::reset_recorder();
  profiler_options o;
  o.run_name = "unit";
  o.warmup_steps = 2;
  o.print_table = false;
  o.json_path = traceml_test::temp_path("profiler.json");
  o.jsonl_path = traceml_test::temp_path("profiler.jsonl");
  o.trace_path = traceml_test::temp_path("profiler.trace.json");
  o.tokens_per_step = 1024;
  profiler prof(o);
  for (int s = 0; s < 6; ++s) {
    one_step(2);
    // Each finished step is on disk before the next begins (a killed run keeps them).
    CHECK(lines_of(o.jsonl_path).size() == static_cast<std::size_t>(s + 1));
  }
  const auto& run = prof.finish();
  REQUIRE(run.steps.size() == 6);
  for (const auto& st : run.steps) {
    double top = 0;
    for (const auto& p : st.phases) top += p.top_level ? p.wall_ms : 0;
    CHECK(top + st.residual_ms == Approx(st.wall_ms).margin(1e-6));
    CHECK(st.residual_ms >= 0.05);
    CHECK(st.microbatches == 2);
    CHECK(st.find(phase_kind::forward, "forward")->count == 2);
  }
  const auto& s = run.summary;
  CHECK(s.warmup_steps == 2);
  CHECK(s.step_ms.count == 4);
  double means = s.residual_ms.mean;
  for (const auto& p : s.phases) means += p.wall_ms.mean;
  CHECK(means == Approx(s.step_ms.mean).epsilon(1e-9));
  CHECK(s.tokens_per_s == Approx(1024 * 1e3 / s.step_ms.mean));

  const json doc = json::parse(std::ifstream(o.json_path));
  const auto& js = doc["runs"][0]["summary"];
  CHECK(js["step_ms"]["mean"].get<double>() == Approx(s.step_ms.mean));
  // The table prints the same numbers, rounded to three decimals.
  const auto table = format_table(run);
  CHECK(table.find(format_ms(js["step_ms"]["mean"].get<double>())) != std::string::npos);
  for (const auto& p : js["phases"]) CHECK(table.find(format_ms(p["wall_ms"]["mean"].get<double>())) != std::string::npos);

  const json trace = json::parse(std::ifstream(o.trace_path));
  std::size_t x = 0;
  for (const auto& e : trace["traceEvents"]) x += e["ph"] == "X";
  CHECK(x == 6 * (1 + 2 * 4 + 1));  // step, 2 x (micro-batch + 3 phases), optimizer
  for (const auto& p : {o.json_path, o.jsonl_path, o.trace_path}) std::remove(p.c_str());
}

TEST_CASE("the profiler is a trainer callback: hooks in, report at train end", "[profiler][callbacks]") {
  traceml_test::reset_recorder();
  profiler_options o;
  o.print_table = false;
  o.warmup_steps = 0;
  profiler prof(o);
  callback_list cbs;
  cbs.add(prof);
  cbs.on_train_begin();
  for (int s = 0; s < 3; ++s) {
    cbs.on_step_begin();
    cbs.on_phase_begin(phase_kind::forward);
    spin_for(100us);
    cbs.on_phase_end(phase_kind::forward);
    cbs.on_step_end();
  }
  cbs.on_train_end();
  REQUIRE(prof.result().steps.size() == 3);
  CHECK(prof.result().summary.phases.at(0).wall_ms.min >= 0.1);
  CHECK(prof.result().steps[2].step == 2);
}

TEST_CASE("GPU facts that arrive late are attached to their steps", "[profiler][gpu]") {
  traceml_test::reset_recorder();
  profiler_options o;
  o.print_table = false;
  o.warmup_steps = 0;
  o.jsonl_path = traceml_test::temp_path("lag.jsonl");
  o.trace_path = traceml_test::temp_path("lag.trace.json");
  profiler prof(o);
  auto src = std::make_unique<lagging_source>();
  auto* fake = src.get();
  prof.set_gpu_source(std::move(src));
  for (int s = 0; s < 3; ++s) one_step(1);
  // Step 2's facts are not in yet, so its JSONL line waits (steps 0 and 1 may still be with the
  // attribution worker too).
  CHECK(lines_of(o.jsonl_path).size() <= 2);
  CHECK(fake->scope_begins == 3 * 6);
  CHECK(fake->scope_ends == 3 * 6);
  const auto& run = prof.finish();
  CHECK(prof.gpu() == nullptr);  // released at finish
  REQUIRE(run.steps.size() == 3);
  for (const auto& st : run.steps) {
    REQUIRE(st.gpu);
    CHECK(st.gpu->step == st.step);
  }
  const auto lines = lines_of(o.jsonl_path);
  REQUIRE(lines.size() == 3);
  const json line = json::parse(lines[2]);
  CHECK(line["gpu"]["kernel_count"] == 1);
  int forward_kernels = -1;
  for (const auto& p : line["gpu"]["phases"])
    if (p["name"] == "forward") forward_kernels = p["kernel_count"].get<int>();
  CHECK(forward_kernels == 1);
  CHECK(run.summary.gpu_status == "fake source: 1 kernel per forward");
  REQUIRE(run.summary.step_kernels);
  CHECK(run.summary.step_kernels->kernel_ms.mean == Approx(1.0));
  const json trace = json::parse(std::ifstream(o.trace_path));
  int kernels = 0;
  for (const auto& e : trace["traceEvents"]) kernels += e["ph"] == "X" && e["pid"] == 100;
  CHECK(kernels == 3);
  for (const auto& p : {o.jsonl_path, o.trace_path}) std::remove(p.c_str());
}

TEST_CASE("outputs that cannot be written do not stop the run", "[profiler][errors]") {
  traceml_test::reset_recorder();
  profiler_options o;
  o.print_table = false;
  o.json_path = "/nonexistent-traceml-dir/s.json";
  o.jsonl_path = "/dev/full";
  profiler prof(o);
  for (int s = 0; s < 3; ++s) one_step(1);
  const auto& run = prof.finish();
  CHECK(run.steps.size() == 3);
  const auto msgs = diagnostic_messages();
  REQUIRE(msgs.size() == 2);  // one per output, however many steps tried
  CHECK(msgs[0].find("/dev/full") != std::string::npos);
  CHECK(msgs[1].find("/nonexistent-traceml-dir/s.json") != std::string::npos);
}

TEST_CASE("a second profiler while one is active records nothing and says why", "[profiler][errors]") {
  traceml_test::reset_recorder();
  profiler_options o;
  o.print_table = false;
  profiler first(o);
  {
    o.run_name = "second";
    profiler second(o);
    one_step(1);
    CHECK(second.finish().steps.empty());
  }
  REQUIRE(diagnostic_messages().size() == 1);
  CHECK(diagnostic_messages()[0].find("'second' records nothing") != std::string::npos);
  CHECK(first.finish().steps.size() == 1);
}

TEST_CASE("a phase on another thread that outlives its step is reported, not kept", "[profiler][threads]") {
  traceml_test::reset_recorder();
  profiler_options o;
  o.print_table = false;
  o.warmup_steps = 0;
  profiler prof(o);
  std::atomic<bool> phase_open{false}, step_closed{false};
  std::thread worker;
  {
    TRACEML_STEP();
    worker = std::thread([&] {
      TRACEML_PHASE_NAMED("prefetch");  // begins inside step 0 ...
      phase_open = true;
      while (!step_closed.load()) {
      }
    });                                  // ... and ends after it
    while (!phase_open.load()) {
    }
  }
  step_closed = true;
  worker.join();
  one_step(1);
  const auto& run = prof.finish();
  REQUIRE(run.steps.size() == 2);
  CHECK(run.steps[0].find(phase_kind::user, "prefetch") == nullptr);
  CHECK(run.steps[1].find(phase_kind::user, "prefetch") == nullptr);
  REQUIRE(diagnostic_messages().size() == 1);
  CHECK(diagnostic_messages()[0].find("ended after their step was summarized") != std::string::npos);
}
