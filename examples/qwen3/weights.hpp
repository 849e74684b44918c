// qwen3/weights.hpp: real weights from a Hugging Face snapshot folder, and writing one.
//
//   auto model = qwen3::from_pretrained("/path/to/Qwen3-1.7B", qwen3::model_options().dtype(torch::kBFloat16));
//   qwen3::save_pretrained(*model, "/tmp/snapshot");   // config.json + model.safetensors
//
// Without a snapshot the model keeps its random initialisation. For this project's timing experiment
// that is enough: step time depends on tensor shapes, dtypes and the schedule, not on weight values.
// Real weights matter only when the loss values themselves are of interest.
//
// Names follow transformers' Qwen3ForCausalLM and LlamaForCausalLM ("model.layers.3.self_attn.q_proj.weight",
// ...; the two differ only in Qwen3's self_attn.q_norm / k_norm). The
// stacked projections of this model (q/k/v, gate/up) are filled block by block from the separate
// checkpoint tensors. Every expected tensor must be present with the exact shape and a floating dtype
// (converted to the model's dtype); a missing, misshapen or unexpected tensor is an error naming it.
#pragma once
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "config.hpp"
#include "families.hpp"
#include "model.hpp"
#include "safetensors.hpp"

namespace qwen3 {

/// (Hugging Face name, tensor of this model that holds it). Tensors are views into the model's
/// parameters: copying into them loads the weight. The tied output head has no entry of its own.
inline std::vector<std::pair<std::string, torch::Tensor>> hf_tensors(CausalLMImpl& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  out.emplace_back("model.embed_tokens.weight", m.embed_tokens);
  for (std::size_t i = 0; i < m.layers->size(); ++i) {
    auto layer = m.layers->ptr<DecoderLayerImpl>(i);
    const auto p = "model.layers." + std::to_string(i) + ".";
    for (const char* t : {"q_proj", "k_proj", "v_proj"})
      out.emplace_back(p + "self_attn." + t + ".weight", layer->self_attn->qkv_proj->target_weight(t));
    out.emplace_back(p + "self_attn.o_proj.weight", layer->self_attn->o_proj->weight);
    // A family's norms inside the attention (Qwen3: q_norm, k_norm) carry transformers' module names.
    for (const auto& child : layer->self_attn->named_children())
      if (auto norm = std::dynamic_pointer_cast<RMSNormImpl>(child.value()))
        out.emplace_back(p + "self_attn." + child.key() + ".weight", norm->weight);
    for (const char* t : {"gate_proj", "up_proj"})
      out.emplace_back(p + "mlp." + t + ".weight", layer->mlp->gate_up_proj->target_weight(t));
    out.emplace_back(p + "mlp.down_proj.weight", layer->mlp->down_proj->weight);
    out.emplace_back(p + "input_layernorm.weight", layer->input_layernorm->weight);
    out.emplace_back(p + "post_attention_layernorm.weight", layer->post_attention_layernorm->weight);
  }
  out.emplace_back("model.norm.weight", m.norm->weight);
  if (!m.cfg().tie_word_embeddings) out.emplace_back("lm_head.weight", m.lm_head);
  return out;
}

/// Copies every weight of the snapshot in `folder` into `m` (whose config must match the snapshot's).
inline void load_weights(CausalLMImpl& m, const std::string& folder) {
  safetensors::snapshot snap(folder);
  std::set<std::string> used;
  torch::NoGradGuard no_grad;
  for (auto& kv : hf_tensors(m)) {
    const auto& name = kv.first;
    auto& dst = kv.second;
    if (!snap.contains(name)) throw std::runtime_error(folder + ": weight '" + name + "' is missing");
    const auto& e = snap.at(name);
    const auto where = folder + ": weight '" + name + "'";
    if (e.shape != dst.sizes().vec()) {
      std::string want, got;
      for (auto d : dst.sizes()) want += (want.empty() ? "" : ", ") + std::to_string(d);
      for (auto d : e.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      throw std::runtime_error(where + " has shape [" + got + "], the config needs [" + want + "]");
    }
    if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16" && e.dtype != "F64")
      throw std::runtime_error(where + " has dtype " + e.dtype + "; expected a floating dtype (BF16, F16, F32)");
    dst.copy_(snap.load(name));  // converts dtype, moves to the model's device
    used.insert(name);
  }
  for (const auto& name : snap.names()) {
    if (used.count(name)) continue;
    // Tolerated extras: a tied head stored anyway, and rotary caches some exporters keep.
    if (name == "lm_head.weight" && m.cfg().tie_word_embeddings) continue;
    if (name.size() >= 20 && name.compare(name.size() - 20, 20, "rotary_emb.inv_freq") == 0) continue;
    throw std::runtime_error(folder + ": unexpected weight '" + name + "' (a different architecture or config?)");
  }
}

/// Builds a model from a snapshot folder: config.json decides the family and the shapes, then the
/// weights load.
inline CausalLM from_pretrained(const std::string& folder, const model_options& o = {}) {
  auto m = make_model(load_config(folder), o);
  load_weights(*m, folder);
  return m;
}

/// Writes `m` as a Hugging Face snapshot: config.json and model.safetensors (or, with shards > 1,
/// model-0000i-of-0000n.safetensors plus model.safetensors.index.json). dtype: of the stored tensors.
inline void save_pretrained(CausalLMImpl& m, const std::string& folder, std::optional<torch::Dtype> dtype = {},
                            int shards = 1) {
  if (shards < 1) throw std::invalid_argument("save_pretrained: shards must be >= 1");
  {
    std::ofstream cfg(folder + "/config.json");
    if (!cfg) throw std::runtime_error(folder + "/config.json: cannot create");
    auto j = to_json(m.cfg());
    j["torch_dtype"] = dtype ? (*dtype == torch::kBFloat16  ? "bfloat16"
                                : *dtype == torch::kFloat16 ? "float16"
                                                            : "float32")
                             : "float32";
    cfg << j.dump(2) << "\n";
  }
  auto all = hf_tensors(m);
  if (dtype)
    for (auto& kv : all) kv.second = kv.second.to(*dtype);
  if (shards == 1) {
    safetensors::write(folder + "/model.safetensors", all, {{"format", "pt"}});
    return;
  }
  nlohmann::json index{{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  const std::size_t per = (all.size() + shards - 1) / shards;
  for (int s = 0; s < shards; ++s) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, shards);
    std::vector<std::pair<std::string, torch::Tensor>> part;
    for (std::size_t i = s * per; i < std::min(all.size(), (s + 1) * per); ++i) {
      part.push_back(all[i]);
      index["weight_map"][all[i].first] = file;
    }
    safetensors::write(folder + "/" + file, part, {{"format", "pt"}});
  }
  std::ofstream idx(folder + "/model.safetensors.index.json");
  idx << index.dump(2) << "\n";
}

}  // namespace qwen3
