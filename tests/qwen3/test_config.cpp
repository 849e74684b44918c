// Presets, config.json, and the parameter counts of the real model sizes.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <limits>
#include <vector>

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
    bad["model_type"] = "mistral";
    CHECK_THROWS_WITH(qwen3::config_from_json(bad),
                      Catch::Contains("model_type is 'mistral', expected 'qwen3' or 'llama'"));
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

TEST_CASE("config.json values of the wrong kind or size are errors naming the file and the field",
          "[qwen3][config][validation]") {
  const std::string origin = "snap/config.json";
  const auto tiny = qwen3::to_json(qwen3::preset("tiny"));
  // Each row: one edit of the tiny config, and what the error must say besides the file name.
  struct row {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    std::vector<std::string> says;
  };
  const std::uint64_t two32 = std::uint64_t{1} << 32;
  const std::vector<row> rows{
      // Without head_dim the count of heads divides hidden_size: 0 heads used to trap (SIGFPE).
      {"0 heads, no head_dim",
       [](auto& j) {
         j.erase("head_dim");
         j["num_attention_heads"] = 0;
       },
       {"num_attention_heads must be positive, got 0"}},
      {"0.5 heads, no head_dim",
       [](auto& j) {
         j.erase("head_dim");
         j["num_attention_heads"] = 0.5;
       },
       {"num_attention_heads must be a whole number, got 0.5"}},
      {"fractional hidden_size",
       [](auto& j) { j["hidden_size"] = 64.7; },
       {"hidden_size must be a whole number, got 64.7", "not truncated"}},
      // A whole float is rejected too (the choice documented in config.hpp).
      {"hidden_size 64.0", [](auto& j) { j["hidden_size"] = 64.0; }, {"hidden_size must be a whole number, got 64.0"}},
      {"boolean layers",
       [](auto& j) { j["num_hidden_layers"] = true; },
       {"num_hidden_layers has the wrong type", "got true"}},
      {"negative vocab", [](auto& j) { j["vocab_size"] = -5; }, {"vocab_size must be positive, got -5"}},
      // 2^32 everywhere: q_dim() = 2^64 overflowed, then the model asked for ~20 GB.
      {"2^32 heads and head_dim",
       [&](auto& j) {
         j["num_attention_heads"] = two32;
         j["num_key_value_heads"] = two32;
         j["head_dim"] = two32;
       },
       {"num_attention_heads is 4294967296, above the limit of 2147483647"}},
      {"2^64 - 1 layers",
       [](auto& j) { j["num_hidden_layers"] = std::numeric_limits<std::uint64_t>::max(); },
       {"num_hidden_layers is 18446744073709551615, above the limit"}},
      {"max_position_embeddings 0",
       [](auto& j) { j["max_position_embeddings"] = 0; },
       {"max_position_embeddings must be positive, got 0"}},
      // Sizes within the per-field limit whose products do not fit 64 bits.
      {"hidden x intermediate overflows",
       [](auto& j) {
         j["hidden_size"] = 2147483647;
         j["intermediate_size"] = 2147483647;
       },
       {"3 x hidden_size x intermediate_size overflows"}},
      {"layers x per-layer overflows",
       [](auto& j) {
         j["hidden_size"] = 1 << 20;
         j["intermediate_size"] = 1 << 20;
         j["num_hidden_layers"] = 2147483647;
       },
       {"num_hidden_layers x per-layer parameters overflows"}},
      // A wrong type inside rope_scaling used to escape as a bare nlohmann type_error.
      {"rope_scaling.rope_type a number",
       [](auto& j) {
         j["rope_scaling"] = {{"rope_type", 5}};
       },
       {"rope_scaling.rope_type has the wrong type", "got 5"}},
      {"rope_scaling.type a list",
       [](auto& j) {
         j["rope_scaling"] = {{"type", {1, 2}}};
       },
       {"rope_scaling.type has the wrong type"}},
      {"rope_parameters.rope_theta a string",
       [](auto& j) {
         j.erase("rope_theta");
         j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", "big"}};
       },
       {"rope_parameters.rope_theta has the wrong type", "\"big\""}},
      {"rope_theta a string", [](auto& j) { j["rope_theta"] = "1e6"; }, {"rope_theta has the wrong type"}},
      {"rms_norm_eps an object",
       [](auto& j) {
         j["rms_norm_eps"] = {{"v", 1}};
       },
       {"rms_norm_eps has the wrong type"}},
      {"tie_word_embeddings a string",
       [](auto& j) { j["tie_word_embeddings"] = "yes"; },
       {"tie_word_embeddings has the wrong type"}},
      {"attention_bias a number", [](auto& j) { j["attention_bias"] = 1; }, {"attention_bias has the wrong type"}},
      {"model_type a number", [](auto& j) { j["model_type"] = 3; }, {"model_type has the wrong type"}},
      {"hidden_act a list",
       [](auto& j) { j["hidden_act"] = nlohmann::json::array({"silu"}); },
       {"hidden_act has the wrong type"}},
  };
  for (const auto& r : rows) {
    INFO(r.what);
    auto j = tiny;
    r.edit(j);
    CHECK_THROWS_AS(qwen3::config_from_json(j, origin), std::invalid_argument);
    for (const auto& text : r.says)
      CHECK_THROWS_WITH(qwen3::config_from_json(j, origin), Catch::Contains(origin) && Catch::Contains(text));
  }
}

