// qwen3/optimizer.hpp: AdamW over a list of tensors with linear warm-up, in a few kernel launches.
//
//   qwen3::adamw opt(adapters, qwen3::adamw_options{});   // lr 2e-4, 5 warm-up steps, no weight decay
//   ... backward ...; opt.step(); opt.zero_grad();
//
// Why not torch::optim::AdamW: it updates parameter by parameter, about ten kernels each. LoRA on all
// seven projections of 28 layers is 28 * 7 * 2 = 392 tensors (fewer with stacked A), i.e. thousands of
// tiny launches per step, several milliseconds of pure launch overhead. Here the update is either one
// fused multi-tensor kernel (at::_fused_adamw_, LibTorch >= 2.4) or ~8 multi-tensor foreach kernels
// (older versions). The math is torch's AdamW:
//   p <- p * (1 - lr*wd);  m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2
//   p <- p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// Warm-up: the learning rate of optimizer step s (0-based) is lr * min(1, (s+1)/warmup_steps), then
// constant, so the first update already moves (transformers' schedulers give step 0 a zero rate).
// weight_decay defaults to 0, transformers' TrainingArguments default (torch's AdamW default is 0.01).
//
// fp16 parameters get fp32 master weights: AdamW updates an fp32 copy (its moments fp32 too) and
// writes it back rounded to fp16, as torch.amp trains fp32 parameters that autocast rounds to fp16
// for each GEMM. Updating in fp16 would lose every update below half an fp16 ulp of the weight, and
// fp16 gradients cannot be unscaled without flushing small values to zero. With a loss_scaler,
// step() copies the fp16 gradients into fp32 buffers, unscales them there, and skips the update
// when one holds an inf or a nan. bf16 and fp32 parameters are updated in place, as before.
// (One difference to torch.amp: the micro-batches' gradients accumulate in the fp16 .grad of the
// model's parameters, not in fp32, which keeps the model one dtype and CUDA graphs unchanged.)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include <torch/torch.h>
#include <torch/version.h>

#include "loss_scaler.hpp"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define QWEN3_HAVE_FUSED_ADAMW 1
#else
#define QWEN3_HAVE_FUSED_ADAMW 0
#endif

namespace qwen3 {

struct adamw_options {
  double lr = 2e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  std::int64_t warmup_steps = 5;
  bool fused = true;  ///< one fused kernel where LibTorch has it; false = foreach kernels
};

class adamw {
 public:
  explicit adamw(std::vector<torch::Tensor> params, adamw_options o = {}) : params_(std::move(params)), o_(o) {
    if (params_.empty()) throw std::invalid_argument("adamw: no parameters to optimise");
    torch::NoGradGuard no_grad;
    for (const auto& p : params_) {
      if (!p.is_floating_point()) throw std::invalid_argument("adamw: parameters must be floating point");
      // The tensor AdamW updates: an fp32 master copy of an fp16 parameter, else the parameter.
      const bool master = p.scalar_type() == torch::kHalf;
      masters_.push_back(master ? p.detach().to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true)
                                : torch::Tensor());
      master_grads_.push_back(master ? torch::zeros_like(masters_.back()) : torch::Tensor());
      const auto& u = master ? masters_.back() : p;
      exp_avg_.push_back(torch::zeros_like(u, torch::MemoryFormat::Preserve));
      exp_avg_sq_.push_back(torch::zeros_like(u, torch::MemoryFormat::Preserve));
      const auto& u0 = masters_[0].defined() ? masters_[0] : params_[0];
      uniform_ = uniform_ && u.device() == u0.device() && u.scalar_type() == u0.scalar_type();
#if QWEN3_HAVE_FUSED_ADAMW
      // The fused kernel reads the step count from a float tensor on the parameter's device, so the
      // bias correction never needs a host round trip.
      state_steps_.push_back(torch::zeros({}, p.options().dtype(torch::kFloat32)));
#endif
    }
  }

  /// Learning rate used by optimizer step `step` (0-based).
  double lr_at(std::int64_t step) const {
    if (o_.warmup_steps <= 0 || step >= o_.warmup_steps) return o_.lr;
    return o_.lr * static_cast<double>(step + 1) / static_cast<double>(o_.warmup_steps);
  }

