// The profiler end to end: scopes or hooks in, table/JSON/JSONL/trace out, GPU sources plugged in.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <nlohmann/json.hpp>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
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
    {
      TRACEML_PHASE(dataloader);
      spin_for(100us);
    }
    {
      TRACEML_PHASE(forward);
      spin_for(300us);
    }
    {
      TRACEML_PHASE(backward);
      spin_for(500us);
    }
  }
  spin_for(50us);  // outside any phase: shows up as residual
  {
    TRACEML_PHASE(optimizer);
    spin_for(200us);
  }
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
      // Memory peaks that grow by 1 MiB a step (reserved: twice that), for the trace's counter track.
      a.memory = {static_cast<std::int64_t>(i + 1) << 20, static_cast<std::int64_t>(i + 1) << 21};
      for (const auto& s : ended[i]) {
        if (s.kind == phase_kind::microbatch) continue;
        a.step = s.step;
        a.spans.push_back(timed_span{marked_span{s, 0, 0}, -1, -1, {}});
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
    // Each finished step is on disk within moments of its end (the step worker writes it; a
    // killed run keeps them): waited for up to 5 s, a generous bound for a loaded machine.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (lines_of(o.jsonl_path).size() < static_cast<std::size_t>(s + 1) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(lines_of(o.jsonl_path).size() == static_cast<std::size_t>(s + 1));
  }
  const auto& run = prof.finish();
  REQUIRE(run.steps.size() == 6);
  CHECK(prof.failed_outputs().empty());  // every output asked for is on disk
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
  for (const auto& p : js["phases"])
    CHECK(table.find(format_ms(p["wall_ms"]["mean"].get<double>())) != std::string::npos);

  const json trace = json::parse(std::ifstream(o.trace_path));
  std::size_t x = 0;
  std::size_t gaps = 0;
  for (const auto& e : trace["traceEvents"]) {
    x += e["ph"] == "X" && e["cat"] != "outside_steps";
    gaps += e["ph"] == "X" && e["cat"] == "outside_steps";
  }
  CHECK(x == 6 * (1 + 2 * 4 + 1));  // step, 2 x (micro-batch + 3 phases), optimizer
  CHECK(gaps == 5);                 // between the 6 steps, on their own track
  for (const auto& p : {o.json_path, o.jsonl_path, o.trace_path}) std::remove(p.c_str());
}

