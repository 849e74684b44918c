// The recording schedule (recording_schedule.hpp), pure: torch.profiler.schedule's layout of skipped,
// wait, warm-up and active steps, checked step by step against sequences written out by hand.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "traceml/gpu/recording_schedule.hpp"

using namespace traceml;

namespace {

/// One letter per step: s skip, w wait, u warm-up, a active, L last active step of its cycle, . done.
char letter(const schedule_slot& s) {
  switch (s.phase) {
    case schedule_phase::skip: return 's';
    case schedule_phase::wait: return 'w';
    case schedule_phase::warmup: return 'u';
    case schedule_phase::active: return s.last_active ? 'L' : 'a';
    case schedule_phase::done: return '.';
    case schedule_phase::unscheduled: return '?';
  }
  return '?';
}

/// The schedule's letters for steps first .. first + n - 1.
std::string letters(const recording_schedule& sch, std::int64_t n, std::int64_t first = 0) {
  std::string out;
  for (std::int64_t i = first; i < first + n; ++i) out += letter(sch.at(i));
  return out;
}

std::vector<int> cycles(const recording_schedule& sch, std::int64_t n) {
  std::vector<int> out;
  for (std::int64_t i = 0; i < n; ++i) out.push_back(sch.at(i).cycle);
  return out;
}

}  // namespace

TEST_CASE("torch.profiler's example: wait 1, warmup 1, active 3, repeat 2", "[schedule]") {
  const recording_schedule s(1, 1, 3, 2);
  CHECK(letters(s, 14) ==
        "wuaaL"
        "wuaaL"
        "....");
  CHECK(cycles(s, 12) == std::vector<int>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, -1, -1});
  CHECK(s.first_active(0) == 2);
  CHECK(s.first_active(1) == 7);
  CHECK(s.at(1'000'000).phase == schedule_phase::done);
  CHECK(s.describe() == "schedule(skip_first=0, wait=1, warmup=1, active=3, repeat=2)");
}

TEST_CASE("skip_first comes before the first cycle, and nothing is counted in it", "[schedule]") {
  SECTION("skip 2, then three one-step windows back to back") {
    const recording_schedule s(0, 0, 1, 3, 2);
    CHECK(letters(s, 8) ==
          "ss"
          "L"
          "L"
          "L"
          "...");
    CHECK(cycles(s, 6) == std::vector<int>{-1, -1, 0, 1, 2, -1});
    CHECK(s.first_active(2) == 4);
  }
  SECTION("skip 1, one cycle of two warm-up steps and one active step") {
    const recording_schedule s(0, 2, 1, 1, 1);
    CHECK(letters(s, 7) ==
          "s"
          "uuL"
          "...");
  }
  SECTION("skip 3 with wait 2: the first cycle's wait follows the skipped steps") {
    const recording_schedule s(2, 1, 2, 1, 3);
    CHECK(letters(s, 12) ==
          "sss"
          "wwuaL"
          "....");
    CHECK(s.first_active(0) == 6);
  }
}

TEST_CASE("repeat 0 cycles until the run ends", "[schedule]") {
  const recording_schedule s(2, 0, 2);
  CHECK(letters(s, 12) ==
        "wwaL"
        "wwaL"
        "wwaL");
  // Step 1000 is the first step of cycle 250; step 1003 closes it.
  CHECK(letters(s, 4, 1000) == "wwaL");
  CHECK(s.at(1003).cycle == 250);
  CHECK(s.first_active(250) == 1002);
}

TEST_CASE("without wait and warm-up, windows follow each other without a gap", "[schedule]") {
  const recording_schedule s(0, 0, 3);
  CHECK(letters(s, 9) ==
        "aaL"
        "aaL"
        "aaL");
  CHECK(cycles(s, 7) == std::vector<int>{0, 0, 0, 1, 1, 1, 2});
  for (int i = 0; i < 9; ++i) CHECK(s.at(i).records_on());
}

TEST_CASE("records are on in warm-up and active steps only", "[schedule]") {
  const recording_schedule s(1, 1, 1, 1, 1);
  CHECK(letters(s, 5) == "swuL.");
  const std::vector<bool> on = {false, false, true, true, false};
  for (int i = 0; i < 5; ++i) CHECK(s.at(i).records_on() == on[static_cast<std::size_t>(i)]);
}

TEST_CASE("steps outside any step (negative numbers) are skipped", "[schedule]") {
  const recording_schedule s(0, 0, 1);
  CHECK(s.at(-1).phase == schedule_phase::skip);
  CHECK_FALSE(s.at(-1).records_on());
}

TEST_CASE("huge counts do not overflow the cycle length", "[schedule]") {
  const recording_schedule s(INT32_MAX, INT32_MAX, INT32_MAX, 1);
  CHECK(s.cycle_length() == 3 * static_cast<std::int64_t>(INT32_MAX));
  CHECK(s.at(INT32_MAX).phase == schedule_phase::warmup);
  CHECK(s.at(2 * static_cast<std::int64_t>(INT32_MAX)).phase == schedule_phase::active);
  CHECK(s.at(3 * static_cast<std::int64_t>(INT32_MAX) - 1).last_active);
  CHECK(s.at(3 * static_cast<std::int64_t>(INT32_MAX)).phase == schedule_phase::done);
}

TEST_CASE("invalid schedules are rejected with the argument and its value", "[schedule]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_AS(recording_schedule(1, 1, 0), std::invalid_argument);
  CHECK_THROWS_WITH(recording_schedule(1, 1, 0),
                    Contains("active must be 1 or more, got 0") && Contains("records nothing"));
  CHECK_THROWS_WITH(recording_schedule(-1, 1, 1), Contains("wait must be 0 or more, got -1"));
  CHECK_THROWS_WITH(recording_schedule(0, -2, 1), Contains("warmup must be 0 or more, got -2"));
  CHECK_THROWS_WITH(recording_schedule(0, 0, -3), Contains("active must be 1 or more, got -3"));
  CHECK_THROWS_WITH(recording_schedule(0, 0, 1, -1), Contains("repeat must be 0 or more, got -1"));
  CHECK_THROWS_WITH(recording_schedule(0, 0, 1, 0, -5), Contains("skip_first must be 0 or more, got -5"));
  CHECK_NOTHROW(recording_schedule(0, 0, 1, 0, 0));
}