  /// Number of updates made so far.
  std::int64_t steps() const { return steps_; }
  const std::vector<torch::Tensor>& params() const { return params_; }
  /// Per parameter: its fp32 master copy (fp16 parameters), else undefined.
  const std::vector<torch::Tensor>& master_weights() const { return masters_; }
  const adamw_options& options() const { return o_; }
  /// True when step() uses the single fused kernel.
  bool fused() const {
#if QWEN3_HAVE_FUSED_ADAMW
    return o_.fused && uniform_;
#else
    return false;
#endif
  }

  /// One update with the current gradients. Parameters without a gradient are left alone (their
  /// moments do not decay, as in torch). Without a scaler: no CPU-GPU synchronisation, returns true.
  /// With one (fp16): the gradients are unscaled in fp32 first, and when one of them holds an inf or
  /// a nan nothing is updated, steps() does not advance (the warm-up counts updates made), and it
  /// returns false; that check is the step's one CPU-GPU sync point. The caller then calls
  /// scaler->update(!returned).
  bool step(loss_scaler* scaler = nullptr) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> p, g, m, v, s;
    std::vector<std::size_t> from_master;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto& grad = params_[i].grad();
      if (!grad.defined()) continue;
      if (masters_[i].defined()) {
        master_grads_[i].copy_(grad);  // fp16 -> fp32, still scaled
        p.push_back(masters_[i]);
        g.push_back(master_grads_[i]);
        from_master.push_back(i);
      } else {
        p.push_back(params_[i]);
        g.push_back(grad);
      }
      m.push_back(exp_avg_[i]);
      v.push_back(exp_avg_sq_[i]);
#if QWEN3_HAVE_FUSED_ADAMW
      s.push_back(state_steps_[i]);
#endif
    }
    if (scaler && scaler->unscale_and_check(g)) return false;
    const double lr = lr_at(steps_);
    ++steps_;
    if (p.empty()) return true;
    update(p, g, m, v, s, lr);
    for (auto i : from_master) params_[i].copy_(masters_[i]);  // the model's fp16 weights, rounded once
    return true;
  }

  /// Drops the gradients (set to none: no memset kernels; the next backward allocates them). With
  /// `set_to_none` false they are zeroed in place instead (one multi-tensor kernel), which CUDA-graph
  /// replays need: a captured backward adds into the gradient tensors that existed at capture.
  void zero_grad(bool set_to_none = true) {
    if (!set_to_none) {
      std::vector<torch::Tensor> grads;
      for (auto& p : params_)
        if (p.grad().defined()) grads.push_back(p.grad());
      if (!grads.empty()) at::_foreach_zero_(grads);
      return;
    }
    for (auto& p : params_)
      if (p.grad().defined()) p.mutable_grad().reset();
  }

 private:
  /// AdamW on parallel lists (p updated in place with gradients g, moments m and v, step counts s).
  void update(std::vector<torch::Tensor>& p, std::vector<torch::Tensor>& g, std::vector<torch::Tensor>& m,
              std::vector<torch::Tensor>& v, std::vector<torch::Tensor>& s, double lr) {
#if QWEN3_HAVE_FUSED_ADAMW
    at::_foreach_add_(s, 1.0);  // per-tensor step counts, as torch keeps them
    if (fused()) {
      at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, s, lr, o_.beta1, o_.beta2, o_.weight_decay, o_.eps,
                        /*amsgrad=*/false, /*maximize=*/false);
      return;
    }
#else
    (void)s;
#endif
    // foreach path: the step count is the same for every tensor that has had gradients each step,
    // which is the case in this trainer (all adapters are used by every forward).
    const double t = static_cast<double>(steps_);
    if (o_.weight_decay != 0.0) at::_foreach_mul_(p, 1.0 - lr * o_.weight_decay);
    at::_foreach_mul_(m, o_.beta1);
    at::_foreach_add_(m, g, 1.0 - o_.beta1);
    at::_foreach_mul_(v, o_.beta2);
    at::_foreach_addcmul_(v, g, g, 1.0 - o_.beta2);
    const double bc1 = 1.0 - std::pow(o_.beta1, t);
    const double bc2 = 1.0 - std::pow(o_.beta2, t);
    auto denom = at::_foreach_sqrt(v);
    at::_foreach_div_(denom, std::sqrt(bc2));
    at::_foreach_add_(denom, o_.eps);
    at::_foreach_addcdiv_(p, m, denom, -lr / bc1);
  }

  std::vector<torch::Tensor> params_, masters_, master_grads_, exp_avg_, exp_avg_sq_, state_steps_;
  adamw_options o_;
  bool uniform_ = true;
  std::int64_t steps_ = 0;
};

}  // namespace qwen3
