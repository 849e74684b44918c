// qwen3/config.hpp: the shape of a decoder of either family, Qwen3 or Llama (presets and Hugging
// Face config.json).
//
//   auto cfg = qwen3::preset("qwen3-1.7b");              // or "qwen3-0.6b", "tiny", "llama-3.2-1b", "llama-tiny"
//   auto cfg = qwen3::load_config("/path/to/snapshot");   // a folder with config.json, or the file
//
// The family comes from model_type ("qwen3", or "llama"; absent: qwen3), and a field config.json
// leaves out takes the default of that family's transformers config class. Only the fields that
// decide tensor shapes and the numerics of the forward pass are kept; anything else in config.json is
// ignored, and features this model does not implement (rope scaling other than llama3, partial
// rotary, sliding window attention, attention or MLP bias) are rejected by name rather than silently
// computed differently.
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

/// The decoder families. They share everything but the attention: Qwen3 normalises queries and keys
/// per head before the rotation (model.hpp), Llama does not (llama.hpp).
enum class model_family { qwen3, llama };

inline const char* family_name(model_family f) { return f == model_family::llama ? "llama" : "qwen3"; }

/// Llama 3's rotary frequency scaling (rope_type "llama3"; rope.hpp computes it): wavelengths longer
/// than original / low_freq_factor are stretched by `factor`, those shorter than original /
/// high_freq_factor are kept, those between are interpolated.
struct llama3_rope_scaling {
  double factor = 0;
  double low_freq_factor = 0;
  double high_freq_factor = 0;
  std::int64_t original_max_position_embeddings = 0;  ///< context length of pre-training
};

struct config {
  std::string name = "custom";
  model_family family = model_family::qwen3;
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;     ///< query heads
  std::int64_t num_kv_heads = 0;  ///< key/value heads (grouped query attention)
  std::int64_t head_dim = 0;      ///< Qwen3 sets it explicitly: heads * head_dim need not equal hidden
  double rms_eps = 1e-6;
  double rope_theta = 1e6;
  bool tie_word_embeddings = true;
  std::int64_t max_position_embeddings = 40960;
  std::optional<llama3_rope_scaling> rope_scaling;  ///< unset: plain rotary embeddings

  /// Whether the attention normalises queries and keys per head (Qwen3's q_norm / k_norm).
  bool qk_norm() const { return family == model_family::qwen3; }

  /// "llama config 'llama-3.2-1b'": how errors about this config name it.
  std::string label() const { return std::string(family_name(family)) + " config '" + name + "'"; }

  /// Width of the query projection. Throws std::invalid_argument on overflow (an unvalidated config).
  std::int64_t q_dim() const { return mul(num_heads, head_dim, "num_attention_heads x head_dim"); }
  /// Width of each of the key and value projections. Throws like q_dim().
  std::int64_t kv_dim() const { return mul(num_kv_heads, head_dim, "num_key_value_heads x head_dim"); }

  /// Parameters of the base model as the model allocates them (the tied head counted once): the
  /// embedding, per layer the q/k/v/o projections, q/k norms (Qwen3), gate/up/down and two norms,
  /// the final norm, and an untied head. Overflow-checked: an error names the product that overflowed.
  std::int64_t parameter_count() const {
    const auto q = q_dim(), kv = kv_dim();
    const auto proj_out = add(q, mul(2, kv, "2 x kv_dim"), "q_dim + 2 x kv_dim");
    const auto mlp = mul(3, mul(hidden_size, intermediate_size, "hidden_size x intermediate_size"),
                         "3 x hidden_size x intermediate_size");
    std::int64_t per_layer = mul(hidden_size, proj_out, "hidden_size x (q_dim + 2 x kv_dim)");
    per_layer = add(per_layer, mul(q, hidden_size, "q_dim x hidden_size"), "per-layer parameters");
    per_layer = add(per_layer, mlp, "per-layer parameters");
    const auto norms = (qk_norm() ? 2 * head_dim : 0) + 2 * hidden_size;  // q/k norms, two per layer
    per_layer = add(per_layer, norms, "per-layer parameters");
    const auto embedding = mul(vocab_size, hidden_size, "vocab_size x hidden_size");
    std::int64_t total = mul(num_layers, per_layer, "num_hidden_layers x per-layer parameters");
    total = add(total, embedding, "parameter count");
    if (!tie_word_embeddings) total = add(total, embedding, "parameter count (untied lm_head)");
    return add(total, hidden_size, "parameter count");
  }

