// The step-end drain's bound, and steps that overlap: threads that record phases non-stop cannot make
// a step end take more than the training thread's own records plus max_other_thread_records (counted
// in records handed over, not in wall time), what is left out is counted and said once, and the
// training thread and lightly recording threads lose nothing. Steps begun while another is open are
// ignored, counted and said once; no accepted step is lost. Run under ThreadSanitizer by
// scripts/tsan.sh with the rest of the core tests.
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <traceml/traceml.hpp>

#include "test_helpers.hpp"

using namespace traceml;
using traceml_test::reset_recorder;

namespace {

/// Threads that record empty phases as fast as they can until stopped; `recorded` counts them.
class flood {
 public:
  explicit flood(int threads) {
    for (int t = 0; t < threads; ++t)
      pool_.emplace_back([this] {
        while (!stop_.load(std::memory_order_relaxed)) {
          { TRACEML_PHASE_NAMED("flood"); }
          recorded.fetch_add(1, std::memory_order_relaxed);
        }
      });
  }
  ~flood() { stop(); }
  void stop() {
    stop_.store(true);
    for (auto& t : pool_)
      if (t.joinable()) t.join();
  }
  /// Waits until the threads recorded `n` more phases (they may be slow to get a core).
  void wait_for_more(std::uint64_t n) const {
    const std::uint64_t until = recorded.load() + n;
    while (recorded.load() < until) std::this_thread::yield();
  }
  std::atomic<std::uint64_t> recorded{0};

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> pool_;
};

/// Worker threads that record `per_step` phases named `name` inside each step the training thread
/// opens: open(s) releases them into step s, wait_done() returns when all are done with it.
class step_workers {
 public:
  step_workers(int workers, int steps, int per_step, const char* name) : workers_(workers) {
    for (int w = 0; w < workers; ++w)
      pool_.emplace_back([=] {
        for (int s = 1; s <= steps; ++s) {
          {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return generation_ >= s; });
          }
          for (int i = 0; i < per_step; ++i) {
            TRACEML_PHASE_NAMED(name);
          }
          std::lock_guard<std::mutex> lock(mu_);
          ++finished_;
          cv_.notify_all();
        }
      });
  }
  ~step_workers() {
    for (auto& t : pool_) t.join();
  }
  void open(int step) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = 0;
      generation_ = step;
    }
    cv_.notify_all();
  }
  void wait_done() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return finished_ == workers_; });
  }

 private:
  const int workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  int generation_ = 0;
  int finished_ = 0;
  std::vector<std::thread> pool_;
};

std::size_t messages_containing(const std::string& part) {
  std::size_t n = 0;
  for (const auto& m : diagnostic_messages())
    if (m.find(part) != std::string::npos) ++n;
  return n;
}

/// These tests count what each step end takes: the step's end runs on the thread that ends it, so
/// that each drain is one step's (profiler_options::background_step_end: the step worker drains
/// several steps at once, with the limit times their number).
profiler_options quiet_options(std::size_t other_records, bool background = false) {
  profiler_options opts;
  opts.print_table = false;
  opts.warmup_steps = 0;
  opts.max_other_thread_records = other_records;
  opts.background_step_end = background;
  return opts;
}

}  // namespace

TEST_CASE("fair shares: a ring with little loses nothing, the rest is split evenly", "[drain]") {
  using detail::fair_shares;
  using v = std::vector<std::uint64_t>;
  CHECK(fair_shares(v{5, 100, 100}, 45) == v{5, 20, 20});
  CHECK(fair_shares(v{100, 5, 100}, 45) == v{20, 5, 20});  // the ring order is kept
  CHECK(fair_shares(v{3, 4, 5}, 100) == v{3, 4, 5});       // all fit: all taken
  CHECK(fair_shares(v{0, 0, 9000}, 64) == v{0, 0, 64});    // empty rings leave their share to others
  CHECK(fair_shares(v{10, 10, 10}, 0) == v{0, 0, 0});
  CHECK(fair_shares(v{7, 7, 7}, 10) == v{3, 3, 4});  // the limit exactly: the remainder goes last
  CHECK(fair_shares(v{}, 10).empty());
  // Any ring holding at most limit / rings loses nothing, whatever the others hold.
  CHECK(fair_shares(v{9000, 16, 9000, 16}, 64) == v{16, 16, 16, 16});

  SECTION("every case of three rings of 0..7 records, limits 0..24") {
    for (std::uint64_t a = 0; a < 8; ++a)
      for (std::uint64_t b = 0; b < 8; ++b)
        for (std::uint64_t c = 0; c < 8; ++c)
          for (std::uint64_t limit = 0; limit <= 24; ++limit) {
            const v avail{a, b, c};
            const v share = fair_shares(avail, limit);
            INFO(a << " " << b << " " << c << " limit " << limit);
            REQUIRE(share.size() == 3);
            REQUIRE(share[0] + share[1] + share[2] == std::min(limit, a + b + c));
            for (int i = 0; i < 3; ++i) {
              REQUIRE(share[i] <= avail[i]);
              if (avail[i] <= limit / 3) REQUIRE(share[i] == avail[i]);
              // No ring gets more than one record beyond another ring that lost records.
              for (int j = 0; j < 3; ++j)
                if (share[j] < avail[j]) REQUIRE(share[i] <= share[j] + 1);
            }
          }
  }
}

