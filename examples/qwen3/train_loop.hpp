// qwen3/train_loop.hpp: the training loop of the gradient-accumulation experiment.
//
//   traceml::callback_list callbacks;                 // the profiler and any user callbacks
//   qwen3::train_options t;
//   t.sched = qwen3::parse_schedule("4x1"); t.steps = 100;
//   auto losses = qwen3::train(*model, opt, data, t, callbacks);   // one loss per optimizer step
//
// One flat loop. Per optimizer step: for each of A micro-batches, fetch M examples (dataloader phase:
// host batch + host-to-device copy), forward (the loss divided by A), backward; then the optimizer
// phase (AdamW update, gradients dropped). Dividing each micro-batch's mean loss by A makes the
// accumulated gradient the gradient of the mean loss over all M*A examples, the same as one large
// batch: every micro-batch has the same number of target tokens (fixed-length examples).
//
// Synchronisation: the loop itself never waits for the GPU. Per-step losses stay on the device and
// are read once after the last step (one sync), unless train_options::sync_each_step asks for a sync
// at every step end (then the step's wall time includes all of its GPU work). With a loss scaler
// (fp16) the optimizer phase has one sync point of its own: the inf/nan check that decides whether
// the step is skipped (loss_scaler.hpp).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>
#include <traceml/callback.hpp>
#include <traceml/phase_kind.hpp>

#include "cuda_graph.hpp"
#include "data.hpp"
#include "loss_scaler.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "schedule.hpp"

namespace qwen3 {

struct train_options {
  schedule sched;               ///< MxA
  std::int64_t steps = 100;     ///< optimizer updates
  std::int64_t first_step = 0;  ///< data position: step s reads the examples of global step first_step + s
  bool sync_each_step = false;  ///< read the loss (a CPU-GPU sync) at the end of every step
  /// Forward and backward replayed from CUDA graphs (captured beforehand, cuda_graph.hpp); null =
  /// eager. Gradients are then zeroed in place rather than dropped.
  graphed_microbatch* graphs = nullptr;
  /// Dynamic loss scaling (fp16): each micro-batch's loss is multiplied by the scale before backward
  /// (a graphed backward reads it from the scaler's tensor, given at construction), the optimizer
  /// unscales and skips a step with inf/nan gradients, and the scale is updated. Null = none.
  loss_scaler* scaler = nullptr;
  /// Data parallelism (data_parallel.hpp): called once per step after the last micro-batch, inside a
  /// communication phase, to average the gradients over the ranks. Empty: one process.
  std::function<void()> sync_gradients;
  /// Which examples this rank reads: step s reads those of global step (first_step + s) x
  /// data_stride + data_offset (ranks: stride = world size, offset = rank, so no two read the same).
  std::int64_t data_stride = 1, data_offset = 0;
};

/// The micro-batches of one optimizer step: A times (dataloader, forward with the loss divided by A,
/// backward), gradients accumulating in the parameters' .grad. Returns the step's loss (the mean over
/// its M*A examples) as a device scalar; no CPU-GPU sync.
inline torch::Tensor accumulate_step(CausalLMImpl& model, const token_source& data, const schedule& s,
                                     std::int64_t global_step, traceml::callback_list& callbacks,
                                     graphed_microbatch* graphs = nullptr, const loss_scaler* scaler = nullptr) {
  using traceml::phase_kind;
  const auto device = model.embed_tokens.device();
  const double inv_accum = 1.0 / static_cast<double>(s.accumulation);
  torch::Tensor step_loss;
  for (std::int64_t micro = 0; micro < s.accumulation; ++micro) {
    callbacks.on_microbatch_begin();

    callbacks.on_phase_begin(phase_kind::dataloader);
    auto ids = microbatch(data, s, global_step, micro);
    // Pinned host memory lets the copy run asynchronously on the stream (no sync here).
    if (graphs)
      graphs->load(ids.pin_memory());  // into the graph's input buffer, asynchronously
    else if (device.is_cuda())
      ids = ids.pin_memory().to(device, /*non_blocking=*/true);
    callbacks.on_phase_end(phase_kind::dataloader);

    callbacks.on_phase_begin(phase_kind::forward);
    torch::Tensor loss;
    if (graphs) {
      loss = graphs->forward();  // scaled by 1/A inside the graph
    } else {
      loss = model.loss(ids);
      if (s.accumulation > 1) loss = loss * inv_accum;
    }
    callbacks.on_phase_end(phase_kind::forward);

    callbacks.on_phase_begin(phase_kind::backward);
    if (graphs)
      graphs->backward();
    else if (scaler)
      (loss * scaler->scale()).backward();
    else
      loss.backward();
    callbacks.on_phase_end(phase_kind::backward);

    {
      torch::NoGradGuard no_grad;
      // A graph's loss tensor is overwritten by the next replay: the first term is copied.
      step_loss = step_loss.defined() ? step_loss + loss.detach() : (graphs ? loss.detach().clone() : loss.detach());
    }
    callbacks.on_microbatch_end();
  }
  return step_loss;
}

/// Runs `t.steps` optimizer steps of schedule `t.sched` and returns each step's loss (the mean over
/// its M*A examples). Calls on_train_begin/end, on_step_begin/end, on_microbatch_begin/end and
/// on_phase_begin/end for dataloader, forward, backward and optimizer. With t.scaler, a step whose
/// gradients hold an inf or a nan makes no update; its loss is still returned (scaler counts them).
inline std::vector<double> train(CausalLMImpl& model, adamw& opt, const token_source& data, const train_options& t,
                                 traceml::callback_list& callbacks) {
  using traceml::phase_kind;
  model.train();
  const bool keep_grads = t.graphs != nullptr;  // captured graphs add into these very tensors
  opt.zero_grad(!keep_grads);

  std::vector<torch::Tensor> step_losses;  // on the device, read at the end
  std::vector<double> losses;
  step_losses.reserve(static_cast<std::size_t>(t.steps));

  callbacks.on_train_begin();
  for (std::int64_t step = 0; step < t.steps; ++step) {
    callbacks.on_step_begin();
    auto step_loss = accumulate_step(model, data, t.sched, (t.first_step + step) * t.data_stride + t.data_offset,
                                     callbacks, t.graphs, t.scaler);
    if (t.sync_gradients) {
      callbacks.on_phase_begin(phase_kind::communication);
      t.sync_gradients();
      callbacks.on_phase_end(phase_kind::communication);
    }

    callbacks.on_phase_begin(phase_kind::optimizer);
    const bool updated = opt.step(t.scaler);  // with a scaler: unscale and inf/nan check, a sync point
    if (t.scaler) t.scaler->update(/*found_inf=*/!updated);
    opt.zero_grad(!keep_grads);
    callbacks.on_phase_end(phase_kind::optimizer);

    if (t.sync_each_step)
      losses.push_back(step_loss.item<double>());  // CPU-GPU sync point
    else
      step_losses.push_back(step_loss);
    callbacks.on_step_end();
  }
  callbacks.on_train_end();

  if (!t.sync_each_step && !step_losses.empty()) {
    // One CPU-GPU sync point for the whole run.
    auto all = torch::stack(step_losses).to(torch::kCPU, torch::kFloat64);
    losses.assign(all.data_ptr<double>(), all.data_ptr<double>() + all.numel());
  }
  return losses;
}

}  // namespace qwen3