TEST_CASE("config sizes and their products are checked without JSON", "[qwen3][config][validation]") {
  auto c = qwen3::preset("tiny");
  SECTION("q_dim and kv_dim report overflow instead of wrapping") {
    c.num_heads = c.num_kv_heads = c.head_dim = std::int64_t{1} << 32;
    CHECK_THROWS_AS(c.q_dim(), std::invalid_argument);
    CHECK_THROWS_WITH(c.q_dim(), Catch::Contains("num_attention_heads x head_dim overflows"));
    CHECK_THROWS_WITH(c.kv_dim(), Catch::Contains("num_key_value_heads x head_dim overflows"));
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("num_attention_heads is 4294967296, above the limit"));
  }
  SECTION("a billion layers is a valid shape (the memory estimate rejects it, not the config)") {
    c.num_layers = 1000000000;
    CHECK_NOTHROW(c.validate());
    // 49,328 parameters per tiny layer (see test_memory_estimate.cpp), embedding 256 x 64, final norm 64.
    CHECK(c.parameter_count() == std::int64_t{1000000000} * 49328 + 256 * 64 + 64);
  }
}

TEST_CASE("load_config names the file it could not read", "[qwen3][config][validation]") {
  temp_dir dir("config-files");
  CHECK_THROWS_AS(qwen3::load_config(dir.str()), std::runtime_error);
  CHECK_THROWS_WITH(qwen3::load_config(dir.str()),
                    Catch::Contains(dir.file("config.json")) && Catch::Contains("No such file"));
  std::ofstream(dir.file("config.json")) << "[1, 2]";
  CHECK_THROWS_AS(qwen3::load_config(dir.str()), std::invalid_argument);
  CHECK_THROWS_WITH(qwen3::load_config(dir.str()), Catch::Contains("config.json: not a JSON object"));
}

