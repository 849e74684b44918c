// scope_pairing: begins paired with ends per thread (innermost first), closed spans found again by
// identity at their step's end, the rest handed back.
#include <catch2/catch.hpp>

#include <thread>
#include <utility>
#include <vector>

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
