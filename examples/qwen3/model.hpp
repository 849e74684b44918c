// qwen3/model.hpp: a Qwen3 decoder in LibTorch C++, top to bottom:
//   RMSNorm -> attention (GQA; Qwen3's with per-head q/k RMSNorm) -> SwiGLU MLP -> decoder layer ->
//   model (embedding, layers, final norm, tied head, causal-LM loss). Rotary embeddings: rope.hpp.
//
//   auto cfg = qwen3::preset("qwen3-1.7b");
//   qwen3::Qwen3 model(cfg, qwen3::model_options().dtype(torch::kBFloat16).device(torch::kCUDA));
//   auto adapters = qwen3::apply_lora(*model, {});        // lora.hpp
//   auto loss = model->loss(ids);                         // ids: [batch, seq] int64 on the model's device
//
// Everything but Qwen3's attention is shared with the Llama family (llama.hpp), which differs only in
// its attention (no q/k norm) and its config (llama3 rotary scaling, see rope.hpp): `CausalLM` is the
// model both build, and what the trainer takes. families.hpp builds the right one from a config.
//
// Numerics follow transformers' Qwen3 (modeling_qwen3.py): RMSNorm computes in fp32 and casts back,
// rotary tables are computed in fp32 and cast to the model dtype, attention scale is head_dim^-0.5,
// the loss is computed on fp32 log-probabilities. Where this file takes a faster route (fused kernels,
// stacked projections) the math is the same; the comments say where rounding can differ in bf16.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>
#include <torch/version.h>

#include "checkpoint.hpp"
#include "chunked_loss.hpp"
#include "config.hpp"
#include "lora.hpp"
#include "rope.hpp"

// Fused LibTorch operators by version. Each has a plain fallback with the same math.
#if TORCH_VERSION_MAJOR >= 2
#define QWEN3_HAVE_SDPA 1  // at::scaled_dot_product_attention (flash/efficient kernels on CUDA)
#else
#define QWEN3_HAVE_SDPA 0
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#define QWEN3_HAVE_SDPA_GQA 1  // enable_gqa: key/value heads shared without materialising copies
#else
#define QWEN3_HAVE_SDPA_GQA 0
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define QWEN3_HAVE_RMS_NORM 1  // at::rms_norm (a single fused kernel on CUDA in recent versions)
#else
#define QWEN3_HAVE_RMS_NORM 0
#endif

namespace qwen3 {

/// Where and how the model is built. Fluent setters, as LibTorch's own options structs.
struct model_options {
  model_options& dtype(torch::Dtype d) {
    dtype_ = d;
    return *this;
  }
  model_options& device(torch::Device d) {
    device_ = d;
    return *this;
  }
  /// Recompute each decoder layer in backward instead of keeping its activations (checkpoint.hpp).
  model_options& gradient_checkpointing(bool on) {
    checkpointing_ = on;
    return *this;
  }
  /// Use fused operators (scaled-dot-product attention, rms_norm) where LibTorch has them; off =
  /// the plain formulation everywhere (for tests comparing the two).
  model_options& fused_ops(bool on) {
    fused_ = on;
    return *this;
  }
  /// Standard deviation of the random normal initialisation of weight matrices (HF's
  /// initializer_range). Norm weights start at one.
  model_options& init_std(double s) {
    init_std_ = s;
    return *this;
  }
  /// With fused attention on LibTorch >= 2.5: let the kernel share key/value heads across query
  /// heads (enable_gqa) instead of materialising repeated copies. Off = copy (for comparisons).
  model_options& shared_kv_heads(bool on) {
    shared_kv_ = on;
    return *this;
  }
  /// Compute the loss `n` target tokens at a time without the full [tokens, vocab] logits
  /// (chunked_loss.hpp); 0 = the full-logits form.
  model_options& loss_chunk(std::int64_t n) {
    loss_chunk_ = n;
    return *this;
  }

