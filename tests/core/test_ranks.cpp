// Several ranks merged (ranks.hpp): slowest rank, waits and skew on hand-computed steps, missing
// ranks, steps not on every rank, and bad input.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "traceml/analysis/ranks.hpp"
#include "test_helpers.hpp"

using traceml::rank_step;
using traceml::rank_steps;

namespace {

using traceml_test::contains;

/// Steps 0..n-1 of one rank: equal step times (they leave the all-reduce together), the given
/// communication times.
rank_steps rank_of(int rank, const std::vector<double>& wall, const std::vector<double>& comm) {
  rank_steps r{rank, {}};
  for (std::size_t i = 0; i < wall.size(); ++i) r.steps.push_back({i, wall[i], comm[i]});
  return r;
}

// Step 0 is warm-up. Steps 1..3: every rank's step is 50/52/51 ms; compute (step - communication):
//   rank 0: 40 40 40   rank 1: 30 50 30   rank 2: 50 30 50
std::vector<rank_steps> three_ranks() {
  return {rank_of(0, {100, 50, 52, 51}, {0, 10, 12, 11}), rank_of(1, {100, 50, 52, 51}, {0, 20, 2, 21}),
          rank_of(2, {100, 50, 52, 51}, {0, 0, 22, 1})};
}

}  // namespace

TEST_CASE("the slowest rank is the one with the most compute, the others wait for it", "[ranks]") {
  const auto m = traceml::merge_ranks(three_ranks(), 3, /*warmup=*/1);
  CHECK(m.missing.empty());
  REQUIRE(m.steps.size() == 3);
  CHECK(m.steps[0].step == 1);
  CHECK(m.steps[0].slowest_rank == 2);
  CHECK(m.steps[1].slowest_rank == 1);
  CHECK(m.steps[2].slowest_rank == 2);
  CHECK(m.ranks[0].slowest_on == 0);
  CHECK(m.ranks[1].slowest_on == 1);
  CHECK(m.ranks[2].slowest_on == 2);
  CHECK(m.most_often_slowest == 2);
  // Waits: the slowest compute (50) minus the rank's own, per step.
  CHECK(m.ranks[0].wait_ms.median == Approx(10));  // 10 10 10
  CHECK(m.ranks[1].wait_ms.median == Approx(20));  // 20 0 20
  CHECK(m.ranks[2].wait_ms.median == Approx(0));   // 0 20 0
  CHECK(m.ranks[2].wait_ms.max == Approx(20));
  CHECK(m.ranks[0].compute_ms.median == Approx(40));
  CHECK(m.ranks[1].communication_ms.median == Approx(20));  // 20 2 21
  CHECK(m.ranks[0].step_ms.median == Approx(51));           // 50 52 51, warm-up's 100 left out
  CHECK(m.ranks[0].recorded == 4);
  // Skew: equal step times, none; compute 30/40/50 on every step: max 50 - median 40.
  CHECK(m.step_skew_ms.max == Approx(0));
  CHECK(m.compute_skew_ms.median == Approx(10));
  CHECK(m.compute_skew_ms.count == 3);
  CHECK(m.has_communication);

  const auto t = traceml::format_rank_table(m);
  CHECK(contains(t, "ranks: 3 of 3 reported\n"));
  CHECK(contains(t, "3 steps compared: those every reporting rank recorded, after 1 warm-up\n"));
  CHECK(contains(t,
                 "rank 2 was the slowest on 2 of 3 steps; the other ranks waited for the slowest a median 10.0..20.0 "
                 "ms per step"));
  CHECK(contains(t, "of compute: median 10.00 ms"));
  // Rank 1's row: 4 recorded, step 51.0, compute 30.0, comm 20.0, waits 20.0, slowest on 1 of 3.
  CHECK(contains(t, "\n1              4        51.0        30.0        20.0        20.0      1 (33%)\n"));
}

TEST_CASE("a rank that reported nothing is named missing, the others are still compared", "[ranks]") {
  auto got = three_ranks();
  got.push_back({4, {}});  // rank 4 connected but no step arrived
  const auto m = traceml::merge_ranks(got, 5, 1);
  CHECK(m.missing == std::vector<int>{3, 4});
  CHECK_FALSE(m.ranks[3].present);
  CHECK(m.steps.size() == 3);
  CHECK(m.most_often_slowest == 2);
  const auto t = traceml::format_rank_table(m);
  CHECK(contains(t, "ranks: 3 of 5 reported; missing: ranks 3, 4 (no steps arrived: it died, hung or wrote nothing)"));
  CHECK(contains(t, "\n3              -  missing\n"));

  const auto none = traceml::merge_ranks({}, 2);
  CHECK(none.missing == std::vector<int>{0, 1});
  CHECK(contains(traceml::format_rank_table(none), "nothing to compare"));
}

TEST_CASE("a step that one rank lacks is left out of every figure, and counted", "[ranks]") {
  auto got = three_ranks();
  got[1].steps.pop_back();  // rank 1 died before step 3 ended
  const auto m = traceml::merge_ranks(got, 3, 1);
  REQUIRE(m.steps.size() == 2);
  CHECK(m.dropped_not_common == 1);
  CHECK(m.ranks[0].step_ms.count == 2);  // rank 0 recorded step 3, but it is not compared
  CHECK(m.ranks[2].slowest_on == 1);
  CHECK(m.ranks[1].slowest_on == 1);
  CHECK(m.most_often_slowest == 1);  // a tie in count goes to the lower rank
  CHECK(contains(traceml::format_rank_table(m),
                 "2 steps compared: those every reporting rank recorded, after 1 warm-up "
                 "(1 more left out: not on every rank)"));
}

TEST_CASE("without communication phases the longest step is the slowest", "[ranks]") {
  const auto m = traceml::merge_ranks({rank_of(0, {10, 12}, {0, 0}), rank_of(1, {14, 11}, {0, 0})}, 2);
  CHECK_FALSE(m.has_communication);
  CHECK(m.steps[0].slowest_rank == 1);
  CHECK(m.steps[1].slowest_rank == 0);
  CHECK(m.ranks[0].wait_ms.median == Approx(2));  // 4 and 0
  // Two ranks: the median is their mean, so the skew is half the difference.
  CHECK(m.steps[0].step_skew_ms == Approx(2));
  CHECK(contains(traceml::format_rank_table(m), "no communication phase recorded"));
}

TEST_CASE("impossible input is refused by name", "[ranks]") {
  CHECK_THROWS_WITH(traceml::merge_ranks({}, 0), Catch::Contains("world size 0 (must be at least 1)"));
  CHECK_THROWS_WITH(traceml::merge_ranks({rank_of(2, {1}, {0})}, 2), Catch::Contains("rank 2 is outside 0..1"));
  CHECK_THROWS_WITH(traceml::merge_ranks({rank_of(0, {1}, {0}), rank_of(0, {1}, {0})}, 2),
                    Catch::Contains("rank 0 reported twice"));
  rank_steps twice{0, {{3, 1, 0}, {3, 2, 0}}};
  CHECK_THROWS_WITH(traceml::merge_ranks({twice}, 1), Catch::Contains("rank 0 has step 3 twice"));
}
