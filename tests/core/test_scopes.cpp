// Behaviour of RAII scopes: numbering, nesting, names, run-time switch, several threads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <thread>

#include "test_helpers.hpp"

using namespace traceml;
using traceml_test::drain;
using traceml_test::reset_recorder;

namespace {
struct tokenize {
  static constexpr const char* name = "tokenize";
};
struct allreduce {
  static constexpr phase_kind kind = phase_kind::communication;
  static constexpr const char* name = "allreduce";
};

const span_record& find(const std::vector<span_record>& v, const char* name, int nth = 0) {
  for (const auto& r : v)
    if (std::string(r.name) == name && nth-- == 0) return r;
  FAIL("no record named " << name);
  return v.front();
}
}  // namespace

TEST_CASE("a scope records one closed interval with its kind and name", "[scopes]") {
  reset_recorder();
  const auto before = now_ns();
  {
    TRACEML_PHASE(forward);
    traceml_test::spin_for(std::chrono::microseconds(200));
  }
  const auto after = now_ns();
  auto recs = drain();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].kind == phase_kind::forward);
  CHECK(std::string(recs[0].name) == "forward");
  CHECK(recs[0].begin_ns >= before);
  CHECK(recs[0].end_ns <= after);
  CHECK(recs[0].duration_ns() >= 200'000);
  CHECK(recs[0].step == -1);  // outside any step
  CHECK(recs[0].microbatch == -1);
  CHECK(recs[0].nesting == 0);
}

TEST_CASE("steps and micro-batches are numbered and phases carry them", "[scopes]") {
  reset_recorder();
  for (int s = 0; s < 3; ++s) {
    TRACEML_STEP();
    for (int m = 0; m < 2; ++m) {
      TRACEML_MICROBATCH();
      TRACEML_PHASE(forward);
    }
    TRACEML_PHASE(optimizer);
  }
  auto recs = drain();
  REQUIRE(recs.size() == 3 * (1 + 2 * 2 + 1));
  for (int s = 0; s < 3; ++s) {
    CHECK(find(recs, "step", s).step == s);
    for (int m = 0; m < 2; ++m) {
      const auto& fwd = find(recs, "forward", s * 2 + m);
      CHECK(fwd.step == s);
      CHECK(fwd.microbatch == m);
      const auto& mb = find(recs, "microbatch", s * 2 + m);
      CHECK(mb.microbatch == m);
      CHECK(mb.begin_ns <= fwd.begin_ns);
      CHECK(mb.end_ns >= fwd.end_ns);
    }
    // The optimizer runs after the micro-batches closed: inside the step, outside any micro-batch.
    CHECK(find(recs, "optimizer", s).step == s);
    CHECK(find(recs, "optimizer", s).microbatch == -1);
  }
}

TEST_CASE("nested phases record their depth, user phases by tag and by name", "[scopes]") {
  reset_recorder();
  {
    TRACEML_STEP();
    {
      TRACEML_PHASE(forward);
      {
        TRACEML_PHASE_TAG(tokenize);
        { TRACEML_PHASE_NAMED("inner"); }
      }
    }
    { scoped_phase<allreduce> a; }
    { named_phase n("backward"); }  // a built-in name gives the built-in kind
  }
  auto recs = drain();
  CHECK(find(recs, "forward").nesting == 0);
  CHECK(find(recs, "tokenize").nesting == 1);
  CHECK(find(recs, "tokenize").kind == phase_kind::user);
  CHECK(find(recs, "inner").nesting == 2);
  CHECK(find(recs, "allreduce").kind == phase_kind::communication);
  CHECK(find(recs, "allreduce").nesting == 0);
  CHECK(find(recs, "backward").kind == phase_kind::backward);
  CHECK(find(recs, "step").nesting == 0);
  // Inner scopes close first.
  CHECK(find(recs, "inner").end_ns <= find(recs, "tokenize").end_ns);
  CHECK(find(recs, "tokenize").end_ns <= find(recs, "forward").end_ns);
}

TEST_CASE("recording can be switched off at run time", "[scopes]") {
  reset_recorder();
  set_enabled(false);
  CHECK_FALSE(enabled());
  {
    TRACEML_STEP();
    TRACEML_PHASE(forward);
  }
  CHECK(drain().empty());
  set_enabled(true);
  CHECK(enabled());
  { TRACEML_PHASE(forward); }
  CHECK(drain().size() == 1);
}

TEST_CASE("a null or empty phase name records nothing and breaks nothing", "[scopes]") {
  reset_recorder();
  const char* null_name = nullptr;
  {
    named_phase a(null_name);
    named_phase b("");
    named_phase c(phase_kind::forward, null_name);
    TRACEML_PHASE_NAMED("kept");
  }
  CHECK(phase_kind_from_name(null_name) == phase_kind::user);
  const auto recs = drain();
  REQUIRE(recs.size() == 1);
  CHECK(std::string(recs[0].name) == "kept");
  CHECK(recs[0].nesting == 0);  // the ignored scopes opened no nesting level
}

TEST_CASE("a scope opened while on and closed while off is still recorded whole", "[scopes]") {
  reset_recorder();
  {
    TRACEML_PHASE(backward);
    set_enabled(false);
  }
  set_enabled(true);
  auto recs = drain();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].kind == phase_kind::backward);
}

