// Training examples: determinism, schedule independence, and the token file format.
#include <catch2/catch.hpp>

#include <fstream>

#include "helpers.hpp"

using qwen3_test::temp_dir;

TEST_CASE("synthetic examples depend only on seed and index", "[qwen3][data]") {
  qwen3::synthetic_tokens a(1000, 32, 42), b(1000, 32, 42), c(1000, 32, 43);
  CHECK(torch::equal(a.examples(5, 3), b.examples(5, 3)));
  CHECK(torch::equal(a.examples(6, 1)[0], a.examples(5, 3)[1]));  // order of generation is irrelevant
  CHECK_FALSE(torch::equal(a.examples(5, 1), c.examples(5, 1)));
  CHECK_FALSE(torch::equal(a.examples(0, 1), a.examples(1, 1)));
  auto e = a.examples(0, 64);
  CHECK(e.min().item<std::int64_t>() >= 0);
  CHECK(e.max().item<std::int64_t>() < 1000);
  CHECK(e.max().item<std::int64_t>() > 900);  // spans the vocabulary
}

TEST_CASE("every schedule feeds the same examples to the same optimizer step", "[qwen3][data]") {
  qwen3::synthetic_tokens data(500, 16, 1);
  const auto schedules = qwen3::parse_schedules("1x4,2x2,4x1");
  for (std::int64_t step = 0; step < 3; ++step) {
    std::vector<torch::Tensor> per_schedule;
    for (const auto& s : schedules) {
      std::vector<torch::Tensor> micro;
      for (std::int64_t k = 0; k < s.accumulation; ++k) micro.push_back(qwen3::microbatch(data, s, step, k));
      per_schedule.push_back(torch::cat(micro, 0));
    }
    CHECK(per_schedule[0].size(0) == 4);
    CHECK(torch::equal(per_schedule[0], per_schedule[1]));
    CHECK(torch::equal(per_schedule[0], per_schedule[2]));
  }
}

TEST_CASE("token files: little-endian uint32, cut into examples", "[qwen3][data]") {
  temp_dir dir("tokens");
  const auto path = dir.file("ids.u32");

  SECTION("round trip, chunking and wrap-around") {
    std::vector<std::uint32_t> ids;
    for (std::uint32_t i = 0; i < 26; ++i) ids.push_back(i * 3);
    qwen3::token_file::write(path, ids);
    qwen3::token_file f(path, 100, 8);
    CHECK(f.num_examples() == 3);  // 26 tokens: three examples of 8, 2 left over
    auto e = f.examples(0, 4);
    CHECK(e[1][0].item<std::int64_t>() == 24);
    CHECK(e[2][7].item<std::int64_t>() == 69);
    CHECK(torch::equal(e[3], e[0]));  // example 3 wraps to chunk 0
  }
  SECTION("the byte order is little-endian") {
    std::ofstream(path, std::ios::binary).write("\x01\x02\x00\x00\x05\x00\x00\x00", 8);
    qwen3::token_file f(path, 1000, 2);
    CHECK(f.examples(0, 1)[0][0].item<std::int64_t>() == 513);
    CHECK(f.examples(0, 1)[0][1].item<std::int64_t>() == 5);
  }
  SECTION("an id outside the vocabulary is an error naming its position") {
    qwen3::token_file::write(path, {1, 2, 3, 4, 5, 99, 7, 8});
    CHECK_THROWS_WITH(qwen3::token_file(path, 50, 4), Catch::Contains("token 5") && Catch::Contains("byte offset 20") &&
                                                          Catch::Contains("example 1 position 1") &&
                                                          Catch::Contains("is 99") && Catch::Contains("[0, 50)"));
  }
  SECTION("truncated and short files") {
    std::ofstream(path, std::ios::binary).write("\x01\x02\x03\x04\x05", 5);
    CHECK_THROWS_WITH(qwen3::token_file(path, 1000, 1), Catch::Contains("not a whole number"));
    qwen3::token_file::write(path, {1, 2, 3});
    CHECK_THROWS_WITH(qwen3::token_file(path, 1000, 4), Catch::Contains("fewer than one example"));
    CHECK_THROWS_WITH(qwen3::token_file(dir.file("missing"), 1000, 4), Catch::Contains("cannot open"));
  }
}

TEST_CASE("token file paths that are not token files: one line naming the path", "[qwen3][data][validation]") {
  temp_dir dir("tokens-bad");
  auto message = [](const std::string& path) {
    try {
      qwen3::token_file(path, 1000, 4);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(nothing thrown)");
  };
  SECTION("a directory") {
    // A seek to the end of a directory reported 9223372036854775807 bytes.
    const auto m = message(dir.str());
    CHECK(m == dir.str() + ": is a directory, not a file (expected a token file: little-endian uint32 ids)");
    CHECK(m.find('\n') == std::string::npos);
  }
  SECTION("an empty file") {
    std::ofstream(dir.file("empty.u32"));
    CHECK(message(dir.file("empty.u32")) == dir.file("empty.u32") + ": token file is empty (0 bytes, no token ids)");
  }
  SECTION("a size that is not a multiple of 4") {
    std::ofstream(dir.file("odd.u32"), std::ios::binary).write("\x01\x02\x03\x04\x05\x06", 6);
    CHECK(message(dir.file("odd.u32")) ==
          dir.file("odd.u32") + ": 6 bytes is not a whole number of uint32 token ids (truncated or not a token file?)");
  }
  SECTION("a missing file") {
    CHECK(message(dir.file("missing.u32")) == dir.file("missing.u32") +
                                                  ": cannot open: No such file or directory (expected a token file: "
                                                  "little-endian uint32 ids)");
  }
  SECTION("an unreadable file") {
    const auto path = dir.file("locked.u32");
    qwen3::token_file::write(path, {1, 2, 3, 4});
    REQUIRE(::chmod(path.c_str(), 0) == 0);
    if (std::ifstream(path)) {
      WARN("permissions are not enforced for this user (root?): the unreadable-file case is not checked here");
    } else {
      CHECK_THAT(message(path), Catch::StartsWith(path + ": cannot open for reading: Permission denied"));
    }
  }
}

TEST_CASE("synthetic ids are pinned (benchmarks/reference_hf.py generates the same)", "[qwen3][data]") {
  // Values from the Python implementation of the same rule, so both trainers see the same tokens.
  qwen3::synthetic_tokens a(1000, 8, 42), b(151936, 4, 1234);
  const std::vector<std::int64_t> e0{291, 858, 764, 250, 62, 925, 908, 5}, e5{151904, 146423, 7016, 12732};
  CHECK(torch::equal(a.examples(0, 1)[0], torch::tensor(e0)));
  CHECK(torch::equal(b.examples(5, 1)[0], torch::tensor(e5)));
}
