// qwen3/qwen3.hpp: everything of the bundled LoRA trainer (Qwen3 and Llama models) in one include.
//
//   #include <qwen3/qwen3.hpp>
//   auto cfg = qwen3::preset("qwen3-1.7b");
//   qwen3::Qwen3 model(cfg, qwen3::model_options().dtype(torch::kBFloat16).device(torch::kCUDA)
//                               .gradient_checkpointing(true));
//   qwen3::adamw opt(qwen3::apply_lora(*model, qwen3::lora_options{}));
//   qwen3::synthetic_tokens data(cfg.vocab_size, 512, /*seed=*/1234);
//   qwen3::train_options t; t.sched = qwen3::parse_schedule("4x1"); t.steps = 100;
//   traceml::callback_list callbacks;
//   auto losses = qwen3::train(*model, opt, data, t, callbacks);
#pragma once
#include "checkpoint.hpp"
#include "chunked_loss.hpp"
#include "config.hpp"
#include "cuda_graph.hpp"
#include "data.hpp"
#include "families.hpp"
#include "llama.hpp"
#include "lora.hpp"
#include "loss_scaler.hpp"
#include "memory_estimate.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "rope.hpp"
#include "safetensors.hpp"
#include "schedule.hpp"
#include "train_loop.hpp"
#include "weights.hpp"