  torch::Dtype dtype_ = torch::kFloat32;
  torch::Device device_ = torch::kCPU;
  bool checkpointing_ = false;
  bool fused_ = true;
  bool shared_kv_ = true;
  double init_std_ = 0.02;
  std::int64_t loss_chunk_ = 0;

  torch::TensorOptions tensor_options() const { return torch::TensorOptions().dtype(dtype_).device(device_); }
};

// ---- RMSNorm ---------------------------------------------------------------------------------------

/// y = w * x / sqrt(mean(x^2) + eps), over the last dimension, computed in fp32.
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(std::int64_t dim, double eps, torch::TensorOptions o, bool fused = true) : eps_(eps), fused_(fused) {
    weight = register_parameter("weight", torch::ones({dim}, o));
  }

  torch::Tensor forward(const torch::Tensor& x) {
#if QWEN3_HAVE_RMS_NORM
    // One kernel (fp32 accumulation inside). It multiplies by w before rounding to the model
    // dtype, where transformers rounds first: identical in fp32, may differ by 1 ulp in bf16.
    if (fused_) return at::rms_norm(x, {x.size(-1)}, weight, eps_);
#endif
    auto x32 = x.to(torch::kFloat32);
    auto inv = torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
    return weight * (x32 * inv).to(x.scalar_type());
  }

  void pretty_print(std::ostream& os) const override {
    os << "qwen3::RMSNorm(" << weight.size(0) << ", eps=" << eps_ << ")";
  }

  torch::Tensor weight;

 private:
  double eps_;
  [[maybe_unused]] bool fused_;  // read only where LibTorch has the fused kernel (QWEN3_HAVE_RMS_NORM)
};
TORCH_MODULE(RMSNorm);

// ---- attention -------------------------------------------------------------------------------------

/// Grouped-query causal self-attention, the part every family shares: q/k/v as one Projection (one
/// GEMM for the frozen base, one adapter per target), the attention itself, o_proj. A family derives
/// and writes forward(): what it does to queries and keys between project() and attend_and_project()
/// (Qwen3Attention below; LlamaAttention in llama.hpp).
class AttentionImpl : public torch::nn::Module {
 public:
  /// x: [batch, seq, hidden] -> [batch, seq, hidden]. Causal.
  virtual torch::Tensor forward(const torch::Tensor& x, const rotary_tables& rope) = 0;

  Projection qkv_proj{nullptr}, o_proj{nullptr};

 protected:
  AttentionImpl(const config& c, const model_options& o)
      : heads_(c.num_heads),
        kv_heads_(c.num_kv_heads),
        head_dim_(c.head_dim),
        fused_(o.fused_),
        shared_kv_(o.shared_kv_) {
    const auto to = o.tensor_options();
    qkv_proj = register_module("qkv_proj",
                               Projection(c.hidden_size,
                                          std::vector<projection_target>{
                                              {"q_proj", c.q_dim()}, {"k_proj", c.kv_dim()}, {"v_proj", c.kv_dim()}},
                                          to, o.init_std_));
    o_proj = register_module(
        "o_proj", Projection(c.q_dim(), std::vector<projection_target>{{"o_proj", c.hidden_size}}, to, o.init_std_));
  }

  /// q, k, v of x, each [batch, seq, heads, head_dim] (k and v with the key/value heads): views of
  /// the projection's output, for the per-head steps (norm, rotation).
  std::array<torch::Tensor, 3> project(const torch::Tensor& x) {
    const auto b = x.size(0), s = x.size(1);
    auto qkv = qkv_proj->forward_all(x);
    return {qkv[0].view({b, s, heads_, head_dim_}), qkv[1].view({b, s, kv_heads_, head_dim_}),
            qkv[2].view({b, s, kv_heads_, head_dim_})};
  }

