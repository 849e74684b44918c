// Several threads recording while the training thread opens and closes steps and rings are drained.
// Counts must come out exact; run under ThreadSanitizer (scripts/tsan.sh) this is the race check of
// the recorder's lock-free path.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <traceml/traceml.hpp>

#include "test_helpers.hpp"

namespace {

using traceml_test::drain;

bool named(const traceml::span_record& r, const char* name) { return std::string(r.name) == name; }

}  // namespace

TEST_CASE("draining while threads record loses and duplicates nothing", "[threads]") {
  drain();
  constexpr int workers = 4;
  constexpr int per_worker = 6000;  // under one ring's capacity: no drop even if no drain ran
  std::atomic<int> running{workers};
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (int i = 0; i < per_worker; ++i) {
        TRACEML_PHASE_NAMED("worker");
      }
      running.fetch_sub(1);
    });

  // The training thread meanwhile: steps open and close, rings drained after each.
  std::vector<traceml::span_record> got;
  std::int32_t steps = 0;
  while (running.load() > 0) {
    {
      TRACEML_STEP();
      { TRACEML_PHASE(forward); }
    }
    ++steps;
    for (const auto& r : drain()) got.push_back(r);
  }
  for (auto& t : pool) t.join();
  for (const auto& r : drain()) got.push_back(r);

  std::map<std::uint32_t, std::vector<const traceml::span_record*>> by_thread;
  std::size_t worker_records = 0;
  for (const auto& r : got) {
    if (!named(r, "worker")) continue;
    ++worker_records;
    by_thread[r.thread].push_back(&r);
    CHECK(r.end_ns >= r.begin_ns);
  }
  CHECK(worker_records == std::size_t{workers} * per_worker);
  // Each ring hands its records over in the order they were written.
  for (const auto& entry : by_thread)
    for (std::size_t i = 1; i < entry.second.size(); ++i)
      if (entry.second[i]->begin_ns < entry.second[i - 1]->begin_ns) FAIL("records of one thread out of order");
  CHECK(std::count_if(got.begin(), got.end(), [](const traceml::span_record& r) { return named(r, "step"); }) == steps);
}

TEST_CASE("short-lived threads hand their rings over while the training thread drains", "[threads]") {
  drain();
  constexpr int rounds = 40, per_round = 3, per_thread = 200;
  std::atomic<bool> done{false};
  std::vector<traceml::span_record> got;
  std::thread trainer([&] {
    while (!done.load()) {
      { TRACEML_PHASE(optimizer); }
      for (const auto& r : drain()) got.push_back(r);
    }
  });
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::thread> batch;
    for (int t = 0; t < per_round; ++t)
      batch.emplace_back([] {
        for (int i = 0; i < per_thread; ++i) {
          TRACEML_PHASE(dataloader);
        }
      });
    for (auto& t : batch) t.join();
  }
  done.store(true);
  trainer.join();
  for (const auto& r : drain()) got.push_back(r);
  const auto loaders =
      std::count_if(got.begin(), got.end(), [](const traceml::span_record& r) { return named(r, "dataloader"); });
  CHECK(loaders == rounds * per_round * per_thread);
}