  /// Throws std::invalid_argument naming the first inconsistent field.
  void validate() const {
    auto size = [&](std::int64_t v, const char* field) {
      if (v <= 0) throw std::invalid_argument(where() + field + " must be positive, got " + std::to_string(v));
      if (v > max_size_field)
        throw std::invalid_argument(where() + field + " is " + std::to_string(v) + ", above the limit of " +
                                    std::to_string(max_size_field) + " (2^31 - 1) for any size");
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
      throw std::invalid_argument(where() + "num_attention_heads (" + std::to_string(num_heads) +
                                  ") is not a multiple of num_key_value_heads (" + std::to_string(num_kv_heads) + ")");
    if (head_dim % 2 != 0) throw std::invalid_argument(where() + "head_dim must be even for rotary embeddings");
    if (!(rms_eps > 0) || !std::isfinite(rms_eps))
      throw std::invalid_argument(where() + "rms_norm_eps must be positive and finite");
    if (!(rope_theta > 0) || !std::isfinite(rope_theta))
      throw std::invalid_argument(where() + "rope_theta must be positive and finite");
    if (rope_scaling) {
      const auto& r = *rope_scaling;
      auto positive = [&](double v, const char* field) {
        if (!(v > 0) || !std::isfinite(v))
          throw std::invalid_argument(where() + "rope_scaling." + field + " must be positive and finite, got " +
                                      std::to_string(v));
      };
      positive(r.factor, "factor");
      positive(r.low_freq_factor, "low_freq_factor");
      positive(r.high_freq_factor, "high_freq_factor");
      // The interpolation between the two wavelengths divides by their difference.
      if (!(r.high_freq_factor > r.low_freq_factor))
        throw std::invalid_argument(where() + "rope_scaling.high_freq_factor (" + std::to_string(r.high_freq_factor) +
                                    ") must be above low_freq_factor (" + std::to_string(r.low_freq_factor) + ")");
      size(r.original_max_position_embeddings, "rope_scaling.original_max_position_embeddings");
    }
    (void)parameter_count();  // throws when a product of the sizes overflows
  }

 private:
  std::string where() const { return label() + ": "; }
  std::int64_t mul(std::int64_t a, std::int64_t b, const char* what) const {
    if (const auto r = checked_mul(a, b)) return *r;
    throw std::invalid_argument(where() + what + " overflows a 64-bit integer (" + std::to_string(a) + " x " +
                                std::to_string(b) + ")");
  }
  std::int64_t add(std::int64_t a, std::int64_t b, const char* what) const {
    if (const auto r = checked_add(a, b)) return *r;
    throw std::invalid_argument(where() + what + " overflows a 64-bit integer");
  }
};

/// Names accepted by preset().
inline std::vector<std::string> preset_names() {
  return {"qwen3-1.7b", "qwen3-0.6b", "tiny", "llama-3.2-1b", "llama-tiny"};
}

/// The exact configurations of the released checkpoints (from their config.json), and models small
/// enough for CPU tests that keep every structural feature of their family: `tiny` (Qwen3: GQA with 2
/// query heads per key/value head, head_dim independent of hidden, tied head) and `llama-tiny` (Llama
/// 3.2: GQA, head_dim = hidden / heads, tied head, the llama3 rotary scaling of Llama-3.2-1B, which
/// changes 4 of the 8 frequencies of its head_dim 16).
inline config preset(const std::string& name) {
  config c;
  c.name = name;
  if (name == "qwen3-1.7b") {
    c.vocab_size = 151936;
    c.hidden_size = 2048;
    c.intermediate_size = 6144;
    c.num_layers = 28;
    c.num_heads = 16;
    c.num_kv_heads = 8;
    c.head_dim = 128;
  } else if (name == "qwen3-0.6b") {
    c.vocab_size = 151936;
    c.hidden_size = 1024;
    c.intermediate_size = 3072;
    c.num_layers = 28;
    c.num_heads = 16;
    c.num_kv_heads = 8;
    c.head_dim = 128;
  } else if (name == "tiny") {
    c.vocab_size = 256;
    c.hidden_size = 64;
    c.intermediate_size = 160;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 24;
    c.max_position_embeddings = 4096;
  } else if (name == "llama-3.2-1b" || name == "llama-tiny") {
    c.family = model_family::llama;
    c.rms_eps = 1e-5;
    c.rope_theta = 500000.0;
    c.rope_scaling = llama3_rope_scaling{32.0, 1.0, 4.0, 8192};
    if (name == "llama-3.2-1b") {
      c.vocab_size = 128256;
      c.hidden_size = 2048;
      c.intermediate_size = 8192;
      c.num_layers = 16;
      c.num_heads = 32;
      c.num_kv_heads = 8;
      c.head_dim = 64;
      c.max_position_embeddings = 131072;
    } else {
      c.vocab_size = 256;
      c.hidden_size = 64;
      c.intermediate_size = 160;
      c.num_layers = 2;
      c.num_heads = 4;
      c.num_kv_heads = 2;
      c.head_dim = 16;
      c.max_position_embeddings = 4096;
    }
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
    if (v->is_number_float()) fail(key, "must be a whole number, got " + shown(*v) + " (fractions are not truncated)");
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

  double required_number(const char* key) const {
    if (const auto v = number(key)) return *v;
    throw std::invalid_argument(origin_ + ": missing field '" + prefix_ + key + "'");
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

/// Defaults of the fields a config.json may leave out, per family (transformers' config classes; the
/// Qwen3 values are this trainer's long-standing ones, those of the released checkpoints).
struct family_defaults {
  double rms_eps;
  double rope_theta;
  bool tie_word_embeddings;
  std::int64_t max_position_embeddings;
};

inline family_defaults defaults_of(model_family f) {
  if (f == model_family::llama) return {1e-6, 10000.0, false, 2048};  // LlamaConfig
  return {1e-6, 1e6, true, 40960};
}

/// Reads a Hugging Face Qwen3 or Llama config.json object. Every error, including a JSON value of the
/// wrong type anywhere (rope_scaling/rope_parameters contents too), is std::invalid_argument naming
/// `origin` and the field.
inline config config_from_json(const nlohmann::json& j, const std::string& origin = "config.json") {
  if (!j.is_object()) throw std::invalid_argument(origin + ": not a JSON object");
  const detail::json_fields f(j, origin);
  try {
    config c;
    c.name = origin;
    if (const auto type = f.string("model_type")) {
      if (*type == "llama")
        c.family = model_family::llama;
      else if (*type != "qwen3")
        throw std::invalid_argument(origin + ": model_type is '" + *type + "', expected 'qwen3' or 'llama'");
    }
    const auto defaults = defaults_of(c.family);
    c.max_position_embeddings = f.integer("max_position_embeddings").value_or(defaults.max_position_embeddings);

    // Rotary parameters: "rope_parameters" in newer configs, "rope_scaling" in older ones (null for
    // plain rotary embeddings). Plain rotary embeddings (default) and Llama 3's scaling (llama3) are
    // implemented; the llama3 fields are required as transformers requires them, except
    // original_max_position_embeddings, which defaults to max_position_embeddings as there.
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
      if (type && *type == "llama3") {
        llama3_rope_scaling s;
        s.factor = rf.required_number("factor");
        s.low_freq_factor = rf.required_number("low_freq_factor");
        s.high_freq_factor = rf.required_number("high_freq_factor");
        s.original_max_position_embeddings =
            rf.integer("original_max_position_embeddings").value_or(c.max_position_embeddings);
        c.rope_scaling = s;
      } else if (type && *type != "default") {
        throw std::invalid_argument(origin + ": " + key + " has rope type '" + *type +
                                    "'; only plain rotary embeddings (default) and llama3 are implemented");
      }
      if (rf.number("partial_rotary_factor").value_or(1.0) != 1.0)
        throw std::invalid_argument(origin + ": " + key + ".partial_rotary_factor other than 1 is not implemented");
      nested_theta = rf.number("rope_theta");
    }
    if (f.number("partial_rotary_factor").value_or(1.0) != 1.0)
      throw std::invalid_argument(origin + ": partial_rotary_factor other than 1 is not implemented");
    if (f.boolean("attention_bias").value_or(false))
      throw std::invalid_argument(origin + ": attention_bias=true is not implemented");
    if (f.boolean("mlp_bias").value_or(false))
      throw std::invalid_argument(origin + ": mlp_bias=true is not implemented");
    if (f.boolean("use_sliding_window").value_or(false))
      throw std::invalid_argument(origin + ": use_sliding_window=true is not implemented");
    if (const auto act = f.string("hidden_act"); act && *act != "silu")
      throw std::invalid_argument(origin + ": hidden_act '" + *act + "' is not implemented (silu only)");

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
    c.rms_eps = f.number("rms_norm_eps").value_or(defaults.rms_eps);
    c.rope_theta = f.number("rope_theta").value_or(nested_theta.value_or(defaults.rope_theta));
    c.tie_word_embeddings = f.boolean("tie_word_embeddings").value_or(defaults.tie_word_embeddings);
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
  const bool llama = c.family == model_family::llama;
  auto j = nlohmann::json{{"architectures", {llama ? "LlamaForCausalLM" : "Qwen3ForCausalLM"}},
                          {"model_type", family_name(c.family)},
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
  if (llama) j["mlp_bias"] = false;
  if (c.rope_scaling)  // as the released Llama 3.x configs write it
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling->factor},
                         {"low_freq_factor", c.rope_scaling->low_freq_factor},
                         {"high_freq_factor", c.rope_scaling->high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings}};
  return j;
}

}  // namespace qwen3