namespace {
/// Llama-3.2-1B's config.json as released (meta-llama/Llama-3.2-1B), written by transformers 4.45.
const char* const llama_3_2_1b_json = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

void check_same_config(const qwen3::config& a, const qwen3::config& b) {
  CHECK(a.family == b.family);
  CHECK(a.vocab_size == b.vocab_size);
  CHECK(a.hidden_size == b.hidden_size);
  CHECK(a.intermediate_size == b.intermediate_size);
  CHECK(a.num_layers == b.num_layers);
  CHECK(a.num_heads == b.num_heads);
  CHECK(a.num_kv_heads == b.num_kv_heads);
  CHECK(a.head_dim == b.head_dim);
  CHECK(a.rms_eps == b.rms_eps);
  CHECK(a.rope_theta == b.rope_theta);
  CHECK(a.tie_word_embeddings == b.tie_word_embeddings);
  CHECK(a.max_position_embeddings == b.max_position_embeddings);
  REQUIRE(a.rope_scaling.has_value() == b.rope_scaling.has_value());
  if (a.rope_scaling) {
    CHECK(a.rope_scaling->factor == b.rope_scaling->factor);
    CHECK(a.rope_scaling->low_freq_factor == b.rope_scaling->low_freq_factor);
    CHECK(a.rope_scaling->high_freq_factor == b.rope_scaling->high_freq_factor);
    CHECK(a.rope_scaling->original_max_position_embeddings == b.rope_scaling->original_max_position_embeddings);
  }
}
}  // namespace

