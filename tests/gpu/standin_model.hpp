// A LibTorch stand-in for a decoder-only transformer with LoRA adapters (Qwen3-like layout: RMSNorm,
// grouped-query attention with rotary embeddings, SwiGLU MLP; LoRA on all seven linear layers, base
// weights frozen). Random weights: it exists to launch a realistic number and mix of kernels, not
// to learn anything. Used by the [gpu] tests.
#pragma once
#include <torch/torch.h>

#include <cmath>
#include <vector>

namespace standin {

struct config {
  int layers = 28;
  int hidden = 2048;
  int heads = 16;
  int kv_heads = 8;
  int ffn = 6144;
  int vocab = 32000;
  int rank = 16;  // LoRA rank
  torch::Dtype dtype = torch::kBFloat16;
};

/// y = x W^T + scale * (x A^T) B^T with W frozen and A, B trainable.
struct lora_linear {
  torch::Tensor w, a, b;
  double scale = 2.0;
  lora_linear() = default;
  lora_linear(int in, int out, int rank, const torch::TensorOptions& o) {
    w = torch::randn({out, in}, o) * (1.0 / std::sqrt(static_cast<double>(in)));
    a = (torch::randn({rank, in}, o) * (1.0 / std::sqrt(static_cast<double>(in)))).requires_grad_(true);
    b = torch::zeros({out, rank}, o).requires_grad_(true);
  }
  torch::Tensor operator()(const torch::Tensor& x) const {
    return torch::nn::functional::linear(x, w) +
           torch::nn::functional::linear(torch::nn::functional::linear(x, a), b) * scale;
  }
};

inline torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& g) {
  auto xf = x.to(torch::kFloat32);
  return (xf * torch::rsqrt(xf.pow(2).mean(-1, true) + 1e-6)).to(x.scalar_type()) * g;
}

inline torch::Tensor rotate_half(const torch::Tensor& x) {
  const auto d = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, d), x.slice(-1, 0, d)}, -1);
}

struct block {
  torch::Tensor norm1, norm2;
  lora_linear q, k, v, o, gate, up, down;
};

struct model {
  config cfg;
  torch::Tensor embed, head, norm;
  std::vector<block> blocks;
  torch::Tensor cos, sin;

  model(const config& c, int max_seq, torch::Device dev) : cfg(c) {
    const auto o = torch::TensorOptions().dtype(c.dtype).device(dev);
    const int hd = c.hidden / c.heads;
    embed = torch::randn({c.vocab, c.hidden}, o) * 0.02;
    head = torch::randn({c.vocab, c.hidden}, o) * 0.02;
    norm = torch::ones({c.hidden}, o);
    for (int i = 0; i < c.layers; ++i) {
      block b;
      b.norm1 = torch::ones({c.hidden}, o);
      b.norm2 = torch::ones({c.hidden}, o);
      b.q = lora_linear(c.hidden, c.heads * hd, c.rank, o);
      b.k = lora_linear(c.hidden, c.kv_heads * hd, c.rank, o);
      b.v = lora_linear(c.hidden, c.kv_heads * hd, c.rank, o);
      b.o = lora_linear(c.heads * hd, c.hidden, c.rank, o);
      b.gate = lora_linear(c.hidden, c.ffn, c.rank, o);
      b.up = lora_linear(c.hidden, c.ffn, c.rank, o);
      b.down = lora_linear(c.ffn, c.hidden, c.rank, o);
      blocks.push_back(b);
    }
    auto pos = torch::arange(max_seq, torch::TensorOptions().dtype(torch::kFloat32).device(dev));
    auto inv =
        torch::pow(10000.0, -torch::arange(0, hd, 2, torch::TensorOptions().dtype(torch::kFloat32).device(dev)) / hd);
    auto ang = torch::outer(pos, inv);
    ang = torch::cat({ang, ang}, -1);
    cos = ang.cos().to(c.dtype);
    sin = ang.sin().to(c.dtype);
  }

  std::vector<torch::Tensor> trainable() const {
    std::vector<torch::Tensor> p;
    for (auto& b : blocks)
      for (auto* l : {&b.q, &b.k, &b.v, &b.o, &b.gate, &b.up, &b.down}) {
        p.push_back(l->a);
        p.push_back(l->b);
      }
    return p;
  }

  torch::Tensor attention(const block& b, const torch::Tensor& x) const {
    const auto B = x.size(0), T = x.size(1);
    const int hd = cfg.hidden / cfg.heads;
    auto q = b.q(x).view({B, T, cfg.heads, hd}).transpose(1, 2);
    auto k = b.k(x).view({B, T, cfg.kv_heads, hd}).transpose(1, 2);
    auto v = b.v(x).view({B, T, cfg.kv_heads, hd}).transpose(1, 2);
    auto c = cos.slice(0, 0, T), s = sin.slice(0, 0, T);
    q = q * c + rotate_half(q) * s;
    k = k * c + rotate_half(k) * s;
    k = k.repeat_interleave(cfg.heads / cfg.kv_heads, 1);
    v = v.repeat_interleave(cfg.heads / cfg.kv_heads, 1);
#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2
    auto y = torch::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
#else
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
    auto mask = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
    auto y = torch::matmul(torch::softmax(scores.masked_fill(mask, -1e4), -1), v);
#endif
    return b.o(y.transpose(1, 2).reshape({B, T, cfg.hidden}));
  }

  /// Mean next-token cross-entropy of `tokens` [B, T].
  torch::Tensor loss(const torch::Tensor& tokens) const {
    auto x = torch::nn::functional::embedding(tokens, embed);
    for (auto& b : blocks) {
      x = x + attention(b, rms_norm(x, b.norm1));
      auto h = rms_norm(x, b.norm2);
      x = x + b.down(torch::silu(b.gate(h)) * b.up(h));
    }
    auto logits = torch::nn::functional::linear(rms_norm(x, norm), head);
    const auto V = logits.size(-1);
    return torch::nn::functional::cross_entropy(logits.slice(1, 0, -1).reshape({-1, V}).to(torch::kFloat32),
                                                tokens.slice(1, 1).reshape({-1}));
  }
};

}  // namespace standin
