// qwen3/rope.hpp: rotary position embeddings, shared by the model families: the inverse
// frequencies (plain, or with Llama 3's frequency scaling), the cos/sin tables, and their application.
//
//   auto inv_freq = qwen3::rotary_inv_freq(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling);  // [head_dim / 2]
//   auto tables = qwen3::make_rotary_tables(seq, inv_freq, x.options());
//   auto q_rotated = qwen3::apply_rotary(q, tables);          // q: [batch, seq, heads, head_dim]
//
// Numerics follow transformers (modeling_rope_utils.py, _compute_default_rope_parameters and
// _compute_llama3_parameters): frequencies and angles in fp32, the same operations in the same order,
// so the fp32 frequencies agree bit for bit; the tables are then cast to the model dtype.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>

#include <torch/torch.h>

#include "config.hpp"

namespace qwen3 {

/// inv_freq_i = theta^(-2i/d) for i in [0, d/2), fp32 on `device`; with `scaling` (rope_type
/// "llama3"), Llama 3's adjustment by wavelength 2 pi / inv_freq_i, with L =
/// original_max_position_embeddings:
///   wavelength < L / high_freq_factor: kept (high frequencies: positions within the trained context)
///   wavelength > L / low_freq_factor:  divided by factor (low frequencies are stretched)
///   between: (1 - s) * inv_freq / factor + s * inv_freq, s = (L / wavelength - low) / (high - low),
///            which runs from the stretched value at the long end to the kept one at the short end.
inline torch::Tensor rotary_inv_freq(std::int64_t head_dim, double theta,
                                     const std::optional<llama3_rope_scaling>& scaling,
                                     torch::Device device = torch::kCPU) {
  const auto int64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
  auto exponent = torch::arange(0, head_dim, 2, int64).to(torch::kFloat32) / head_dim;
  auto inv_freq = 1.0 / torch::pow(theta, exponent);
  if (!scaling) return inv_freq;

  const auto& s = *scaling;
  const double context = static_cast<double>(s.original_max_position_embeddings);
  const double long_wavelength = context / s.low_freq_factor;    // beyond: stretched by factor
  const double short_wavelength = context / s.high_freq_factor;  // below: kept
  // reciprocal() * x is how Python evaluates x / tensor; LibTorch's x / tensor divides instead
  // (1 ulp apart), and a wavelength on the wrong side of a boundary would change a frequency.
  auto wavelength = inv_freq.reciprocal() * (2 * M_PI);
  auto stretched = torch::where(wavelength > long_wavelength, inv_freq / s.factor, inv_freq);
  auto smooth = (wavelength.reciprocal() * context - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  auto smoothed = (1 - smooth) * stretched / s.factor + smooth * stretched;
  auto between = (wavelength >= short_wavelength).logical_and(wavelength <= long_wavelength);
  return torch::where(between, smoothed, stretched);
}

/// cos and sign-folded sin tables for positions [0, seq), shape [seq, 1, head_dim] (broadcast over
/// heads of a [batch, seq, heads, head_dim] tensor), in the model dtype.
struct rotary_tables {
  torch::Tensor cos;
  torch::Tensor sin_signed;  ///< [-sin | +sin] over the two halves (see apply_rotary)
};

/// Tables for `seq` positions from fp32 inverse frequencies (rotary_inv_freq); angles pos * inv_freq
/// in fp32 as transformers computes them, then cast to o's dtype and moved to o's device.
inline rotary_tables make_rotary_tables(std::int64_t seq, const torch::Tensor& inv_freq, torch::TensorOptions o) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(o.device());
  auto angles = torch::outer(torch::arange(seq, f32), inv_freq.to(f32));  // [seq, d/2]
  auto c = angles.cos(), s = angles.sin();
  rotary_tables t;
  t.cos = torch::cat({c, c}, -1).to(o.dtype()).unsqueeze(1);
  t.sin_signed = torch::cat({-s, s}, -1).to(o.dtype()).unsqueeze(1);
  return t;
}

/// x * cos + rotate_half(x) * sin, where rotate_half(x) = [-x2 | x1]. Swapping the halves is a roll
/// by d/2, and the minus sign lives in the table, so this is three kernels (roll, mul, addcmul) instead
/// of slice/neg/cat/mul/mul/add.
inline torch::Tensor apply_rotary(const torch::Tensor& x, const rotary_tables& t) {
  return torch::addcmul(x * t.cos, x.roll(x.size(-1) / 2, -1), t.sin_signed);
}

}  // namespace qwen3