TEST_CASE("a profiler run whose phases come from several threads", "[threads][profiler]") {
  // Each step's own count (per_step + s in step s), so that a record given to a neighbouring step
  // shows: the step worker takes a batch of steps at once, from rings that interleave them.
  constexpr int workers = 3, steps = 20, per_step = 50;
  traceml::profiler_options opts;
  opts.print_table = false;
  opts.warmup_steps = 0;
  traceml::profiler prof(opts);

  // Each step: the training thread opens it, every worker records `per_step` phases inside it, and
  // the training thread closes it (the profiler drains all rings right there).
  std::mutex mu;
  std::condition_variable cv;
  int generation = 0;  // steps released to the workers
  int finished = 0;    // workers done with the current generation
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (int s = 1; s <= steps; ++s) {
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return generation >= s; });
        }
        for (int i = 0; i < per_step + s; ++i) {
          TRACEML_PHASE_NAMED("worker");
        }
        std::lock_guard<std::mutex> lock(mu);
        ++finished;
        cv.notify_all();
      }
    });
  for (int s = 1; s <= steps; ++s) {
    TRACEML_STEP();
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = 0;
      generation = s;
    }
    cv.notify_all();
    { TRACEML_PHASE(forward); }  // the training thread works alongside the workers
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finished == workers; });
  }
  for (auto& t : pool) t.join();

  const traceml::run_result& r = prof.finish();
  REQUIRE(r.steps.size() == steps);
  for (int s = 1; s <= steps; ++s) {
    const auto& st = r.steps[static_cast<std::size_t>(s - 1)];
    const auto* w = st.find(traceml::phase_kind::user, "worker");
    REQUIRE(w != nullptr);
    CHECK(w->count == workers * (per_step + s));
    const auto* f = st.find(traceml::phase_kind::forward, "forward");
    REQUIRE(f != nullptr);
    CHECK(f->count == 1);
  }
  CHECK(r.summary.dropped_records == 0);
}

#if defined(__linux__)

TEST_CASE("the profiler's background thread carries traceml's name, and is gone after finish", "[threads][profiler]") {
  auto count = [] {
    const auto n = traceml_test::thread_names();
    return std::count(n.begin(), n.end(), std::string("traceml step"));
  };
  const auto before = count();
  traceml::profiler_options opts;
  opts.print_table = false;
  traceml::profiler prof(opts);
  for (int s = 0; s < 3; ++s) {
    TRACEML_STEP();
    TRACEML_PHASE(forward);
  }
  // The worker starts at the first step's end; it names itself first thing, so wait for the name.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (count() == before && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(count() == before + 1);
  prof.finish();
  CHECK(count() == before);
}
#endif

TEST_CASE("the step worker takes as many steps a wake-up as fit, paced by the step period", "[threads][worker]") {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  traceml::detail::step_worker w([] { return traceml::detail::step_batch{}; });
  // At most 64 steps a wake-up, at most a quarter of a ring's 16,384 records, at most 250 ms apart.
  CHECK(w.next_poll(microseconds(20), 6) == microseconds(64 * 20));  // 20 us CPU steps: 1.28 ms
  CHECK(w.next_poll(milliseconds(2), 6) == milliseconds(128));       // 2 ms GPU steps: 64 a wake-up
  CHECK(w.next_poll(milliseconds(75), 40) == milliseconds(250));     // long steps: 250 ms, 3 a wake-up
  CHECK(w.next_poll(milliseconds(400), 40) == milliseconds(250));    // longer than the poll: 250 ms
  CHECK(w.next_poll(milliseconds(2), 2000) == milliseconds(4));      // 2,000 records a step: 4096 / 2000 = 2
  CHECK(w.next_poll(milliseconds(10), 10000) == milliseconds(10));   // over a quarter ring: one step a wake-up
  CHECK(w.next_poll(microseconds(1), 1) == microseconds(200));       // never below 200 us
  CHECK(w.next_poll(milliseconds(1), 0) == milliseconds(64));        // no records counted: as one a step
}

TEST_CASE("the step worker wakes a few times a second, not once a step, and loses no step", "[threads][worker]") {
  // 60 steps of 5 ms with 5 records each: after its first wake-up (10 ms) the worker polls every
  // 250 ms (64 steps of 5 ms, capped), so the 300 ms run takes a handful of wake-ups, not 60. A
  // loaded machine only makes wake-ups rarer.
  std::atomic<std::size_t> ended{0}, processed{0}, wakeups{0};
  traceml::detail::step_worker w([&] {
    const std::size_t now = ended.load() - processed.load();
    processed += now;
    if (now) ++wakeups;
    return traceml::detail::step_batch{now, 5 * now};
  });
  constexpr std::size_t steps = 60;
  for (std::size_t s = 0; s < steps; ++s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ++ended;
    w.poke();
  }
  w.stop();
  const std::size_t left = ended.load() - processed.load();  // the caller's last run (finish())
  CHECK(processed.load() + left == steps);
  CHECK(wakeups.load() >= 1);
  CHECK(wakeups.load() <= 8);
}