TEST_CASE("a profiler that knows its rank writes it into every file it writes", "[profiler][rank]") {
  traceml_test::reset_recorder();
  profiler_options o;
  o.run_name = "ranked";
  o.warmup_steps = 1;
  o.print_table = false;
  o.rank = rank_identity{1, 2};
  o.json_path = traceml_test::temp_path("ranked.json");
  o.jsonl_path = traceml_test::temp_path("ranked.jsonl");
  o.trace_path = traceml_test::temp_path("ranked.trace.json");
  {
    profiler prof(o);
    for (int s = 0; s < 3; ++s) one_step(1);
    CHECK(prof.finish().rank.rank == 1);
  }
  const json doc = json::parse(std::ifstream(o.json_path));
  CHECK(doc["runs"][0]["rank"] == 1);
  CHECK(doc["runs"][0]["world_size"] == 2);
  const auto lines = lines_of(o.jsonl_path);
  REQUIRE(lines.size() == 3);
  for (const auto& line : lines) CHECK(json::parse(line)["rank"] == 1);
  const json trace = json::parse(std::ifstream(o.trace_path));
  for (const auto& e : trace["traceEvents"]) CHECK(e["pid"] == 1001);  // rank 1's host process
  for (const auto& p : {o.json_path, o.jsonl_path, o.trace_path}) std::remove(p.c_str());

  SECTION("a rank that is not one of its world: said once, no rank written") {
    traceml_test::reset_recorder();
    reset_diagnostics(/*quiet=*/true);
    profiler_options bad;
    bad.print_table = false;
    bad.rank = rank_identity{2, 2};
    profiler prof(bad);
    one_step(1);
    CHECK_FALSE(prof.finish().rank.distributed());
    REQUIRE(diagnostic_messages().size() == 1);
    CHECK(diagnostic_messages()[0] ==
          "profiler_options::rank 2 of 2 is not a rank of a run (need 0 <= rank < world_size); the outputs carry no "
          "rank");
  }
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

TEST_CASE("a profiler destroyed by an exception inside a step leaves the next one whole", "[profiler][callbacks]") {
  // An out-of-memory error inside forward: the step, micro-batch and forward hooks stay open; the
  // next profiler's steps must still pair (they were ignored as nested, "0 steps measured").
  traceml_test::reset_recorder();
  profiler_options o;
  o.print_table = false;
  o.warmup_steps = 0;
  try {
    profiler failing(o);
    callback_list cbs;
    cbs.add(failing);
    cbs.on_train_begin();
    cbs.on_step_begin();
    cbs.on_microbatch_begin();
    cbs.on_phase_begin(phase_kind::forward);
    throw std::runtime_error("CUDA out of memory");
  } catch (const std::runtime_error&) {
  }
  CHECK(detail::tls_hooks.size == 0);
  profiler next(o);
  callback_list cbs;
  cbs.add(next);
  cbs.on_train_begin();
  for (int s = 0; s < 3; ++s) {
    cbs.on_step_begin();
    cbs.on_phase_begin(phase_kind::forward);
    spin_for(100us);
    cbs.on_phase_end(phase_kind::forward);
    cbs.on_step_end();
  }
  cbs.on_train_end();
  REQUIRE(next.result().summary.steps == 3);
  const auto& forward = next.result().summary.phases.at(0);
  CHECK(forward.top_level);  // the abandoned forward left no phase depth behind
  CHECK(forward.wall_ms.count == 3);
  CHECK(next.result().summary.step_ms.median >= 0.1);
  for (const auto& m : diagnostic_messages()) CHECK(m.find("hook") == std::string::npos);
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

TEST_CASE("outputs that cannot be written do not stop the run, and each is named with its reason",
          "[profiler][errors]") {
  traceml_test::reset_recorder();
  // A full disk for real: files that are links to /dev/full (every write fails with ENOSPC).
  const std::string full = traceml_test::temp_path("full_disk");
  std::filesystem::remove_all(full);
  std::filesystem::create_directories(full);
  std::filesystem::create_symlink("/dev/full", full + "/steps.jsonl");
  std::filesystem::create_symlink("/dev/full", full + "/report.html");
  profiler_options o;
  o.print_table = false;
  o.json_path = "/nonexistent-traceml-dir/s.json";
  o.trace_path = "/nonexistent-traceml-dir/t.json";
  o.jsonl_path = full + "/steps.jsonl";
  o.html_path = full + "/report.html";
  profiler prof(o);
  for (int s = 0; s < 3; ++s) one_step(1);
  const auto& run = prof.finish();
  CHECK(run.steps.size() == 3);
  // In the order finish() writes them; the JSONL failed at its first step and was not retried.
  CHECK(prof.failed_outputs() == std::vector<std::string>{o.trace_path, o.json_path, o.html_path, o.jsonl_path});
  CHECK(
      diagnostic_messages() ==
      std::vector<std::string>{
          "cannot write step JSONL to '" + o.jsonl_path + "': No space left on device (training continues without it)",
          "cannot write Chrome trace to '/nonexistent-traceml-dir/t.json': No such file or directory",
          "cannot write JSON summary to '/nonexistent-traceml-dir/s.json': No such file or directory",
          "cannot write HTML report to '" + o.html_path + "': No space left on device"});
  std::filesystem::remove_all(full);
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
    });  // ... and ends after it
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

TEST_CASE("a run without a GPU source says why in the table, the JSON and the HTML", "[profiler][gpu]") {
  traceml_test::reset_recorder();
  profiler_options o;
  o.print_table = false;
  o.warmup_steps = 0;
  o.json_path = traceml_test::temp_path("nogpu.json");
  o.html_path = traceml_test::temp_path("nogpu.html");
  profiler prof(o);
  for (int s = 0; s < 2; ++s) one_step(1);
  const auto& run = prof.finish();
  const std::string status = no_gpu_source_status;
  CHECK(status.rfind("no GPU time source attached (link traceml::cupti and attach one", 0) == 0);
  CHECK(run.summary.gpu_status == status);
  CHECK(format_table(run).find("\ngpu: " + status + "\n") != std::string::npos);
  const json doc = json::parse(std::ifstream(o.json_path));
  CHECK(doc["runs"][0]["summary"]["gpu"]["status"] == status);
  std::ifstream html(o.html_path);
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  CHECK(page.find("<tr><th scope=\"row\">GPU</th><td>" + status + "</td></tr>") != std::string::npos);
  for (const auto& p : {o.json_path, o.html_path}) std::remove(p.c_str());
}

namespace {
std::uint64_t os_tid() { return static_cast<std::uint64_t>(::syscall(SYS_gettid)); }
std::string os_thread_name() {
  char buf[32] = {};
  pthread_getname_np(pthread_self(), buf, sizeof buf);
  return buf;
}
}  // namespace

TEST_CASE("the trace shows OS thread ids and names, a fixed process order and a GPU memory counter",
          "[profiler][trace]") {
  traceml_test::reset_recorder();
  profiler_options o;
  o.print_table = false;
  o.warmup_steps = 0;
  o.trace_path = traceml_test::temp_path("threads.trace.json");
  profiler prof(o);
  prof.set_gpu_source(std::make_unique<lagging_source>());
  std::uint64_t loader_tid = 0;
  for (int s = 0; s < 3; ++s) {
    TRACEML_STEP();
    if (s == 1) {
      // A named worker thread whose first record is inside this step: its ring, and so its
      // identity, is acquired on that thread.
      std::thread loader([&] {
        pthread_setname_np(pthread_self(), "tm-loader");
        loader_tid = os_tid();
        TRACEML_PHASE(dataloader);
        spin_for(100us);
      });
      loader.join();
    }
    TRACEML_PHASE(forward);
    spin_for(200us);
  }
  prof.finish();
  const std::uint64_t main_tid = os_tid();
  REQUIRE(loader_tid != 0);
  REQUIRE(loader_tid != main_tid);

  const json trace = json::parse(std::ifstream(o.trace_path));
  std::map<std::uint64_t, std::string> thread_names;
  std::map<std::uint64_t, std::int64_t> thread_order;
  std::map<int, std::int64_t> process_order;
  std::map<int, double> step_ts;  // step -> ts of its step span
  std::vector<json> counters;
  int loader_spans = 0, forward_spans = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name" && e["pid"] == 1 && e["args"]["name"] != "between steps")
      thread_names[e["tid"]] = e["args"]["name"];
    if (ph == "M" && e["name"] == "thread_sort_index" && e["pid"] == 1)
      thread_order[e["tid"]] = e["args"]["sort_index"];
    if (ph == "M" && e["name"] == "process_sort_index") process_order[e["pid"]] = e["args"]["sort_index"];
    if (ph == "C") counters.push_back(e);
    if (ph != "X" || e["pid"] != 1) continue;
    if (e["name"] == "dataloader") {
      ++loader_spans;
      CHECK(e["tid"].get<std::uint64_t>() == loader_tid);
    }
    if (e["name"] == "forward") {
      ++forward_spans;
      CHECK(e["tid"].get<std::uint64_t>() == main_tid);
    }
    if (e["cat"] == "step") step_ts[e["args"]["step"]] = e["ts"];
  }
  CHECK(loader_spans == 1);
  CHECK(forward_spans == 3);

  SECTION("each recording thread is named once, under its OS id, in order of first record") {
    CHECK(thread_names.size() == 2);
    CHECK(thread_names[loader_tid] == "tm-loader");
    CHECK(thread_names[main_tid] == os_thread_name());
    REQUIRE(thread_order.count(main_tid));
    REQUIRE(thread_order.count(loader_tid));
    CHECK(thread_order[main_tid] < thread_order[loader_tid]);
  }
  SECTION("the host process sorts first, then the GPU") {
    CHECK(process_order == std::map<int, std::int64_t>{{1, 0}, {100, 1}});
  }
  SECTION("one GPU memory counter event per step, at its beginning, with its peaks") {
    REQUIRE(counters.size() == 3);
    for (std::size_t i = 0; i < counters.size(); ++i) {
      const auto& c = counters[i];
      CHECK(c["pid"] == 100);
      CHECK(c["name"] == "GPU memory peak (bytes)");
      CHECK(c["ts"].get<double>() == Approx(step_ts.at(static_cast<int>(i))));
      CHECK(c["args"]["allocated"].get<std::int64_t>() == static_cast<std::int64_t>(i + 1) << 20);
      CHECK(c["args"]["reserved"].get<std::int64_t>() == static_cast<std::int64_t>(i + 1) << 21);
    }
  }
  std::remove(o.trace_path.c_str());
}

