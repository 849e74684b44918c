// Presets, config.json, and the parameter counts of the real model sizes.
#include <catch2/catch.hpp>

#include <fstream>

#include "helpers.hpp"

using qwen3_test::temp_dir;

namespace {
/// Counts a preset's parameters on the meta device: real modules, real shapes, no memory.
std::int64_t meta_count(const std::string& preset, std::int64_t* lora_added = nullptr) {
  qwen3::Qwen3 m(qwen3::preset(preset), qwen3::model_options().device(torch::Device("meta")));
  const auto base = qwen3::parameter_count(*m);
  if (lora_added) {
    auto adapters = qwen3::apply_lora(*m, qwen3::lora_options{});  // r=16, all seven projections
    *lora_added = qwen3::numel(adapters);
    REQUIRE(qwen3::parameter_count(*m) - base == *lora_added);
  }
  return base;
}
}  // namespace

TEST_CASE("qwen3-1.7b has the reference parameter counts", "[qwen3][config][params]") {
  // Facts from the reference implementation (tied embeddings counted once).
  std::int64_t lora = 0;
  CHECK(meta_count("qwen3-1.7b", &lora) == 1720574976);
  CHECK(lora == 17432576);
}

TEST_CASE("qwen3-0.6b parameter count", "[qwen3][config][params]") {
  // By hand: embed 151936*1024 + 28 * (q 1024*2048 + k,v 2*1024*1024 + o 2048*1024 + mlp 3*1024*3072
  // + norms 2*1024 + 2*128) + final norm 1024.
  CHECK(meta_count("qwen3-0.6b") == 596049920);
}

TEST_CASE("meta-device counting equals a real model's numel", "[qwen3][config][params]") {
  auto real = qwen3_test::tiny_model();
  CHECK(meta_count("tiny") == qwen3::parameter_count(*real));
  std::int64_t meta_lora = 0;
  meta_count("tiny", &meta_lora);
  CHECK(qwen3::numel(qwen3::apply_lora(*real, qwen3::lora_options{})) == meta_lora);
}

TEST_CASE("presets have the released configurations", "[qwen3][config]") {
  const auto c = qwen3::preset("qwen3-1.7b");
  CHECK(c.vocab_size == 151936);
  CHECK(c.hidden_size == 2048);
  CHECK(c.intermediate_size == 6144);
  CHECK(c.num_layers == 28);
  CHECK(c.num_heads == 16);
  CHECK(c.num_kv_heads == 8);
  CHECK(c.head_dim == 128);
  CHECK(c.rms_eps == 1e-6);
  CHECK(c.rope_theta == 1e6);
  CHECK(c.tie_word_embeddings);
  for (const auto& name : qwen3::preset_names()) CHECK_NOTHROW(qwen3::preset(name));
  CHECK_THROWS_WITH(qwen3::preset("qwen3-7b"), Catch::Contains("unknown qwen3 preset") && Catch::Contains("tiny"));
}

TEST_CASE("config.json round trip and rejection", "[qwen3][config]") {
  temp_dir dir("config");
  const auto tiny = qwen3::preset("tiny");

  SECTION("to_json then load_config gives the same shapes") {
    std::ofstream(dir.file("config.json")) << qwen3::to_json(tiny).dump();
    const auto c = qwen3::load_config(dir.str());
    CHECK(c.vocab_size == tiny.vocab_size);
    CHECK(c.hidden_size == tiny.hidden_size);
    CHECK(c.intermediate_size == tiny.intermediate_size);
    CHECK(c.num_layers == tiny.num_layers);
    CHECK(c.num_heads == tiny.num_heads);
    CHECK(c.num_kv_heads == tiny.num_kv_heads);
    CHECK(c.head_dim == tiny.head_dim);
    CHECK(c.tie_word_embeddings == tiny.tie_word_embeddings);
  }
  SECTION("rope_theta under rope_parameters (newer configs)") {
    auto j = qwen3::to_json(tiny);
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5000.0}};
    CHECK(qwen3::config_from_json(j).rope_theta == 5000.0);
    j["rope_parameters"]["rope_type"] = "yarn";
    CHECK_THROWS_WITH(qwen3::config_from_json(j), Catch::Contains("rope type 'yarn'"));
  }
  SECTION("a null rope_scaling is plain rotary") {
    auto j = qwen3::to_json(tiny);
    j["rope_scaling"] = nullptr;
    CHECK(qwen3::config_from_json(j).rope_theta == tiny.rope_theta);
  }
  SECTION("errors name the problem") {
    auto j = qwen3::to_json(tiny);
    auto bad = j;
    bad.erase("hidden_size");
    CHECK_THROWS_WITH(qwen3::config_from_json(bad), Catch::Contains("missing field 'hidden_size'"));
    bad = j;
    bad["model_type"] = "llama";
    CHECK_THROWS_WITH(qwen3::config_from_json(bad), Catch::Contains("model_type is 'llama'"));
    bad = j;
    bad["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
    CHECK_THROWS_WITH(qwen3::config_from_json(bad), Catch::Contains("rope_scaling has rope type 'linear'"));
    bad = j;
    bad["num_key_value_heads"] = 3;
    CHECK_THROWS_WITH(qwen3::config_from_json(bad), Catch::Contains("not a multiple"));
    bad = j;
    bad["vocab_size"] = "many";
    CHECK_THROWS_WITH(qwen3::config_from_json(bad), Catch::Contains("wrong type"));
    std::ofstream(dir.file("config.json")) << "{not json";
    CHECK_THROWS_WITH(qwen3::load_config(dir.str()), Catch::Contains("not valid JSON"));
    CHECK_THROWS_WITH(qwen3::load_config(dir.file("nowhere")), Catch::Contains("cannot open"));
  }
}
