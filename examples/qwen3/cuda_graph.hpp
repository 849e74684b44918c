// qwen3/cuda_graph.hpp: one micro-batch's forward and backward as two CUDA graphs.
//
// Why: at micro-batch 1 a forward+backward is ~3,300 kernels of ~5 us each, and the host needs
// ~20 us to launch each one (measured, docs/accumulation.md): the GPU idles ~80% of the time. A graph
// replay launches the whole pass at once. Two graphs rather than one keep the forward and backward
// phases apart, so the profiler still attributes kernels to each (a replay's kernels lie between the
// phase's boundary markers on the stream).
//
//   qwen3::graphed_microbatch g(model, opt.params(), micro_batch, seq_len, 1.0 / accumulation,
//                               scaler.scale());   // fp16 only: the loss scaler's tensor (loss_scaler.hpp)
//   g.capture(first_ids);                 // warm-up and capture, before training
//   per micro-batch: g.load(ids); auto loss = g.forward(); g.backward();
//   opt.step(); opt.zero_grad(/*set_to_none=*/false);   // gradients must stay the captured tensors
//
// Requirements, all met by this trainer: fixed shapes per schedule (every example has seq_len
// tokens), no CPU-GPU sync inside forward/backward, no dropout (no RNG state in the graph),
// gradients zeroed in place. LibTorch 2.x with CUDA only (QWEN3_HAVE_CUDA_GRAPHS).
//
// Dynamic loss scaling works with graphs: the captured backward multiplies the loss by the scaler's
// 0-dim device tensor, which the scaler updates in place, so every replay reads the current scale.
// The inf/nan check stays outside the graphs, in the eager optimizer phase (one sync per step).
#pragma once
#include <torch/torch.h>
#include <torch/version.h>

#if defined(QWEN3_WITH_CUDA_GRAPHS) && TORCH_VERSION_MAJOR >= 2
#define QWEN3_HAVE_CUDA_GRAPHS 1
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#else
#define QWEN3_HAVE_CUDA_GRAPHS 0
#endif

#include <stdexcept>
#include <vector>

#include "model.hpp"

namespace qwen3 {

#if QWEN3_HAVE_CUDA_GRAPHS
class graphed_microbatch {
 public:
  /// loss_scale: a constant factor of the loss (1/A); dynamic_scale: an optional 0-dim device tensor
  /// the backward's seed is multiplied by at each replay (loss_scaler::scale()); the loss that
  /// forward() returns is not multiplied by it.
  graphed_microbatch(CausalLMImpl& model, std::vector<torch::Tensor> trainable, std::int64_t micro_batch,
                     std::int64_t seq_len, double loss_scale, torch::Tensor dynamic_scale = {})
      : model_(model),
        trainable_(std::move(trainable)),
        loss_scale_(loss_scale),
        dynamic_scale_(std::move(dynamic_scale)) {
    const auto device = model.embed_tokens.device();
    if (!device.is_cuda()) throw std::invalid_argument("graphed_microbatch: the model must be on a CUDA device");
    // A CPU scalar would be baked into the captured kernel as a constant: the scale must be read
    // from device memory at each replay.
    if (dynamic_scale_.defined() && dynamic_scale_.device() != device)
      throw std::invalid_argument("graphed_microbatch: the dynamic loss scale must be a tensor on the model's device");
    static_ids_ = torch::zeros({micro_batch, seq_len}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  }

  /// Runs two eager passes on a side stream (lazy initialisation of library handles, allocator
  /// growth, rotary tables), then captures forward and backward. `ids`: a [M, seq] batch to warm up
  /// on. Leaves every trainable gradient defined and zero. Synchronizes (once, before training).
  void capture(const torch::Tensor& ids) {
    load(ids);
    for (auto& p : trainable_)
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    auto current = c10::cuda::getCurrentCUDAStream();
    auto side = c10::cuda::getStreamFromPool();
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(side);
    {
      c10::cuda::CUDAStreamGuard guard(side);
      for (int i = 0; i < 2; ++i) backward_seed(scaled_loss()).backward();
      side.synchronize();  // CPU-GPU sync point, once per capture
      zero_grads();
      // Thread-local capture mode: the profiler's worker threads may call CUDA while we capture.
      forward_.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      static_loss_ = scaled_loss();
      forward_.capture_end();
      backward_.capture_begin(forward_.pool(), cudaStreamCaptureModeThreadLocal);
      // The captured graph is replayed, never freed.
      backward_seed(static_loss_).backward({}, /*retain_graph=*/true);
      backward_.capture_end();
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(current);
    captured_ = true;
  }

  /// Copies a [M, seq] int64 batch into the graph's input (asynchronous from pinned memory).
  void load(const torch::Tensor& ids) { static_ids_.copy_(ids, /*non_blocking=*/true); }
  /// Replays the forward: returns the graph's loss tensor (overwritten by the next replay).
  const torch::Tensor& forward() {
    forward_.replay();
    return static_loss_;
  }
  /// Replays the backward: adds this micro-batch's gradients into the trainable gradients.
  void backward() { backward_.replay(); }
  bool captured() const { return captured_; }

 private:
  torch::Tensor scaled_loss() {
    auto loss = model_.loss(static_ids_);
    return loss_scale_ == 1.0 ? loss : loss * loss_scale_;
  }
  /// The tensor backward starts from: the loss times the dynamic scale, when there is one.
  torch::Tensor backward_seed(const torch::Tensor& loss) const {
    return dynamic_scale_.defined() ? loss * dynamic_scale_ : loss;
  }
  void zero_grads() {
    for (auto& p : trainable_) p.mutable_grad().zero_();
  }
  CausalLMImpl& model_;
  std::vector<torch::Tensor> trainable_;
  double loss_scale_;
  torch::Tensor dynamic_scale_;
  torch::Tensor static_ids_, static_loss_;
  at::cuda::CUDAGraph forward_, backward_;
  bool captured_ = false;
};
#else
/// Without CUDA graphs (LibTorch 1.x or a CPU build) the type exists so callers compile; using it
/// throws.
class graphed_microbatch {
 public:
  template <class... A>
  explicit graphed_microbatch(A&&...) {
    throw std::runtime_error("CUDA graphs need LibTorch 2.x built with CUDA (this build has none)");
  }
  void capture(const torch::Tensor&) {}
  void load(const torch::Tensor&) {}
  const torch::Tensor& forward() { return loss_; }
  void backward() {}
  bool captured() const { return false; }

 private:
  torch::Tensor loss_;
};
#endif

}  // namespace qwen3