TEST_CASE("several threads record at once into their own rings", "[scopes][threads]") {
  reset_recorder();
  constexpr int threads = 4, per_thread = 2000;
  std::atomic<int> ready{0};
  std::vector<std::thread> workers;
  {
    TRACEML_STEP();
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&] {
        ++ready;
        while (ready.load() < threads) {
        }
        for (int i = 0; i < per_thread; ++i) {
          TRACEML_PHASE_NAMED("worker");
        }
      });
    for (auto& w : workers) w.join();
  }
  auto recs = drain();
  const auto n =
      std::count_if(recs.begin(), recs.end(), [](const span_record& r) { return std::string(r.name) == "worker"; });
  CHECK(n == threads * per_thread);
  std::vector<std::uint32_t> ids;
  for (const auto& r : recs)
    if (std::string(r.name) == "worker") {
      CHECK(r.step == 0);  // the step was open on the training thread
      ids.push_back(r.thread);
    }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  CHECK(ids.size() == threads);
  const auto& step = find(recs, "step");
  CHECK(std::find(ids.begin(), ids.end(), step.thread) == ids.end());
}

TEST_CASE("a full ring drops and counts records instead of blocking", "[scopes]") {
  reset_recorder();
  const std::size_t extra = 10;
  for (std::size_t i = 0; i < detail::thread_ring::capacity + extra; ++i) {
    TRACEML_PHASE(forward);
  }
  std::size_t seen = 0;
  const auto dropped = detail::drain_all([&](const span_record&) { ++seen; });
  CHECK(seen == detail::thread_ring::phase_room);  // phases leave the reserve to step ends
  CHECK(dropped == detail::thread_ring::capacity + extra - detail::thread_ring::phase_room);
}

TEST_CASE("a ring full of phases keeps room for micro-batch and step records", "[scopes]") {
  reset_recorder();
  using detail::thread_ring;
  static_assert(thread_ring::phase_room + thread_ring::reserved == thread_ring::capacity);
  static_assert(thread_ring::reserved >= 2);
  std::size_t micro_kept = 0, steps_kept = 0, phases_kept = 0;
  {
    TRACEML_STEP();
    {
      TRACEML_MICROBATCH();
      for (std::size_t i = 0; i < thread_ring::capacity; ++i) {
        TRACEML_PHASE(forward);
      }
    }
    // Micro-batches may fill the reserve but its last slot, which waits for the step.
    for (std::size_t i = 0; i < thread_ring::reserved; ++i) {
      TRACEML_MICROBATCH();
    }
  }
  const std::uint64_t dropped = detail::drain_all([&](const span_record& r) {
    if (r.kind == phase_kind::step)
      ++steps_kept;
    else if (r.kind == phase_kind::microbatch)
      ++micro_kept;
    else
      ++phases_kept;
  });
  CHECK(phases_kept == thread_ring::phase_room);
  // 1 + reserved micro-batches closed after the phases filled their room: the reserve but the
  // step's slot holds reserved - 1 of them.
  CHECK(micro_kept == thread_ring::reserved - 1);
  CHECK(steps_kept == 1);
  CHECK(dropped == (thread_ring::capacity - thread_ring::phase_room) + 2);
}

TEST_CASE("rings of exited threads are reused once drained", "[scopes][threads]") {
  reset_recorder();
  std::size_t rings_before = 0;
  for (int round = 0; round < 5; ++round) {
    std::thread([] { TRACEML_PHASE(dataloader); }).join();
    CHECK(drain().size() == 1);  // as the profiler does at each step end
    if (round == 0) {
      detail::lock_guard lock(detail::recorder().registry_mu);
      rings_before = detail::recorder().rings.size();
    }
  }
  {
    detail::lock_guard lock(detail::recorder().registry_mu);
    CHECK(detail::recorder().rings.size() == rings_before);
  }
  // An exited thread's undrained ring is not handed to a new thread: the new thread gets a whole
  // ring's room, so nothing it records is dropped.
  const std::size_t almost_full = detail::thread_ring::phase_room - 1;
  std::thread([&] {
    for (std::size_t i = 0; i < almost_full; ++i) {
      TRACEML_PHASE(dataloader);
    }
  }).join();
  std::thread([] {
    for (int i = 0; i < 10; ++i) {
      TRACEML_PHASE(forward);
    }
  }).join();
  std::size_t seen = 0;
  CHECK(detail::drain_all([&](const span_record&) { ++seen; }) == 0);
  CHECK(seen == almost_full + 10);
}

TEST_CASE("now_ns keeps steady_clock's pace and axis, whichever counter it reads", "[clock]") {
  const auto steady = [] { return detail::steady_ns(); };
  const std::int64_t a = now_ns(), sa = steady();
  traceml_test::spin_for(std::chrono::milliseconds(50));
  const std::int64_t b = now_ns(), sb = steady();
  INFO("clock reads the TSC: " << clock_uses_tsc());
  // Same axis: the two clocks agree to a few milliseconds at most (bounds leave room for a
  // preemption between the paired reads on a loaded machine)...
  CHECK(std::llabs(a - sa) < 5'000'000);
  // ...and the same rate: 50 ms measured both ways differ by less than 1% (a miscalibrated TSC
  // frequency would be off by far more).
  CHECK(std::llabs((b - a) - (sb - sa)) < 500'000);
  // Monotonic.
  std::int64_t prev = now_ns();
  for (int i = 0; i < 100000; ++i) {
    const std::int64_t t = now_ns();
    REQUIRE(t >= prev);
    prev = t;
  }
}