TEST_CASE("a step-end drain takes the calling thread's records whole and at most the limit of others'", "[drain]") {
  reset_recorder();
  constexpr int fillers = 4;
  constexpr std::uint64_t limit = 100;
  // Four threads fill their rings to the brim and exit (an exited thread's records stay drainable).
  std::vector<std::thread> pool;
  for (int t = 0; t < fillers; ++t)
    pool.emplace_back([] {
      for (std::size_t i = 0; i < detail::thread_ring::phase_room; ++i) {
        TRACEML_PHASE_NAMED("filler");
      }
    });
  for (auto& t : pool) t.join();
  // This thread records more than the limit itself: its own records are not capped.
  for (int i = 0; i < 3000; ++i) {
    TRACEML_PHASE(forward);
  }
  std::uint64_t own = 0, others = 0;
  const auto counts = detail::drain_step_end(
      [&](const span_record& r) { (std::string(r.name) == "forward" ? own : others) += 1; }, limit);
  CHECK(own == 3000);
  CHECK(others == limit);  // 25 of each full ring
  CHECK(counts.capped == fillers * detail::thread_ring::phase_room - limit);
  CHECK(counts.capped_rings == fillers);
  CHECK(counts.ring_full == 0);  // exactly full, nothing lost to the rings themselves

  // What was left out is gone, not waiting: the next step end starts from empty rings.
  std::uint64_t next = 0;
  const auto again = detail::drain_step_end([&](const span_record&) { ++next; }, limit);
  CHECK(next == 0);
  CHECK(again.capped == 0);
}

TEST_CASE("threads flooding their rings cannot make a step end hand over more than the limit", "[drain][threads]") {
  reset_recorder();
  constexpr std::uint64_t limit = 64;
  constexpr int rounds = 20;
  flood f(4);
  std::uint64_t capped = 0, ring_full = 0;
  for (int round = 0; round < rounds; ++round) {
    f.wait_for_more(1000);  // at least 1000 records in the rings since the last drain
    std::uint64_t handed = 0;
    const auto counts = detail::drain_step_end([&](const span_record&) { ++handed; }, limit);
    INFO("round " << round);
    CHECK(handed == limit);
    CHECK(counts.capped >= 1000 - limit);
    capped += counts.capped;
    ring_full += counts.ring_full;
  }
  f.stop();
  std::uint64_t rest = 0;
  const auto last = detail::drain_step_end([&](const span_record&) { ++rest; }, limit);
  CHECK(rest <= limit);
  // Every record the threads closed was handed over once, left out, or lost to a full ring.
  CHECK(rounds * limit + rest + capped + last.capped + ring_full + last.ring_full == f.recorded.load());
}

TEST_CASE("what the cap leaves out is counted exactly and said once", "[drain][profiler]") {
  reset_recorder();
  constexpr int workers = 2, steps = 10, per_step = 500;
  constexpr std::size_t limit = 200;
  profiler prof(quiet_options(limit));
  {
    step_workers w(workers, steps, per_step, "worker");
    for (int s = 1; s <= steps; ++s) {
      TRACEML_STEP();
      w.open(s);
      { TRACEML_PHASE(forward); }
      w.wait_done();
    }
  }
  const run_result& r = prof.finish();
  REQUIRE(r.steps.size() == steps);
  for (const auto& st : r.steps) {
    INFO("step " << st.step);
    const auto* worker = st.find(phase_kind::user, "worker");
    REQUIRE(worker != nullptr);
    CHECK(worker->count == static_cast<int>(limit));  // 100 of each worker's 500
    REQUIRE(st.find(phase_kind::forward, "forward") != nullptr);
    CHECK(st.find(phase_kind::forward, "forward")->count == 1);
  }
  CHECK(r.summary.capped_records == std::uint64_t{steps} * (workers * per_step - limit));
  CHECK(r.summary.dropped_records == 0);
  CHECK(messages_containing("max_other_thread_records") == 1);
  CHECK(messages_containing("800 of their records were left out") == 1);  // the first step's count
  // Every output says it.
  CHECK(format_table(r).find("warning: 8000 CPU records of other threads left out at step ends") != std::string::npos);
  CHECK(json_summary({r}).find("\"capped_records\":8000") != std::string::npos);
}

