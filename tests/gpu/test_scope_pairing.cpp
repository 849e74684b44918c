// scope_pairing: begins paired with ends per thread (innermost first), closed spans found again by
// identity at their step's end, the rest handed back; several threads and pairings at once; past
// its fixed sizes it says so once and drops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "traceml/detail/diagnostics.hpp"
#include "traceml/detail/scope_pairing.hpp"

using traceml::span_record;
using pairing = traceml::detail::scope_pairing<int, std::pair<int, int>>;

namespace {
span_record span(std::uint32_t thread, std::int64_t begin_ns) {
  span_record r;
  r.thread = thread;
  r.begin_ns = begin_ns;
  return r;
}
}  // namespace

TEST_CASE("scope pairing: nested scopes end innermost first, per thread", "[pairing]") {
  pairing p;
  p.begin(1);
  p.begin(2);
  int other_begin = 0;
  bool ended_unopened = true, ended_own = false;
  std::thread t([&] {
    ended_unopened = p.end(other_begin);  // this thread opened nothing: the other stack is not its
    p.begin(10);
    ended_own = p.end(other_begin);
  });
  t.join();
  CHECK_FALSE(ended_unopened);
  CHECK(ended_own);
  CHECK(other_begin == 10);
  int b = 0;
  REQUIRE(p.end(b));
  CHECK(b == 2);
  REQUIRE(p.end(b));
  CHECK(b == 1);
  CHECK_FALSE(p.end(b));
  CHECK(b == 1);  // untouched
}

TEST_CASE("scope pairing: closed spans are taken once by identity, the rest handed back", "[pairing]") {
  pairing p;
  p.closed(span(0, 100), {1, 2});
  p.closed(span(1, 100), {3, 4});  // same begin time, another thread
  p.closed(span(0, 200), {5, 6});
  CHECK(p.take(span(1, 100)) == std::make_pair(3, 4));
  CHECK(p.take(span(1, 100)) == std::make_pair(0, 0));  // taken: gone
  CHECK(p.take(span(2, 300)) == std::make_pair(0, 0));  // never closed
  CHECK(p.take(span(0, 100)) == std::make_pair(1, 2));
  std::vector<std::pair<int, int>> rest;
  p.drop_rest([&](const std::pair<int, int>& c) { rest.push_back(c); });
  REQUIRE(rest.size() == 1);
  CHECK(rest[0] == std::make_pair(5, 6));
  rest.clear();
  p.drop_rest([&](const std::pair<int, int>& c) { rest.push_back(c); });
  CHECK(rest.empty());
  CHECK(p.take(span(0, 200)) == std::make_pair(0, 0));
}

TEST_CASE("scope pairing: a step's end drops only what scopes of that step and earlier ones left", "[pairing]") {
  // A step's end that runs late (on the step worker) must keep what the next step's scopes left.
  pairing p;
  auto in_step = [](std::uint32_t thread, std::int64_t begin, std::int32_t step) {
    span_record r = span(thread, begin);
    r.step = step;
    return r;
  };
  for (int k = 0; k < 40; ++k) p.closed(in_step(k % 3, 1000 + k, k % 4 - 1), {k, k});  // steps -1..2, mixed
  std::vector<int> dropped;
  p.drop_through(0, [&](const std::pair<int, int>& c) { dropped.push_back(c.first); });
  std::sort(dropped.begin(), dropped.end());
  std::vector<int> expected;
  for (int k = 0; k < 40; ++k)
    if (k % 4 - 1 <= 0) expected.push_back(k);
  CHECK(dropped == expected);  // outside any step (-1) and step 0
  CHECK(p.closed_count() == 20);
  for (int k = 0; k < 40; ++k) {
    const auto c = p.take(in_step(k % 3, 1000 + k, k % 4 - 1));
    CHECK(c == (k % 4 - 1 <= 0 ? std::make_pair(0, 0) : std::make_pair(k, k)));  // later steps kept, findable
  }
  CHECK(p.closed_count() == 0);
}

