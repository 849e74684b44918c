// "MxA" schedule parsing.
#include <catch2/catch.hpp>

#include <qwen3/schedule.hpp>

TEST_CASE("schedules parse", "[qwen3][schedule]") {
  auto list = qwen3::parse_schedules("1x4,2x2,4x1");
  REQUIRE(list.size() == 3);
  CHECK(list[0].micro_batch == 1);
  CHECK(list[0].accumulation == 4);
  CHECK(list[1].name() == "2x2");
  CHECK(list[2].effective_batch() == 4);
  CHECK(qwen3::parse_schedules(" 8X1 , 2x4 ").size() == 2);
  CHECK(qwen3::parse_schedule("16x1").micro_batch == 16);
}

TEST_CASE("malformed schedules are rejected with a reason", "[qwen3][schedule]") {
  using row = std::pair<const char*, const char*>;
  auto r = GENERATE(row{"", "empty item"},
                    row{"1x4,,4x1", "empty item"},
                    row{"1x4,", "empty item"},
                    row{"4", "no 'x'"},
                    row{"4*1", "no 'x'"},
                    row{"x4", "missing micro-batch size"},
                    row{"4x", "missing accumulation count"},
                    row{"1x2x2", "more than one 'x'"},
                    row{"ax2", "not a positive integer"},
                    row{"-1x4", "not a positive integer"},
                    row{"1.5x2", "not a positive integer"},
                    row{"0x4", "must be at least 1"},
                    row{"4x0", "must be at least 1"},
                    row{"9999999999x1", "too large"},
                    row{"1x4,2x3", "do not share one effective batch"});
  INFO("input: '" << r.first << "'");
  CHECK_THROWS_WITH(qwen3::parse_schedules(r.first), Catch::Contains(r.second));
}
