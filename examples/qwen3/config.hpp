// qwen3/config.hpp: the shape of a Qwen3 decoder (presets and Hugging Face config.json).
//
//   auto cfg = qwen3::preset("qwen3-1.7b");              // or "qwen3-0.6b", "tiny"
//   auto cfg = qwen3::load_config("/path/to/snapshot");   // a folder with config.json, or the file
//
// Only the fields that decide tensor shapes and the numerics of the forward pass are kept; anything
// else in config.json is ignored, and features this model does not implement (rope scaling, sliding
// window attention, attention bias) are rejected by name rather than silently computed differently.
// config.json is untrusted input: every field it sets must have the JSON type it needs (an integer
// field given 64.7 or 64.0 is an error, not truncated), sizes are bounded (max_size_field), and the
// products of sizes (q_dim, parameter counts) are overflow-checked. Errors are std::invalid_argument
// naming the file and the field.
#pragma once
#include <cmath>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checked.hpp"
#include "input_file.hpp"

#include <sys/stat.h>

namespace qwen3 {

/// Upper bound of every size field (vocab, hidden, intermediate, layers, heads, head_dim,
/// max_position_embeddings): 2^31 - 1. Released models stay below 2^18 in each; the bound keeps
/// the product of any two sizes inside int64 and rejects values like 2^32 by name. Whether a
/// config fits in memory is a separate, later check (memory_estimate.hpp): 10^9 layers pass here.
inline constexpr std::int64_t max_size_field = 2147483647;

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

  /// Width of the query projection. Throws std::invalid_argument on overflow (an unvalidated config).
  std::int64_t q_dim() const { return mul(num_heads, head_dim, "num_attention_heads x head_dim"); }
  /// Width of each of the key and value projections. Throws like q_dim().
  std::int64_t kv_dim() const { return mul(num_kv_heads, head_dim, "num_key_value_heads x head_dim"); }

  /// Parameters of the base model as Qwen3Impl allocates them (the tied head counted once): the
  /// embedding, per layer the q/k/v/o projections, q/k norms, gate/up/down and two norms, the final
  /// norm, and an untied head. Overflow-checked: an error names the product that overflowed.
  std::int64_t parameter_count() const {
    const auto q = q_dim(), kv = kv_dim();
    const auto proj_out = add(q, mul(2, kv, "2 x kv_dim"), "q_dim + 2 x kv_dim");
    const auto mlp = mul(3, mul(hidden_size, intermediate_size, "hidden_size x intermediate_size"),
                         "3 x hidden_size x intermediate_size");
    std::int64_t per_layer = mul(hidden_size, proj_out, "hidden_size x (q_dim + 2 x kv_dim)");
    per_layer = add(per_layer, mul(q, hidden_size, "q_dim x hidden_size"), "per-layer parameters");
    per_layer = add(per_layer, mlp, "per-layer parameters");
    per_layer = add(per_layer, 2 * head_dim + 2 * hidden_size, "per-layer parameters");  // four norms
    const auto embedding = mul(vocab_size, hidden_size, "vocab_size x hidden_size");
    std::int64_t total = mul(num_layers, per_layer, "num_hidden_layers x per-layer parameters");
    total = add(total, embedding, "parameter count");
    if (!tie_word_embeddings) total = add(total, embedding, "parameter count (untied lm_head)");
    return add(total, hidden_size, "parameter count");
  }