TEST_CASE("scope pairing: threads pair their own scopes at the same time, without a lock", "[pairing]") {
  pairing p;
  constexpr int threads = 8, rounds = 2000;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        const int base = t * 1'000'000 + r * 10;
        for (int d = 0; d < 3; ++d) p.begin(base + d);  // step > phase > user phase
        for (int d = 2; d >= 0; --d) {
          int o = -1;
          if (!p.end(o) || o != base + d) mismatches.fetch_add(1);
        }
        int none = -1;
        if (p.end(none)) mismatches.fetch_add(1);  // nothing left open on this thread
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(mismatches.load() == 0);
}

TEST_CASE("scope pairing: a backward scope ended on an autograd thread is found by its identity", "[pairing]") {
  pairing p;
  p.begin(1);  // the step, on the training thread
  std::thread autograd([&] {
    p.begin(7);
    int o = 0;
    REQUIRE(p.end(o));
    CHECK(o == 7);
    p.closed(span(3, 150), {7, 8});  // the autograd thread's recorder index is 3
  });
  autograd.join();
  int o = 0;
  REQUIRE(p.end(o));
  CHECK(o == 1);
  p.closed(span(0, 100), {1, 2});
  CHECK(p.closed_count() == 2);
  CHECK(p.take(span(0, 100)) == std::make_pair(1, 2));
  CHECK(p.take(span(3, 150)) == std::make_pair(7, 8));
  CHECK(p.closed_count() == 0);
}

TEST_CASE("scope pairing: two pairings alive keep separate stacks and spans", "[pairing]") {
  pairing a;
  traceml::detail::scope_pairing<double, int> b;
  a.begin(1);
  b.begin(1.5);
  a.begin(2);
  b.begin(2.5);
  int x = 0;
  double y = 0;
  REQUIRE(b.end(y));
  CHECK(y == 2.5);
  REQUIRE(a.end(x));
  CHECK(x == 2);
  REQUIRE(a.end(x));
  CHECK(x == 1);
  REQUIRE(b.end(y));
  CHECK(y == 1.5);
  CHECK_FALSE(a.end(x));
  CHECK_FALSE(b.end(y));
  a.closed(span(0, 10), {1, 1});
  b.closed(span(0, 10), 5);
  CHECK(b.take(span(0, 10)) == 5);
  CHECK(a.take(span(0, 10)) == std::make_pair(1, 1));
}

TEST_CASE("scope pairing: nesting past the stack is said once and dropped, pairs stay right", "[pairing]") {
  traceml::reset_diagnostics(/*quiet=*/true);
  pairing p(/*max_closed=*/16, /*max_depth=*/4);
  for (int d = 1; d <= 6; ++d) CHECK(p.begin(d) == (d <= 4));
  int o = 0;
  CHECK_FALSE(p.end(o));  // 6 and 5 were dropped
  CHECK_FALSE(p.end(o));
  for (int d = 4; d >= 1; --d) {
    REQUIRE(p.end(o));
    CHECK(o == d);
  }
  CHECK_FALSE(p.end(o));
  for (int d = 1; d <= 6; ++d) p.begin(d);  // again: not said twice
  const auto msgs = traceml::diagnostic_messages();
  REQUIRE(msgs.size() == 1);
  CHECK(msgs[0].find("nested deeper") != std::string::npos);
}

TEST_CASE("scope pairing: closed spans past the table are said once and dropped", "[pairing]") {
  traceml::reset_diagnostics(/*quiet=*/true);
  pairing p(/*max_closed=*/8);
  for (int i = 0; i < 10; ++i) CHECK(p.closed(span(0, i), {i, i}) == (i < 8));
  CHECK(p.closed(span(0, 3), {30, 30}));  // a known identity is updated even when full
  CHECK(p.closed_count() == 8);
  CHECK(p.take(span(0, 9)) == std::make_pair(0, 0));  // dropped
  CHECK(p.take(span(0, 3)) == std::make_pair(30, 30));
  CHECK(p.closed(span(0, 9), {9, 9}));  // room again
  REQUIRE(traceml::diagnostic_messages().size() == 1);
  CHECK(traceml::diagnostic_messages()[0].find("more closed GPU scopes") != std::string::npos);
}

