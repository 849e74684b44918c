// The memory estimate and the run-size checks made before a model is allocated.
#include <catch2/catch.hpp>

#include "helpers.hpp"

namespace {
const std::vector<qwen3::schedule> one_by_one{qwen3::parse_schedule("1x1")};
}

TEST_CASE("the parameter count from the config is what the model allocates", "[qwen3][memory]") {
  // tiny by hand: q_dim 4 x 24 = 96, kv_dim 2 x 24 = 48. Per layer: q/k/v 64 x (96 + 2 x 48) = 12,288,
  // o 96 x 64 = 6,144, q/k norms 2 x 24 = 48, gate/up/down 3 x 64 x 160 = 30,720, two norms 128:
  // 49,328. Two layers, embedding 256 x 64 = 16,384 (tied head), final norm 64: 115,104.
  const auto tiny = qwen3::preset("tiny");
  CHECK(tiny.parameter_count() == 115104);
  CHECK(tiny.parameter_count() == qwen3::parameter_count(*qwen3_test::tiny_model()));
  CHECK(qwen3::preset("qwen3-1.7b").parameter_count() == 1720574976);  // the reference count
  auto untied = tiny;
  untied.tie_word_embeddings = false;
  CHECK(untied.parameter_count() == 115104 + 16384);
}

TEST_CASE("memory estimate of the tiny config, by hand", "[qwen3][memory]") {
  const auto tiny = qwen3::preset("tiny");
  // Micro-batch 2 x 16 tokens = 32 tokens, fp32 (4 bytes).
  SECTION("without checkpointing: 17 values per token, hidden unit and layer") {
    const auto e = qwen3::estimate_memory(tiny, 2, 16, 4, /*checkpointing=*/false);
    CHECK(e.weight_bytes == 115104.0 * 4);                  // 460,416
    CHECK(e.activation_bytes == 32.0 * 64 * 4 * (2 * 17));  // 278,528
    CHECK(e.logits_bytes == 32.0 * 256 * 4);                // 32,768
    CHECK(e.microbatch_bytes() == 278528.0 + 32768);
    CHECK(e.total_bytes() == 460416.0 + 278528 + 32768);
  }
  SECTION("with checkpointing: each layer's input plus one layer recomputed") {
    const auto e = qwen3::estimate_memory(tiny, 2, 16, 4, /*checkpointing=*/true);
    CHECK(e.activation_bytes == 32.0 * 64 * 4 * (2 + 17));  // 155,648
    CHECK(e.weight_bytes == 460416.0);
  }
  SECTION("the limit is inclusive") {
    const auto e = qwen3::estimate_memory(tiny, 2, 16, 4, false);
    CHECK_NOTHROW(qwen3::check_memory(e, e.total_bytes(), "the host", "tiny"));
    CHECK_THROWS_AS(qwen3::check_memory(e, e.total_bytes() - 1, "the host", "tiny"), std::invalid_argument);
  }
  CHECK_THROWS_AS(qwen3::estimate_memory(tiny, 0, 16, 4, false), std::invalid_argument);
}

TEST_CASE("a billion layers is rejected by the estimate before anything is allocated", "[qwen3][memory]") {
  // The reproducer: this config.json used to allocate 18.5 GB in 40 s before anything was said.
  auto j = qwen3::to_json(qwen3::preset("tiny"));
  j["num_hidden_layers"] = 1000000000;
  const auto cfg = qwen3::config_from_json(j, "big/config.json");
  // (10^9 x 49,328 + 16,448) parameters x 4 bytes = 183,761 GiB.
  const auto e = qwen3::estimate_memory(cfg, 1, 16, 4, true);
  CHECK(e.weight_bytes == (1e9 * 49328 + 16448) * 4);
  const double one_gib = 1024.0 * 1024 * 1024;
  CHECK_THROWS_AS(qwen3::check_memory(e, one_gib, "the GPU (free memory)", "big"), std::invalid_argument);
  CHECK_THROWS_WITH(qwen3::check_memory(e, one_gib, "the GPU (free memory)", "big"),
                    Catch::StartsWith("big: model needs ~1.84e+05 GiB for weights + ~") &&
                        Catch::Contains("GiB per micro-batch; the GPU (free memory) has 1 GiB"));
  // The same through the run check, against this machine's real memory (nothing has 180 TiB).
  CHECK_THROWS_AS(qwen3::check_run_fits(cfg, one_by_one, 16, torch::kFloat32, torch::kCPU, true),
                  std::invalid_argument);
  CHECK_THROWS_WITH(qwen3::check_run_fits(cfg, one_by_one, 16, torch::kFloat32, torch::kCPU, true),
                    Catch::Contains("qwen3 config 'big/config.json'") && Catch::Contains("~1.84e+05 GiB for weights") &&
                        Catch::Contains("the host (physical memory) has"));
}

TEST_CASE("run checks: sequence length against max_position_embeddings, and sizes that fit", "[qwen3][memory]") {
  auto tiny = qwen3::preset("tiny");
  const auto schedules = qwen3::parse_schedules("1x4,2x2,4x1");
  CHECK_NOTHROW(qwen3::check_run_fits(tiny, schedules, 128, torch::kFloat32, torch::kCPU, true));
  tiny.max_position_embeddings = 64;
  CHECK_NOTHROW(qwen3::check_run_fits(tiny, schedules, 64, torch::kFloat32, torch::kCPU, true));
  CHECK_THROWS_AS(qwen3::check_run_fits(tiny, schedules, 128, torch::kFloat32, torch::kCPU, true),
                  std::invalid_argument);
  CHECK_THROWS_WITH(
      qwen3::check_run_fits(tiny, schedules, 128, torch::kFloat32, torch::kCPU, true),
      Catch::Contains("sequence length 128 is above max_position_embeddings 64") && Catch::Contains("'tiny'"));
}