  /// Causal attention of the per-head q, k, v ([batch, seq, heads, head_dim], as project() gives
  /// them), then o_proj: [batch, seq, hidden]. The transposes to [batch, heads, seq, dim] are views.
  torch::Tensor attend_and_project(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
    const auto b = q.size(0), s = q.size(1);
    auto y = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2));  // [batch, heads, seq, dim]
    return o_proj(y.transpose(1, 2).reshape({b, s, heads_ * head_dim_}));
  }

 private:
  torch::Tensor attend(const torch::Tensor& q, torch::Tensor k, torch::Tensor v) {
    const auto groups = heads_ / kv_heads_;
#if QWEN3_HAVE_SDPA
    if (fused_) {
      // Flash attention on CUDA for bf16/fp16 (no [seq, seq] score matrix in memory), causal by flag.
#if QWEN3_HAVE_SDPA_GQA
      if (shared_kv_ && groups > 1)
        return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, {}, /*enable_gqa=*/true);
#endif
      if (groups > 1) {
        k = repeat_kv(k, groups);
        v = repeat_kv(v, groups);
      }
      return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
    }
#endif
    // Plain attention, as transformers' eager path: softmax in fp32, then back to the model dtype.
    if (groups > 1) {
      k = repeat_kv(k, groups);
      v = repeat_kv(v, groups);
    }
    const auto s = q.size(2);
    auto scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(head_dim_)));
    auto future = torch::ones({s, s}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
    auto probs = torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());
    return torch::matmul(probs, v);
  }

  /// [b, kv_heads, s, d] -> [b, kv_heads * groups, s, d], query head h reading key/value head h / groups.
  static torch::Tensor repeat_kv(const torch::Tensor& t, std::int64_t groups) {
    const auto b = t.size(0), kvh = t.size(1), s = t.size(2), d = t.size(3);
    return t.unsqueeze(2).expand({b, kvh, groups, s, d}).reshape({b, kvh * groups, s, d});
  }

  std::int64_t heads_, kv_heads_, head_dim_;
  // Read only where LibTorch has scaled_dot_product_attention (QWEN3_HAVE_SDPA, _GQA).
  [[maybe_unused]] bool fused_;
  [[maybe_unused]] bool shared_kv_;
};

/// Qwen3's attention: per-head RMSNorm on queries and keys before the rotation (the Qwen3 change
/// over Qwen2 and Llama).
class Qwen3AttentionImpl : public AttentionImpl {
 public:
  Qwen3AttentionImpl(const config& c, const model_options& o) : AttentionImpl(c, o) {
    const auto to = o.tensor_options();
    q_norm = register_module("q_norm", RMSNorm(c.head_dim, c.rms_eps, to, o.fused_));
    k_norm = register_module("k_norm", RMSNorm(c.head_dim, c.rms_eps, to, o.fused_));
  }

  torch::Tensor forward(const torch::Tensor& x, const rotary_tables& rope) override {
    auto [q, k, v] = project(x);
    return attend_and_project(apply_rotary(q_norm(q), rope), apply_rotary(k_norm(k), rope), v);
  }

  RMSNorm q_norm{nullptr}, k_norm{nullptr};
};

// ---- MLP -------------------------------------------------------------------------------------------

/// SwiGLU: down(silu(gate(x)) * up(x)); gate and up are one Projection.
class MLPImpl : public torch::nn::Module {
 public:
  MLPImpl(const config& c, const model_options& o) {
    const auto to = o.tensor_options();
    gate_up_proj = register_module(
        "gate_up_proj",
        Projection(c.hidden_size,
                   std::vector<projection_target>{{"gate_proj", c.intermediate_size}, {"up_proj", c.intermediate_size}},
                   to, o.init_std_));
    down_proj = register_module(
        "down_proj",
        Projection(c.intermediate_size, std::vector<projection_target>{{"down_proj", c.hidden_size}}, to, o.init_std_));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    auto gu = gate_up_proj->forward_all(x);
    return down_proj(torch::silu(gu[0]) * gu[1]);
  }