  /// Throws std::invalid_argument naming the first inconsistent field.
  void validate() const {
    auto size = [&](std::int64_t v, const char* field) {
      if (v <= 0) throw std::invalid_argument("qwen3 config '" + name + "': " + field + " must be positive, got " +
                                              std::to_string(v));
      if (v > max_size_field)
        throw std::invalid_argument("qwen3 config '" + name + "': " + field + " is " + std::to_string(v) +
                                    ", above the limit of " + std::to_string(max_size_field) +
                                    " (2^31 - 1) for any size");
    };
    size(vocab_size, "vocab_size");
    size(hidden_size, "hidden_size");
    size(intermediate_size, "intermediate_size");
    size(num_layers, "num_hidden_layers");
    size(num_heads, "num_attention_heads");
    size(num_kv_heads, "num_key_value_heads");
    size(head_dim, "head_dim");
    size(max_position_embeddings, "max_position_embeddings");
    if (num_heads % num_kv_heads != 0)
      throw std::invalid_argument("qwen3 config '" + name + "': num_attention_heads (" + std::to_string(num_heads) +
                                  ") is not a multiple of num_key_value_heads (" + std::to_string(num_kv_heads) + ")");
    if (head_dim % 2 != 0)
      throw std::invalid_argument("qwen3 config '" + name + "': head_dim must be even for rotary embeddings");
    if (!(rms_eps > 0) || !std::isfinite(rms_eps))
      throw std::invalid_argument("qwen3 config '" + name + "': rms_norm_eps must be positive and finite");
    if (!(rope_theta > 0) || !std::isfinite(rope_theta))
      throw std::invalid_argument("qwen3 config '" + name + "': rope_theta must be positive and finite");
    (void)parameter_count();  // throws when a product of the sizes overflows
  }

 private:
  std::int64_t mul(std::int64_t a, std::int64_t b, const char* what) const {
    if (const auto r = checked_mul(a, b)) return *r;
    throw std::invalid_argument("qwen3 config '" + name + "': " + what + " overflows a 64-bit integer (" +
                                std::to_string(a) + " x " + std::to_string(b) + ")");
  }
  std::int64_t add(std::int64_t a, std::int64_t b, const char* what) const {
    if (const auto r = checked_add(a, b)) return *r;
    throw std::invalid_argument("qwen3 config '" + name + "': " + what + " overflows a 64-bit integer");
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

namespace detail {

/// Typed reads of one JSON object of config.json; every error names the file and the field
/// ("config.json: rope_scaling.rope_type has the wrong type: a string is needed, got 5").
/// Absent and null read as absent.
class json_fields {
 public:
  json_fields(const nlohmann::json& j, std::string origin, std::string prefix = "")
      : j_(j), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

  const nlohmann::json* find(const char* key) const {
    if (!j_.is_object()) return nullptr;
    const auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  /// An integer field. A JSON float is rejected even when whole (64.0): Hugging Face writes
  /// integers as integers, and a float here went through arithmetic that may have rounded it.
  std::optional<std::int64_t> integer(const char* key) const {
    const auto* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_number_unsigned()) {
      const auto u = v->get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(max_size_field))
        fail(key, "is " + std::to_string(u) + ", above the limit of " + std::to_string(max_size_field) +
                      " (2^31 - 1) for any size");
      return static_cast<std::int64_t>(u);
    }
    if (v->is_number_integer()) return v->get<std::int64_t>();
    if (v->is_number_float())
      fail(key, "must be a whole number, got " + shown(*v) + " (fractions are not truncated)");
    fail(key, "has the wrong type: an integer is needed, got " + shown(*v));
  }

  std::int64_t required_integer(const char* key) const {
    if (const auto v = integer(key)) return *v;
    throw std::invalid_argument(origin_ + ": missing field '" + prefix_ + key + "'");
  }

  std::optional<double> number(const char* key) const {
    const auto* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail(key, "has the wrong type: a number is needed, got " + shown(*v));
    return v->get<double>();
  }

  std::optional<bool> boolean(const char* key) const {
    const auto* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(key, "has the wrong type: true or false is needed, got " + shown(*v));
    return v->get<bool>();
  }

  std::optional<std::string> string(const char* key) const {
    const auto* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail(key, "has the wrong type: a string is needed, got " + shown(*v));
    return v->get<std::string>();
  }

  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw std::invalid_argument(origin_ + ": " + prefix_ + key + " " + what);
  }

 private:
  /// The offending value as written, cut short: a hostile file may put megabytes there.
  static std::string shown(const nlohmann::json& v) {
    auto s = v.dump();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
  }

  const nlohmann::json& j_;  // the caller's object, which outlives these reads
  std::string origin_;
  std::string prefix_;
};

}  // namespace detail

