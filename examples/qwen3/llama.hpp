// qwen3/llama.hpp: a Llama 3.2 decoder (Llama-3.2-1B's structure), the second model family:
//   embedding -> layers of [RMSNorm -> attention (GQA, rotary with Llama 3's frequency scaling, no
//   q/k norm) -> RMSNorm -> SwiGLU MLP], each with its residual -> final RMSNorm -> tied head.
//
//   auto cfg = qwen3::preset("llama-3.2-1b");             // or load_config() of a Llama snapshot
//   qwen3::Llama model(cfg, qwen3::model_options().dtype(torch::kBFloat16).device(torch::kCUDA));
//   auto loss = model->loss(ids);                          // the trainer takes it as a CausalLM
//
// What Llama shares with Qwen3 is not repeated here: RMSNorm, the SwiGLU MLP, the decoder layer, the
// model and its loss (model.hpp), the rotary embeddings (rope.hpp), the LoRA projections (lora.hpp).
// What differs:
//   - the attention: queries and keys go from the projection straight to the rotation (Qwen3
//     normalises each head first);
//   - the rotary frequencies: Llama 3 stretches the long wavelengths (rope_type "llama3": factor 32,
//     low/high frequency factors 1 and 4, original context 8192 in Llama-3.2-1B), computed from the
//     config by rope.hpp;
//   - the config's defaults and sizes: head_dim = hidden / heads, rms_norm_eps 1e-5, rope_theta
//     500000 (config.hpp).
// Attention and MLP biases (attention_bias, mlp_bias) are false in every released Llama 3 model; a
// config that sets them is rejected (config.hpp). Numerics follow transformers' modeling_llama.py as
// model.hpp follows modeling_qwen3.py.
#pragma once
#include <memory>
#include <utility>

#include <torch/torch.h>

#include "config.hpp"
#include "model.hpp"
#include "rope.hpp"

namespace qwen3 {

/// Llama's attention: rotary embeddings on the projected queries and keys, nothing else.
class LlamaAttentionImpl : public AttentionImpl {
 public:
  LlamaAttentionImpl(const config& c, const model_options& o) : AttentionImpl(c, o) {}

  torch::Tensor forward(const torch::Tensor& x, const rotary_tables& rope) override {
    auto [q, k, v] = project(x);
    return attend_and_project(apply_rotary(q, rope), apply_rotary(k, rope), v);
  }
};

/// Llama causal language model: the shared decoder with Llama's attention.
class LlamaImpl : public CausalLMImpl {
 public:
  LlamaImpl(config c, model_options o = {})
      : CausalLMImpl(of_family(std::move(c), model_family::llama), o,
                     [](const config& cc, const model_options& oo) -> std::shared_ptr<AttentionImpl> {
                       return std::make_shared<LlamaAttentionImpl>(cc, oo);
                     }) {}
};
TORCH_MODULE(Llama);

}  // namespace qwen3
