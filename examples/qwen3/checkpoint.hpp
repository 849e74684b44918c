// qwen3/checkpoint.hpp: activation (gradient) checkpointing for LibTorch C++.
//
//   y = qwen3::checkpoint([&](const torch::Tensor& h) { return layer->forward(h, rope); }, x, params);
//
// LibTorch C++ has no torch.utils.checkpoint. This is the same idea as its reentrant variant, written
// as a custom autograd Function: the forward runs `fn` without building a graph and keeps only its
// input; the backward runs `fn` again with grad enabled and back-propagates through the recomputed
// graph. Memory: one [batch, seq, hidden] input per checkpointed layer instead of all the layer's
// activations. Cost: one extra forward of the layer during backward (about +1/3 of the layer's FLOPs).
//
// `params` must list the trainable tensors that `fn` uses (the LoRA adapters of the layer). They are
// inputs of the Function so that (a) autograd routes their gradients through it, and (b) the Function
// is recorded even when `x` itself does not require grad (the first layer reads the frozen embedding:
// without this, a frozen-base model would silently get no adapter gradients at all).
//
// Requirements on fn: deterministic (no dropout: the reference uses LoRA dropout 0, so no RNG state is
// saved or restored), and anything it captures (modules, rotary tables) must outlive the backward.
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace qwen3 {

namespace detail {

/// Keeps the recompute closure alive as long as the autograd graph that needs it.
struct checkpoint_fn : torch::CustomClassHolder {
  explicit checkpoint_fn(std::function<torch::Tensor(const torch::Tensor&)> f) : fn(std::move(f)) {}
  std::function<torch::Tensor(const torch::Tensor&)> fn;
};

struct checkpoint_function : torch::autograd::Function<checkpoint_function> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               c10::intrusive_ptr<checkpoint_fn> fn, torch::TensorList params) {
    // Function::apply already runs forward with grad mode off: no graph, no saved activations.
    std::vector<torch::Tensor> to_save{x};
    to_save.insert(to_save.end(), params.begin(), params.end());
    ctx->save_for_backward(to_save);
    ctx->saved_data["fn"] = c10::IValue::make_capsule(fn);
    ctx->saved_data["x_requires_grad"] = x.requires_grad();
    return fn->fn(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto fn = c10::static_intrusive_pointer_cast<checkpoint_fn>(ctx->saved_data["fn"].toCapsule());
    const bool x_grad = ctx->saved_data["x_requires_grad"].toBool();

    torch::Tensor x = saved[0].detach();
    x.set_requires_grad(x_grad);
    torch::Tensor y;
    {
      // The engine runs backward functions with grad mode off; the recompute needs a graph.
      torch::AutoGradMode grad_on(true);
      y = fn->fn(x);
    }
    std::vector<torch::Tensor> inputs;
    if (x_grad) inputs.push_back(x);
    inputs.insert(inputs.end(), saved.begin() + 1, saved.end());
    // A reentrant backward through the recomputed layer; gradients come back to the outer engine,
    // which accumulates them into the parameters' .grad like any other edge.
    auto grads = torch::autograd::grad({y}, inputs, {grad_out[0]}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
    torch::autograd::variable_list result;
    result.reserve(saved.size() + 1);
    result.push_back(x_grad ? grads[0] : torch::Tensor());
    result.push_back(torch::Tensor());  // the closure is not a tensor
    for (std::size_t i = x_grad ? 1 : 0; i < grads.size(); ++i) result.push_back(grads[i]);
    return result;
  }
};

}  // namespace detail

/// Runs fn(x) with activation checkpointing. `params`: the trainable tensors fn reads (see above).
/// Outside grad mode, or with nothing to differentiate, it is a plain call.
inline torch::Tensor checkpoint(std::function<torch::Tensor(const torch::Tensor&)> fn, const torch::Tensor& x,
                                const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> trainable;
  for (const auto& p : params)
    if (p.requires_grad()) trainable.push_back(p);
  if (!torch::GradMode::is_enabled() || (!x.requires_grad() && trainable.empty())) return fn(x);
  auto holder = c10::make_intrusive<detail::checkpoint_fn>(std::move(fn));
  return detail::checkpoint_function::apply(x, holder, torch::TensorList(trainable));
}

}  // namespace qwen3
