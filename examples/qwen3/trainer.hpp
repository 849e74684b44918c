// qwen3/trainer.hpp: what one schedule trains with, built afresh for every run so that every
// schedule starts from the same state: the model (same seed, or the same snapshot), its LoRA
// adapters (same initialisation), AdamW over them and, on request, one micro-batch's forward and
// backward captured as CUDA graphs.
//
//   qwen3::trainer_setup s;
//   s.cfg = qwen3::preset("tiny");
//   auto tr = qwen3::make_trainer(s, data, qwen3::parse_schedule("4x1"));
//   t.graphs = tr.graphs.get();
//   qwen3::train(*tr.model, tr.opt, data, t, callbacks);
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <torch/torch.h>
#include <traceml/detail/diagnostics.hpp>
#include <traceml/torch_adapter.hpp>

#include "config.hpp"
#include "cuda_graph.hpp"
#include "data.hpp"
#include "families.hpp"
#include "lora.hpp"
#include "loss_scaler.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "schedule.hpp"
#include "weights.hpp"

namespace qwen3 {

/// What every schedule's trainer shares.
struct trainer_setup {
  config cfg;             ///< the shape: a preset, or the snapshot's config.json
  std::string model_dir;  ///< a Hugging Face snapshot folder; empty: random weights from `seed`
  torch::Dtype dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  bool checkpointing = true;  ///< recompute each decoder layer in backward
  bool cuda_graphs = false;   ///< capture one micro-batch's forward and backward (falls back to eager)
  std::int64_t seq_len = 128;
  std::uint64_t seed = 1234;    ///< weights, adapters
  std::int64_t loss_chunk = 0;  ///< target tokens per chunk of the loss (chunked_loss.hpp); 0: full logits
};

/// One schedule's model, optimizer and, when captured, graphs.
struct trainer {
  CausalLM model;
  adamw opt;
  std::unique_ptr<graphed_microbatch> graphs;  ///< null: eager
  std::unique_ptr<loss_scaler> scaler;         ///< fp16: dynamic loss scaling; null otherwise
};

/// A fresh trainer for schedule `sched`. Runs out of memory like any allocation (the error is
/// LibTorch's); a graph capture that fails for another reason is said once and the trainer runs
/// eager. No CPU-GPU sync at the end: the caller synchronizes before timing anything.
inline trainer make_trainer(const trainer_setup& s, const token_source& data, const schedule& sched) {
  torch::manual_seed(s.seed);
  auto mopts =
      model_options().dtype(s.dtype).device(s.device).gradient_checkpointing(s.checkpointing).loss_chunk(s.loss_chunk);
  auto model = s.model_dir.empty() ? make_model(s.cfg, mopts) : from_pretrained(s.model_dir, mopts);
  trainer t{model, adamw(apply_lora(*model, lora_options{})), nullptr, nullptr};  // fp32 masters for fp16 adapters
  if (s.dtype == torch::kHalf) t.scaler = std::make_unique<loss_scaler>(s.device);
  if (!s.cuda_graphs) return t;
  try {
    t.graphs = std::make_unique<graphed_microbatch>(*t.model, t.opt.params(), sched.micro_batch, s.seq_len,
                                                    1.0 / static_cast<double>(sched.accumulation),
                                                    t.scaler ? t.scaler->scale() : torch::Tensor());
    t.graphs->capture(microbatch(data, sched, 0, 0));
  } catch (const std::exception& e) {
    if (traceml::libtorch::is_out_of_memory(e)) throw;
    traceml::report_once("qwen3-graphs", std::string("CUDA graph capture failed, running eager: ") + e.what());
    t.graphs.reset();
    t.opt.zero_grad();
  }
  return t;
}

}  // namespace qwen3