  Projection gate_up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(MLP);

// ---- decoder layer ---------------------------------------------------------------------------------

/// Pre-norm residual block: h = x + attn(norm(x)); out = h + mlp(norm(h)). The attention is the
/// family's.
class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const config& c, const model_options& o, std::shared_ptr<AttentionImpl> attention) {
    const auto to = o.tensor_options();
    input_layernorm = register_module("input_layernorm", RMSNorm(c.hidden_size, c.rms_eps, to, o.fused_));
    self_attn = register_module("self_attn", std::move(attention));
    post_attention_layernorm =
        register_module("post_attention_layernorm", RMSNorm(c.hidden_size, c.rms_eps, to, o.fused_));
    mlp = register_module("mlp", MLP(c, o));
  }

  torch::Tensor forward(const torch::Tensor& x, const rotary_tables& rope) {
    auto h = x + self_attn->forward(input_layernorm(x), rope);
    return h + mlp(post_attention_layernorm(h));
  }

  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  std::shared_ptr<AttentionImpl> self_attn;
  MLP mlp{nullptr};
};
TORCH_MODULE(DecoderLayer);

// ---- the model -------------------------------------------------------------------------------------

/// Builds the attention of one decoder layer: the family's choice.
using attention_factory = std::shared_ptr<AttentionImpl> (*)(const config&, const model_options&);

/// The causal language model every family builds (Qwen3 below, Llama in llama.hpp), and what the
/// trainer takes. Weights are random (normal(0, init_std), norms at one) until load_weights()
/// (weights.hpp) fills them from a Hugging Face snapshot.
class CausalLMImpl : public torch::nn::Module {
 protected:
  CausalLMImpl(config c, model_options o, attention_factory make_attention) : cfg_(std::move(c)), opts_(o) {
    cfg_.validate();
    const auto to = o.tensor_options();
    embed_tokens = register_parameter("embed_tokens", torch::empty({cfg_.vocab_size, cfg_.hidden_size}, to));
    {
      torch::NoGradGuard no_grad;
      embed_tokens.normal_(0.0, o.init_std_);
    }
    layers = register_module("layers", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < cfg_.num_layers; ++i)
      layers->push_back(DecoderLayer(cfg_, o, make_attention(cfg_, o)));
    norm = register_module("norm", RMSNorm(cfg_.hidden_size, cfg_.rms_eps, to, o.fused_));
    if (!cfg_.tie_word_embeddings) {
      lm_head = register_parameter("lm_head", torch::empty({cfg_.vocab_size, cfg_.hidden_size}, to));
      torch::NoGradGuard no_grad;
      lm_head.normal_(0.0, o.init_std_);
    }
  }

 public:
  const config& cfg() const { return cfg_; }
  const model_options& options() const { return opts_; }
  void set_gradient_checkpointing(bool on) { opts_.checkpointing_ = on; }
  bool gradient_checkpointing() const { return opts_.checkpointing_; }
  void set_loss_chunk(std::int64_t n) { opts_.loss_chunk_ = n; }

  /// The output head: the embedding matrix when tied (counted once), else its own weight.
  const torch::Tensor& head_weight() const { return cfg_.tie_word_embeddings ? embed_tokens : lm_head; }

  /// ids: [batch, seq] int64 -> final hidden states [batch, seq, hidden] (after the last norm).
  torch::Tensor hidden_states(const torch::Tensor& ids) {
    TORCH_CHECK(ids.dim() == 2, "qwen3: ids must be [batch, seq], got ", ids.sizes());
    auto x = torch::embedding(embed_tokens, ids);
    const auto& rope = rotary(ids.size(1));
    for (std::size_t i = 0; i < layers->size(); ++i) {
      auto layer = layers->ptr<DecoderLayerImpl>(i);
      if (opts_.checkpointing_ && torch::GradMode::is_enabled()) {
        // The closure holds the layer and the tables by value: the backward may run after the
        // rotary cache was rebuilt for another length.
        x = checkpoint([layer, rope](const torch::Tensor& h) { return layer->forward(h, rope); }, x,
                       layer->parameters());
      } else {
        x = layer->forward(x, rope);
      }
    }
    return norm(x);
  }

  /// ids: [batch, seq] -> logits [batch, seq, vocab] in the model dtype.
  torch::Tensor logits(const torch::Tensor& ids) { return torch::matmul(hidden_states(ids), head_weight().t()); }

