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
  auto r = GENERATE(
      row{"", "empty item"}, row{"1x4,,4x1", "empty item"}, row{"1x4,", "empty item"}, row{"4", "no 'x'"},
      row{"4*1", "no 'x'"}, row{"x4", "missing micro-batch size"}, row{"4x", "missing accumulation count"},
      row{"1x2x2", "more than one 'x'"}, row{"ax2", "not a positive integer"}, row{"-1x4", "not a positive integer"},
      row{"1.5x2", "not a positive integer"}, row{"0x4", "must be at least 1"}, row{"4x0", "must be at least 1"},
      row{"9999999999x1", "too large"}, row{"1x4,2x3", "do not share one effective batch"},
      row{"1x4,1x4", "schedule 1x4 is given twice"}, row{"1x4,2x2, 01X4", "schedule 1x4 is given twice"});
  INFO("input: '" << r.first << "'");
  CHECK_THROWS_WITH(qwen3::parse_schedules(r.first), Catch::Contains(r.second));
}

TEST_CASE("schedule sizes are bounded and their products overflow-checked", "[qwen3][schedule][validation]") {
  // 999999999 x 999999999 parses digit-wise; M x A x seq_len then overflowed (undefined behaviour).
  CHECK_THROWS_AS(qwen3::parse_schedules("999999999x999999999"), std::invalid_argument);
  CHECK_THROWS_WITH(qwen3::parse_schedules("999999999x999999999"), Catch::Contains("schedule '999999999x999999999'") &&
                                                                       Catch::Contains("999999998000000001 examples") &&
                                                                       Catch::Contains("the limit is 1048576 (2^20)"));
  CHECK(qwen3::parse_schedule("1024x1024").effective_batch() == qwen3::max_examples_per_step);
  CHECK_THROWS_WITH(qwen3::parse_schedule("1025x1024"), Catch::Contains("1049600 examples per optimizer step"));

  CHECK(qwen3::tokens_per_step(qwen3::parse_schedule("2x2"), 512) == 2048);
  const auto big = qwen3::parse_schedule("1024x1024");
  CHECK_THROWS_AS(qwen3::tokens_per_step(big, std::int64_t{1} << 50), std::invalid_argument);
  CHECK_THROWS_WITH(
      qwen3::tokens_per_step(big, std::int64_t{1} << 50),
      Catch::Contains("schedule 1024x1024 at sequence length 1125899906842624") && Catch::Contains("overflows"));
}
