// qwen3/loss_scaler.hpp: dynamic loss scaling for fp16 training, with the semantics of
// torch.cuda.amp.GradScaler.
//
//   qwen3::loss_scaler scaler(device);                     // 65536, x2 after 2000 good steps, x0.5 on inf/nan
//   (loss * scaler.scale()).backward();                    // every gradient `scale` times too large
//   const bool found_inf = scaler.unscale_and_check(grads);  // fp32 gradients; one CPU-GPU sync point
//   if (!found_inf) update the weights;                    // else the step is skipped
//   scaler.update(found_inf);
//
// Why: fp16 has a 5-bit exponent. Gradient values below 2^-24 (6e-8) flush to zero and below 2^-14
// lose precision, and many gradients of a deep network are that small. Multiplying the loss by a
// large factor lifts every gradient of the backward pass into fp16's range; they are divided by it
// again in fp32 before the optimizer reads them. Too large a factor overflows to inf somewhere:
// that step is skipped and the factor halved. After `growth_interval` steps in a row without
// overflow it is doubled, so the scale keeps probing for the largest factor that fits. Factors are
// powers of two (with the default options), so scaling and unscaling round nothing.
//
// The skip decision is the host's: unscale_and_check() reads one flag from the device, the one
// CPU-GPU sync point of an optimizer step. The scale itself lives in a device tensor that is
// updated in place, so a CUDA graph that multiplies by it (cuda_graph.hpp) reads the current value
// at every replay.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace qwen3 {

/// GradScaler's defaults.
struct loss_scaler_options {
  double init_scale = 65536.0;          ///< 2^16
  double growth_factor = 2.0;           ///< after growth_interval good steps in a row
  double backoff_factor = 0.5;          ///< after a step with inf/nan gradients
  std::int64_t growth_interval = 2000;  ///< good steps in a row before the scale grows
};

class loss_scaler {
 public:
  /// Throws std::invalid_argument naming the option when one is out of range (as GradScaler asserts:
  /// init_scale > 0 and finite in fp32, growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1).
  explicit loss_scaler(torch::Device device = torch::kCPU, loss_scaler_options o = {}) : o_(o) {
    const auto bad = [](const std::string& what) { throw std::invalid_argument("loss_scaler: " + what); };
    if (!(o.init_scale > 0) || !std::isfinite(static_cast<float>(o.init_scale)))
      bad("init_scale must be positive and finite in fp32, got " + std::to_string(o.init_scale));
    if (!(o.growth_factor > 1)) bad("growth_factor must be > 1, got " + std::to_string(o.growth_factor));
    if (!(o.backoff_factor > 0 && o.backoff_factor < 1))
      bad("backoff_factor must be in (0, 1), got " + std::to_string(o.backoff_factor));
    if (o.growth_interval < 1) bad("growth_interval must be >= 1, got " + std::to_string(o.growth_interval));
    scale_ = static_cast<float>(o.init_scale);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    scale_t_ = torch::full({}, scale_, f32);
    inv_scale_t_ = torch::full({}, 1.0 / scale_, f32);
    found_inf_ = torch::zeros({}, f32);
  }

  /// The scale as a 0-dim fp32 tensor on the device: multiply the loss by it. The same tensor for
  /// the scaler's life (updated in place by update()).
  const torch::Tensor& scale() const { return scale_t_; }
  /// The scale on the host (no sync: the host keeps its own copy).
  double scale_value() const { return scale_; }
  const loss_scaler_options& options() const { return o_; }

  /// Multiplies every gradient by 1/scale in place and returns whether any of them holds an inf or
  /// a nan. CPU-GPU sync point: reads one flag from the device. fp16 gradients are refused (as
  /// GradScaler refuses them): an unscaled gradient that small would flush to zero in fp16; unscale
  /// fp32 copies (adamw keeps fp32 master weights for fp16 parameters).
  bool unscale_and_check(const std::vector<torch::Tensor>& grads) {
    torch::NoGradGuard no_grad;
    for (const auto& g : grads)
      if (g.scalar_type() == torch::kHalf)
        throw std::invalid_argument("loss_scaler: cannot unscale fp16 gradients; unscale fp32 master copies");
    if (grads.empty()) return false;
    found_inf_.zero_();
    bool fused = true;  // one multi-tensor kernel where LibTorch has it (CUDA, fp32)
    for (const auto& g : grads)
      fused = fused && g.is_cuda() && g.device() == found_inf_.device() && g.scalar_type() == torch::kFloat32;
    if (fused) {
      at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale_t_);
    } else {
      // The same, a tensor at a time (LibTorch 1.13 has the fused kernel on CUDA only).
      for (const auto& g : grads) {
        found_inf_.add_(g.isfinite().logical_not().any().to(found_inf_.device()));
        g.mul_(inv_scale_t_.to(g.device()));
      }
    }
    return found_inf_.item<float>() != 0.0f;  // CPU-GPU sync point: the step's skip decision
  }

  /// Ends an optimizer step: after one with inf/nan gradients (skipped) the scale is multiplied by
  /// backoff_factor and the count of good steps restarts; after growth_interval good steps in a row
  /// it is multiplied by growth_factor, unless that overflows fp32. No sync (writes the device tensors).
  void update(bool found_inf) {
    if (found_inf) {
      scale_ = static_cast<float>(scale_ * o_.backoff_factor);
      good_in_a_row_ = 0;
      skipped_.push_back(updates_);
    } else if (++good_in_a_row_ == o_.growth_interval) {
      const float grown = static_cast<float>(scale_ * o_.growth_factor);
      if (std::isfinite(grown)) scale_ = grown;
      good_in_a_row_ = 0;
    }
    ++updates_;
    torch::NoGradGuard no_grad;
    scale_t_.fill_(scale_);
    inv_scale_t_.fill_(1.0 / scale_);
  }

  /// Steps ended by update() so far, and the 0-based indices of the skipped ones.
  std::int64_t steps() const { return updates_; }
  std::int64_t skipped_steps() const { return static_cast<std::int64_t>(skipped_.size()); }
  const std::vector<std::int64_t>& skipped_step_indices() const { return skipped_; }
  /// Good steps since the last skip or growth (GradScaler's growth tracker).
  std::int64_t good_steps_in_a_row() const { return good_in_a_row_; }

 private:
  loss_scaler_options o_;
  double scale_ = 0;  // always a value representable in fp32, as GradScaler's fp32 scale tensor
  std::int64_t good_in_a_row_ = 0, updates_ = 0;
  std::vector<std::int64_t> skipped_;
  torch::Tensor scale_t_, inv_scale_t_, found_inf_;
};

}  // namespace qwen3