  /// Causal-LM cross-entropy: position t predicts token t+1, mean over all batch * (seq-1) targets
  /// (every example is exactly seq tokens, so there is no padding to mask).
  ///
  /// Only the seq-1 positions that have a target go through the head (skipping the last one also
  /// avoids slicing the large logits tensor). The loss is computed on fp32 log-probabilities, as
  /// transformers does (it upcasts logits before cross-entropy): with bf16 log-probs the loss and its
  /// gradient would carry ~3 significant digits. (log_softmax(..., kFloat) reads fp16 logits and
  /// writes fp32 in one kernel on CUDA; bf16 logits LibTorch first copies to fp32.) With
  /// model_options::loss_chunk the same loss is computed a chunk of tokens at a time
  /// (chunked_loss.hpp): no [tokens, vocab] tensor at all, the head's gradient computed in forward.
  torch::Tensor loss(const torch::Tensor& ids) {
    const auto s = ids.size(1);
    TORCH_CHECK(s >= 2, "qwen3: loss needs sequences of at least 2 tokens");
    auto h = hidden_states(ids).narrow(1, 0, s - 1).reshape({-1, cfg_.hidden_size});
    auto targets = ids.narrow(1, 1, s - 1).reshape({-1});
    if (opts_.loss_chunk_ > 0) return chunked_linear_cross_entropy(h, head_weight(), targets, opts_.loss_chunk_);
    return linear_cross_entropy(h, head_weight(), targets);
  }

  /// Rotary tables for `seq` positions, cached (rebuilt when the length, dtype or device changes).
  const rotary_tables& rotary(std::int64_t seq) {
    const auto to = embed_tokens.options();
    if (!rope_.cos.defined() || rope_seq_ != seq || rope_.cos.device() != to.device() ||
        rope_.cos.scalar_type() != embed_tokens.scalar_type()) {
      torch::NoGradGuard no_grad;
      const auto inv_freq = rotary_inv_freq(cfg_.head_dim, cfg_.rope_theta, cfg_.rope_scaling, to.device());
      rope_ = make_rotary_tables(seq, inv_freq, to);
      rope_seq_ = seq;
    }
    return rope_;
  }

  void pretty_print(std::ostream& os) const override {
    os << family_name(cfg_.family) << "(" << cfg_.name << ": " << cfg_.num_layers << " layers, hidden "
       << cfg_.hidden_size << ", heads " << cfg_.num_heads << "/" << cfg_.num_kv_heads << ", vocab " << cfg_.vocab_size
       << ")";
  }

  torch::Tensor embed_tokens;  ///< [vocab, hidden]; also the output head when tied
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
  torch::Tensor lm_head;  ///< only when the config does not tie embeddings

 private:
  config cfg_;
  model_options opts_;
  rotary_tables rope_;
  std::int64_t rope_seq_ = -1;
};
TORCH_MODULE(CausalLM);

/// Throws std::invalid_argument unless `c` is of family `f` (a family's model built from another's
/// config would have the wrong modules for its checkpoint and parameter count).
inline config of_family(config c, model_family f) {
  if (c.family != f)
    throw std::invalid_argument(std::string(family_name(f)) + " model from " + c.label() +
                                " (make_model in families.hpp picks the family)");
  return c;
}

/// Qwen3 causal language model: the shared decoder with Qwen3's attention.
class Qwen3Impl : public CausalLMImpl {
 public:
  Qwen3Impl(config c, model_options o = {})
      : CausalLMImpl(of_family(std::move(c), model_family::qwen3), o,
                     [](const config& cc, const model_options& oo) -> std::shared_ptr<AttentionImpl> {
                       return std::make_shared<Qwen3AttentionImpl>(cc, oo);
                     }) {}
};
TORCH_MODULE(Qwen3);

/// Total number of parameter elements (tied weights are one parameter, so counted once).
inline std::int64_t parameter_count(const torch::nn::Module& m) {
  std::int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace qwen3