/// Reads a Hugging Face Qwen3 config.json object. Every error, including a JSON value of the wrong
/// type anywhere (rope_scaling/rope_parameters contents too), is std::invalid_argument naming
/// `origin` and the field.
inline config config_from_json(const nlohmann::json& j, const std::string& origin = "config.json") {
  if (!j.is_object()) throw std::invalid_argument(origin + ": not a JSON object");
  const detail::json_fields f(j, origin);
  try {
    if (const auto type = f.string("model_type"); type && *type != "qwen3")
      throw std::invalid_argument(origin + ": model_type is '" + *type + "', expected 'qwen3'");
    // Rotary parameters: "rope_parameters" in newer configs, "rope_scaling" in older ones (null for
    // plain rotary embeddings). Only the default (unscaled) rotary type is implemented.
    std::optional<double> nested_theta;
    bool have_rope = false;
    for (const char* key : {"rope_parameters", "rope_scaling"}) {
      const auto* r = f.find(key);
      if (!r || have_rope) continue;
      if (!r->is_object()) throw std::invalid_argument(origin + ": " + key + " is not an object");
      have_rope = true;
      const detail::json_fields rf(*r, origin, std::string(key) + ".");
      auto type = rf.string("rope_type");
      if (!type) type = rf.string("type");
      if (type && *type != "default")
        throw std::invalid_argument(origin + ": " + key + " has rope type '" + *type +
                                    "'; only plain rotary embeddings (default) are implemented");
      nested_theta = rf.number("rope_theta");
    }
    if (f.boolean("attention_bias").value_or(false))
      throw std::invalid_argument(origin + ": attention_bias=true is not implemented");
    if (f.boolean("use_sliding_window").value_or(false))
      throw std::invalid_argument(origin + ": use_sliding_window=true is not implemented");
    if (const auto act = f.string("hidden_act"); act && *act != "silu")
      throw std::invalid_argument(origin + ": hidden_act '" + *act + "' is not implemented (silu only)");

    config c;
    c.name = origin;
    c.vocab_size = f.required_integer("vocab_size");
    c.hidden_size = f.required_integer("hidden_size");
    c.intermediate_size = f.required_integer("intermediate_size");
    c.num_layers = f.required_integer("num_hidden_layers");
    c.num_heads = f.required_integer("num_attention_heads");
    c.num_kv_heads = f.integer("num_key_value_heads").value_or(c.num_heads);
    // Without head_dim, transformers uses hidden // heads; validate() reports a non-positive head
    // count by name before this division could trap.
    const auto head_dim = f.integer("head_dim");
    c.head_dim = head_dim ? *head_dim : c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
    c.rms_eps = f.number("rms_norm_eps").value_or(1e-6);
    c.rope_theta = f.number("rope_theta").value_or(nested_theta.value_or(1e6));
    c.tie_word_embeddings = f.boolean("tie_word_embeddings").value_or(true);
    c.max_position_embeddings = f.integer("max_position_embeddings").value_or(40960);
    c.validate();
    return c;
  } catch (const nlohmann::json::exception& e) {
    // Every read above is typed, so this is a gap in them; still an error about this file.
    throw std::invalid_argument(origin + ": unexpected JSON content (" + e.what() + ")");
  }
}

/// Reads the text of a config.json; `file` names it in errors. Invalid JSON or content is
/// std::invalid_argument.
inline config parse_config(const std::string& text, const std::string& file) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(file + ": not valid JSON (" + e.what() + ")");
  }
  return config_from_json(j, file);
}

/// Reads `path`, or `path`/config.json when path is a folder. A missing or unreadable file is
/// std::runtime_error; invalid JSON or content, std::invalid_argument.
inline config load_config(const std::string& path) {
  std::string file = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) file = path + "/config.json";
  if (const auto probe = probe_input_file(file); !probe.problem.empty())
    throw std::runtime_error(file + ": " + probe.problem);
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot open " + file);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), file);
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