TEST_CASE("a Llama config.json: the released file, newer rope_parameters, Llama's defaults", "[qwen3][config][llama]") {
  const auto released = nlohmann::json::parse(llama_3_2_1b_json);

  SECTION("Llama-3.2-1B's config.json is the llama-3.2-1b preset") {
    const auto c = qwen3::config_from_json(released);
    CHECK(c.family == qwen3::model_family::llama);
    CHECK_FALSE(c.qk_norm());
    CHECK(c.rms_eps == 1e-5);
    CHECK(c.rope_theta == 500000.0);
    REQUIRE(c.rope_scaling);
    CHECK(c.rope_scaling->factor == 32.0);
    CHECK(c.rope_scaling->low_freq_factor == 1.0);
    CHECK(c.rope_scaling->high_freq_factor == 4.0);
    CHECK(c.rope_scaling->original_max_position_embeddings == 8192);
    check_same_config(c, qwen3::preset("llama-3.2-1b"));
  }
  SECTION("transformers 5 writes rope_parameters, with rope_theta inside") {
    auto j = released;
    j.erase("rope_scaling");
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                            {"factor", 32.0},          {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
    check_same_config(qwen3::config_from_json(j), qwen3::preset("llama-3.2-1b"));
  }
  SECTION("without original_max_position_embeddings, llama3 uses max_position_embeddings (as transformers)") {
    auto j = released;
    j["rope_scaling"].erase("original_max_position_embeddings");
    CHECK(qwen3::config_from_json(j).rope_scaling->original_max_position_embeddings == 131072);
  }
  SECTION("fields left out take LlamaConfig's defaults") {
    const nlohmann::json j{{"model_type", "llama"},    {"vocab_size", 1000},     {"hidden_size", 256},
                           {"intermediate_size", 512}, {"num_hidden_layers", 2}, {"num_attention_heads", 8}};
    const auto c = qwen3::config_from_json(j);
    CHECK(c.num_kv_heads == 8);
    CHECK(c.head_dim == 32);  // 256 / 8
    CHECK(c.rms_eps == 1e-6);
    CHECK(c.rope_theta == 10000.0);
    CHECK_FALSE(c.tie_word_embeddings);
    CHECK(c.max_position_embeddings == 2048);
    CHECK_FALSE(c.rope_scaling);
    // Two layers of 8 x 32 query and key/value widths, an untied head, no q/k norms: by hand
    // 2 x (256*768 + 256*256 + 3*256*512 + 2*256) + 2 * 1000*256 + 256.
    CHECK(c.parameter_count() == 2 * (256 * 768 + 256 * 256 + 3 * 256 * 512 + 2 * 256) + 2 * 1000 * 256 + 256);
  }
  SECTION("to_json then config_from_json gives the llama-tiny preset back") {
    const auto tiny = qwen3::preset("llama-tiny");
    const auto j = qwen3::to_json(tiny);
    CHECK(j["model_type"] == "llama");
    CHECK(j["architectures"][0] == "LlamaForCausalLM");
    CHECK(j["rope_scaling"]["rope_type"] == "llama3");
    check_same_config(qwen3::config_from_json(j), tiny);
  }
}

TEST_CASE("Llama config.json errors name the file and the field", "[qwen3][config][llama][validation]") {
  const std::string origin = "llama/config.json";
  const auto released = nlohmann::json::parse(llama_3_2_1b_json);
  struct row {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    std::vector<std::string> says;
  };
  const std::vector<row> rows{
      {"llama3 without factor",
       [](auto& j) { j["rope_scaling"].erase("factor"); },
       {"missing field 'rope_scaling.factor'"}},
      {"llama3 without low_freq_factor",
       [](auto& j) { j["rope_scaling"].erase("low_freq_factor"); },
       {"missing field 'rope_scaling.low_freq_factor'"}},
      {"factor a string",
       [](auto& j) { j["rope_scaling"]["factor"] = "32"; },
       {"rope_scaling.factor has the wrong type", "\"32\""}},
      {"factor 0",
       [](auto& j) { j["rope_scaling"]["factor"] = 0.0; },
       {"llama config", "rope_scaling.factor must be positive and finite"}},
      {"negative low_freq_factor",
       [](auto& j) { j["rope_scaling"]["low_freq_factor"] = -1.0; },
       {"rope_scaling.low_freq_factor must be positive and finite"}},
      // The interpolation divides by high - low.
      {"high_freq_factor equal to low_freq_factor",
       [](auto& j) { j["rope_scaling"]["high_freq_factor"] = 1.0; },
       {"rope_scaling.high_freq_factor (1.000000) must be above low_freq_factor (1.000000)"}},
      {"original_max_position_embeddings 0",
       [](auto& j) { j["rope_scaling"]["original_max_position_embeddings"] = 0; },
       {"rope_scaling.original_max_position_embeddings must be positive, got 0"}},
      {"original_max_position_embeddings fractional",
       [](auto& j) { j["rope_scaling"]["original_max_position_embeddings"] = 8192.5; },
       {"rope_scaling.original_max_position_embeddings must be a whole number, got 8192.5"}},
      {"original_max_position_embeddings 2^32",
       [](auto& j) { j["rope_scaling"]["original_max_position_embeddings"] = std::uint64_t{1} << 32; },
       {"rope_scaling.original_max_position_embeddings is 4294967296, above the limit"}},
      {"another rope type",
       [](auto& j) { j["rope_scaling"]["rope_type"] = "yarn"; },
       {"rope_scaling has rope type 'yarn'", "default) and llama3 are implemented"}},
      {"partial rotary",
       [](auto& j) { j["partial_rotary_factor"] = 0.5; },
       {"partial_rotary_factor other than 1 is not implemented"}},
      {"mlp_bias", [](auto& j) { j["mlp_bias"] = true; }, {"mlp_bias=true is not implemented"}},
      {"mlp_bias a string", [](auto& j) { j["mlp_bias"] = "no"; }, {"mlp_bias has the wrong type"}},
      {"attention_bias", [](auto& j) { j["attention_bias"] = true; }, {"attention_bias=true is not implemented"}},
      {"model_type of another family",
       [](auto& j) { j["model_type"] = "mistral"; },
       {"model_type is 'mistral', expected 'qwen3' or 'llama'"}},
      {"0 heads, no head_dim",
       [](auto& j) {
         j.erase("head_dim");
         j["num_attention_heads"] = 0;
       },
       {"llama config", "num_attention_heads must be positive, got 0"}},
  };
  for (const auto& r : rows) {
    INFO(r.what);
    auto j = released;
    r.edit(j);
    CHECK_THROWS_AS(qwen3::config_from_json(j, origin), std::invalid_argument);
    for (const auto& text : r.says)
      CHECK_THROWS_WITH(qwen3::config_from_json(j, origin), Catch::Contains(origin) && Catch::Contains(text));
  }
}
