// qwen3/config.hpp: the shape of a Qwen3 decoder (presets and Hugging Face config.json).
//
//   auto cfg = qwen3::preset("qwen3-1.7b");              // or "qwen3-0.6b", "tiny"
//   auto cfg = qwen3::load_config("/path/to/snapshot");   // a folder with config.json, or the file
//
// Only the fields that decide tensor shapes and the numerics of the forward pass are kept; anything
// else in config.json is ignored, and features this model does not implement (rope scaling, sliding
// window attention, attention bias) are rejected by name rather than silently computed differently.
#pragma once
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qwen3 {

struct config {
  std::string name = "custom";
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;      ///< query heads
  std::int64_t num_kv_heads = 0;   ///< key/value heads (grouped query attention)
  std::int64_t head_dim = 0;       ///< Qwen3 sets it explicitly: heads * head_dim need not equal hidden
  double rms_eps = 1e-6;
  double rope_theta = 1e6;
  bool tie_word_embeddings = true;
  std::int64_t max_position_embeddings = 40960;

  std::int64_t q_dim() const { return num_heads * head_dim; }
  std::int64_t kv_dim() const { return num_kv_heads * head_dim; }

  /// Throws std::invalid_argument naming the first inconsistent field.
  void validate() const {
    auto positive = [&](std::int64_t v, const char* field) {
      if (v <= 0) throw std::invalid_argument("qwen3 config '" + name + "': " + field + " must be positive, got " +
                                              std::to_string(v));
    };
    positive(vocab_size, "vocab_size");
    positive(hidden_size, "hidden_size");
    positive(intermediate_size, "intermediate_size");
    positive(num_layers, "num_hidden_layers");
    positive(num_heads, "num_attention_heads");
    positive(num_kv_heads, "num_key_value_heads");
    positive(head_dim, "head_dim");
    if (num_heads % num_kv_heads != 0)
      throw std::invalid_argument("qwen3 config '" + name + "': num_attention_heads (" + std::to_string(num_heads) +
                                  ") is not a multiple of num_key_value_heads (" + std::to_string(num_kv_heads) + ")");
    if (head_dim % 2 != 0)
      throw std::invalid_argument("qwen3 config '" + name + "': head_dim must be even for rotary embeddings");
    if (!(rms_eps > 0)) throw std::invalid_argument("qwen3 config '" + name + "': rms_norm_eps must be positive");
    if (!(rope_theta > 0)) throw std::invalid_argument("qwen3 config '" + name + "': rope_theta must be positive");
  }
};

/// Names accepted by preset().
inline std::vector<std::string> preset_names() { return {"qwen3-1.7b", "qwen3-0.6b", "tiny"}; }

/// The exact configurations of the released checkpoints (from their config.json), and `tiny`, a model
/// small enough for CPU tests that keeps every structural feature (GQA with 2 query heads per
/// key/value head, head_dim independent of hidden, tied head).
inline config preset(const std::string& name) {
  config c;
  c.name = name;
  if (name == "qwen3-1.7b") {
    c.vocab_size = 151936; c.hidden_size = 2048; c.intermediate_size = 6144; c.num_layers = 28;
    c.num_heads = 16; c.num_kv_heads = 8; c.head_dim = 128;
  } else if (name == "qwen3-0.6b") {
    c.vocab_size = 151936; c.hidden_size = 1024; c.intermediate_size = 3072; c.num_layers = 28;
    c.num_heads = 16; c.num_kv_heads = 8; c.head_dim = 128;
  } else if (name == "tiny") {
    c.vocab_size = 256; c.hidden_size = 64; c.intermediate_size = 160; c.num_layers = 2;
    c.num_heads = 4; c.num_kv_heads = 2; c.head_dim = 24; c.max_position_embeddings = 4096;
  } else {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown qwen3 preset '" + name + "' (known: " + known + ")");
  }
  c.validate();
  return c;
}

/// Reads a Hugging Face Qwen3 config.json object.
inline config config_from_json(const nlohmann::json& j, const std::string& origin = "config.json") {
  auto need = [&](const char* key) -> const nlohmann::json& {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) throw std::invalid_argument(origin + ": missing field '" + key + "'");
    return *it;
  };
  if (auto it = j.find("model_type"); it != j.end() && it->is_string() && *it != "qwen3")
    throw std::invalid_argument(origin + ": model_type is '" + it->get<std::string>() + "', expected 'qwen3'");
  // Rotary parameters: "rope_parameters" in newer configs, "rope_scaling" in older ones (null for
  // plain rotary embeddings). Only the default (unscaled) rotary type is implemented.
  const nlohmann::json* rope = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (auto it = j.find(key); it != j.end() && !it->is_null() && !rope) {
      if (!it->is_object()) throw std::invalid_argument(origin + ": " + key + " is not an object");
      rope = &*it;
      const auto type = it->value("rope_type", it->value("type", std::string("default")));
      if (type != "default")
        throw std::invalid_argument(origin + ": " + key + " has rope type '" + type +
                                    "'; only plain rotary embeddings (default) are implemented");
    }
  if (auto it = j.find("attention_bias"); it != j.end() && it->is_boolean() && it->get<bool>())
    throw std::invalid_argument(origin + ": attention_bias=true is not implemented");
  if (auto it = j.find("use_sliding_window"); it != j.end() && it->is_boolean() && it->get<bool>())
    throw std::invalid_argument(origin + ": use_sliding_window=true is not implemented");
  if (auto it = j.find("hidden_act"); it != j.end() && it->is_string() && *it != "silu")
    throw std::invalid_argument(origin + ": hidden_act '" + it->get<std::string>() + "' is not implemented (silu only)");

  config c;
  c.name = origin;
  try {
    c.vocab_size = need("vocab_size").get<std::int64_t>();
    c.hidden_size = need("hidden_size").get<std::int64_t>();
    c.intermediate_size = need("intermediate_size").get<std::int64_t>();
    c.num_layers = need("num_hidden_layers").get<std::int64_t>();
    c.num_heads = need("num_attention_heads").get<std::int64_t>();
    c.num_kv_heads = j.value("num_key_value_heads", c.num_heads);
    c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? j["head_dim"].get<std::int64_t>()
                                                                    : c.hidden_size / c.num_heads;
    c.rms_eps = j.value("rms_norm_eps", 1e-6);
    if (j.contains("rope_theta") && j["rope_theta"].is_number()) c.rope_theta = j["rope_theta"].get<double>();
    else if (rope && rope->contains("rope_theta")) c.rope_theta = (*rope)["rope_theta"].get<double>();
    else c.rope_theta = 1e6;
    c.tie_word_embeddings = j.value("tie_word_embeddings", true);
    c.max_position_embeddings = j.value("max_position_embeddings", std::int64_t{40960});
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(origin + ": a field has the wrong type (" + e.what() + ")");
  }
  c.validate();
  return c;
}

/// Reads `path`, or `path`/config.json when path is a folder.
inline config load_config(const std::string& path) {
  std::string file = path;
  {
    std::ifstream probe(path + "/config.json");
    if (probe) file = path + "/config.json";
  }
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot open " + file);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file + ": not valid JSON (" + e.what() + ")");
  }
  return config_from_json(j, file);
}

/// The config as a Hugging Face config.json object (used to write test snapshots).
inline nlohmann::json to_json(const config& c) {
  return nlohmann::json{{"architectures", {"Qwen3ForCausalLM"}},
                        {"model_type", "qwen3"},
                        {"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_hidden_layers", c.num_layers},
                        {"num_attention_heads", c.num_heads},
                        {"num_key_value_heads", c.num_kv_heads},
                        {"head_dim", c.head_dim},
                        {"rms_norm_eps", c.rms_eps},
                        {"rope_theta", c.rope_theta},
                        {"tie_word_embeddings", c.tie_word_embeddings},
                        {"max_position_embeddings", c.max_position_embeddings},
                        {"hidden_act", "silu"},
                        {"attention_bias", false}};
}

}  // namespace qwen3