TEST_CASE("a program's own outputs are written after the built-in ones, each handed the finished run",
          "[profiler][outputs]") {
  traceml_test::reset_recorder();
  profiler_options o;
  o.run_name = "own";
  o.print_table = false;
  o.warmup_steps = 0;
  o.json_path = traceml_test::temp_path("own_summary.json");
  o.trace_path = traceml_test::temp_path("own_trace.json");
  o.html_path = traceml_test::temp_path("own_report.html");
  const std::string second_trace = traceml_test::temp_path("own_trace_again.json");
  std::vector<std::string> order;
  std::size_t steps_seen = 0;
  bool built_ins_on_disk = false, had_trace = false, threads_named = false;
  o.outputs.push_back({"first.txt", [&](const finished_run& run) {
                         order.push_back("first.txt");
                         steps_seen = run.result.steps.size();
                         built_ins_on_disk = std::filesystem::exists(o.json_path) &&
                                             std::filesystem::exists(o.trace_path) &&
                                             std::filesystem::exists(o.html_path);
                         had_trace = run.trace != nullptr;
                         threads_named = !run.threads.empty();
                         // A built-in writer is a run_output too: the same trace, written again.
                         return chrome_trace_output(second_trace).write(run);
                       }});
  o.outputs.push_back({"refused.csv", [&](const finished_run&) {
                         order.push_back("refused.csv");
                         return false;  // a writer that could not write says why itself
                       }});
  o.outputs.push_back({"thrower.bin", [&](const finished_run&) -> bool {
                         order.push_back("thrower.bin");
                         throw std::runtime_error("disk on fire");
                       }});
  o.outputs.push_back({"no_writer.txt", nullptr});
  o.outputs.push_back({"last.txt", [&](const finished_run&) {
                         order.push_back("last.txt");
                         return true;
                       }});
  {
    profiler prof(o);
    for (int i = 0; i < 4; ++i) {
      TRACEML_STEP();
      TRACEML_PHASE(forward);
      spin_for(100us);
    }
    prof.finish();
    CHECK(prof.failed_outputs() == std::vector<std::string>{"refused.csv", "thrower.bin", "no_writer.txt"});
  }
  CHECK(order == std::vector<std::string>{"first.txt", "refused.csv", "thrower.bin", "last.txt"});
  CHECK(steps_seen == 4);
  CHECK(built_ins_on_disk);
  CHECK(had_trace);
  CHECK(threads_named);
  const auto read = [](const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  CHECK(json::parse(read(second_trace)) == json::parse(read(o.trace_path)));
  bool threw_said = false, no_writer_said = false;
  for (const auto& m : diagnostic_messages()) {
    threw_said |= m == "the output 'thrower.bin' was not written: its writer threw: disk on fire";
    no_writer_said |= m == "the output 'no_writer.txt' was not written: it has no writer";
  }
  CHECK(threw_said);
  CHECK(no_writer_said);
  for (const std::string& p : {o.json_path, o.trace_path, o.html_path, second_trace}) std::remove(p.c_str());
}