TEST_CASE("scope pairing: many closed spans, taken in any order, each found once", "[pairing]") {
  pairing p;  // 4096 closed spans, table of 8192: long probe runs and many shifted deletions
  std::mt19937 rng(7);
  std::vector<span_record> spans;
  for (int i = 0; i < 4000; ++i) spans.push_back(span(rng() % 4, static_cast<std::int64_t>(rng() % 100000) * 1000));
  std::vector<span_record> unique;
  for (const auto& s : spans) {
    bool seen = false;
    for (const auto& u : unique) seen |= u.thread == s.thread && u.begin_ns == s.begin_ns;
    if (!seen) unique.push_back(s);
  }
  for (std::size_t i = 0; i < unique.size(); ++i)
    REQUIRE(p.closed(unique[i], {static_cast<int>(i), static_cast<int>(unique[i].thread)}));
  std::shuffle(unique.begin(), unique.end(), rng);
  const std::size_t kept = unique.size() / 3;
  int wrong = 0;
  for (std::size_t i = kept; i < unique.size(); ++i) {
    const auto c = p.take(unique[i]);
    wrong += c.second != static_cast<int>(unique[i].thread) || c == std::make_pair(0, 0);
    wrong += p.take(unique[i]) != std::make_pair(0, 0);  // gone once taken
  }
  CHECK(wrong == 0);
  CHECK(p.closed_count() == kept);
  std::size_t rest = 0;
  p.drop_rest([&](const std::pair<int, int>&) { ++rest; });
  CHECK(rest == kept);
  CHECK(p.closed_count() == 0);
}

TEST_CASE("scope pairing: a thread that exits with scopes open leaves nothing to the next one", "[pairing]") {
  pairing p;
  for (int i = 0; i < 3; ++i) {
    std::thread([&] { p.begin(100 + i); }).join();  // exits with its scope open; its slot is reused
  }
  bool ended = true, own = false;
  int o = 0;
  std::thread([&] {
    ended = p.end(o);  // not this thread's scope
    p.begin(5);
    own = p.end(o);
  }).join();
  CHECK_FALSE(ended);
  CHECK(own);
  CHECK(o == 5);
}

TEST_CASE("scope pairing: more threads than slots are said once, and slots come back", "[pairing]") {
  traceml::reset_diagnostics(/*quiet=*/true);
  pairing p;
  constexpr int threads = static_cast<int>(traceml::detail::max_pairing_threads) + 6;
  std::atomic<int> arrived{0}, kept{0}, paired{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const bool ok = p.begin(t);
      kept.fetch_add(ok);
      arrived.fetch_add(1);
      while (!go.load()) std::this_thread::yield();  // all alive at once
      int o = -1;
      paired.fetch_add(p.end(o) == ok && (!ok || o == t));
    });
  }
  while (arrived.load() < threads) std::this_thread::yield();
  go.store(true);
  for (auto& th : pool) th.join();
  CHECK(kept.load() <= static_cast<int>(traceml::detail::max_pairing_threads));
  CHECK(kept.load() >= static_cast<int>(traceml::detail::max_pairing_threads) - 1);  // this thread may hold one
  CHECK(paired.load() == threads);
  REQUIRE(traceml::diagnostic_messages().size() == 1);
  CHECK(traceml::diagnostic_messages()[0].find("more than 64 threads") != std::string::npos);
  bool ok = false;
  std::thread([&] {
    ok = p.begin(1);
    int o = 0;
    ok = ok && p.end(o) && o == 1;
  }).join();
  CHECK(ok);
}