TEST_CASE("next to flooding threads, the training thread and light workers lose nothing", "[drain][profiler]") {
  reset_recorder();
  constexpr int steps = 5, layers = 2000, light = 2, light_per_step = 10;
  constexpr std::size_t limit = 256;
  const bool background = GENERATE(false, true);  // a step end's drain, or the step worker's
  INFO("background_step_end " << background);
  profiler prof(quiet_options(limit, background));
  {
    flood f(4);
    step_workers w(light, steps, light_per_step, "loader");
    for (int s = 1; s <= steps; ++s) {
      TRACEML_STEP();
      w.open(s);
      for (int i = 0; i < layers; ++i) {  // more than the limit: the training thread's own are never capped
        TRACEML_PHASE_NAMED("layer");
      }
      f.wait_for_more(1000);  // the flood fills the other rings well past the limit in every step
      w.wait_done();
    }
  }
  const run_result& r = prof.finish();
  REQUIRE(r.steps.size() == steps);
  for (const auto& st : r.steps) {
    INFO("step " << st.step);
    REQUIRE(st.find(phase_kind::user, "layer") != nullptr);
    CHECK(st.find(phase_kind::user, "layer")->count == layers);
    REQUIRE(st.find(phase_kind::user, "loader") != nullptr);
    CHECK(st.find(phase_kind::user, "loader")->count == light * light_per_step);
    const auto* flooded = st.find(phase_kind::user, "flood");
    // One drain per step end: the flood gets what the light workers leave of the limit.
    if (flooded && !background) CHECK(flooded->count <= static_cast<int>(limit) - light * light_per_step);
  }
  CHECK(r.summary.capped_records >= std::uint64_t{steps} * (1000 - limit));
}

TEST_CASE("steps begun on many threads at once: each is recorded or ignored and counted, said once",
          "[steps][threads]") {
  reset_recorder();
  constexpr int threads = 32, per_thread = 100;
  profiler prof(quiet_options(profiler_options{}.max_other_thread_records));
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      for (int i = 0; i < per_thread; ++i) {
        TRACEML_STEP();
        TRACEML_PHASE(forward);
      }
    });
  for (auto& t : pool) t.join();
  const run_result& r = prof.finish();
  INFO(r.summary.steps << " steps recorded, " << r.summary.overlapping_steps << " ignored");
  CHECK(r.summary.steps + r.summary.overlapping_steps == std::uint64_t{threads} * per_thread);
  CHECK(r.summary.steps > 0);
  // No accepted step lost: the recorded ones are numbered 0, 1, 2, ... without a gap.
  REQUIRE(r.steps.size() == r.summary.steps);
  for (std::size_t i = 0; i < r.steps.size(); ++i) REQUIRE(r.steps[i].step == static_cast<std::int32_t>(i));
  if (r.summary.overlapping_steps > 0) {
    CHECK(messages_containing("a step began while another step was open") == 1);
    CHECK(format_table(r).find(" steps ignored (began while another step was open)") != std::string::npos);
  }
}

TEST_CASE("a step begun while another is open is ignored, its phases count in the open step", "[steps][threads]") {
  reset_recorder();
  profiler prof(quiet_options(profiler_options{}.max_other_thread_records));
  SECTION("on another thread") {
    {
      TRACEML_STEP();
      std::thread([] {
        TRACEML_STEP();  // ignored: step 0 is open on the training thread
        { TRACEML_PHASE_NAMED("other"); }
      }).join();
      { TRACEML_PHASE(forward); }
    }
    { TRACEML_STEP(); }  // the next step begins normally
  }
  SECTION("around it, on the same thread") {
    {
      TRACEML_STEP();
      {
        TRACEML_STEP();
        { TRACEML_PHASE_NAMED("other"); }
      }
      { TRACEML_PHASE(forward); }  // still in step 0: the ignored step's end closed nothing
    }
    { TRACEML_STEP(); }
  }
  SECTION("through trainer hooks, left open at train end") {
    recording_callback hooks;
    {
      TRACEML_STEP();
      std::thread([&] {
        hooks.on_step_begin();  // ignored
        { TRACEML_PHASE_NAMED("other"); }
        hooks.on_train_end();  // discards the ignored step without closing step 0
      }).join();
      { TRACEML_PHASE(forward); }
    }
    { TRACEML_STEP(); }
  }
  const run_result& r = prof.finish();
  REQUIRE(r.steps.size() == 2);
  CHECK(r.summary.overlapping_steps == 1);
  const auto& st = r.steps[0];
  REQUIRE(st.find(phase_kind::user, "other") != nullptr);
  CHECK(st.find(phase_kind::user, "other")->count == 1);
  REQUIRE(st.find(phase_kind::forward, "forward") != nullptr);
  CHECK(st.find(phase_kind::forward, "forward")->count == 1);
  CHECK(r.steps[1].step == 1);
  CHECK(messages_containing("a step began while another step was open") == 1);
  CHECK(json_summary({r}).find("\"overlapping_steps\":1") != std::string::npos);
}
