// qwen3/memory_estimate.hpp: do the weights and one micro-batch fit? Asked from the config alone,
// before anything is allocated, so an absurd config fails in a millisecond with the numbers instead
// of after minutes of allocation, or at the out-of-memory killer.
//
//   auto e = qwen3::estimate_memory(cfg, /*micro_batch=*/4, /*seq_len=*/512, /*dtype_bytes=*/2,
//                                   /*checkpointing=*/true);
//   qwen3::check_memory(e, /*available_bytes=*/80ull << 30, "the GPU", "qwen3-1.7b, 4 x 512 tokens");
//   qwen3::check_run_fits(cfg, schedules, seq_len, dtype, device, checkpointing);  // both, for a run
//
// The estimate, rough on purpose:
//   weights     = config::parameter_count() x dtype bytes
//   activations = M x seq x hidden x dtype bytes x (values kept per token and hidden unit):
//                 17 per layer without checkpointing; with it, 1 per layer (each layer's input)
//                 plus 17 for the one layer recomputed during backward
//   logits      = M x seq x vocab x 4 bytes (the loss's fp32 log-probabilities; with the chunked
//                 loss, chunked_loss.hpp, only a chunk of them exists at once: then an overestimate)
// 17 is the per-layer count of Korthikanti et al., "Reducing Activation Recomputation in Large
// Transformer Models" (2022): 34 bytes per token and hidden unit at 2 bytes a value, attention
// score matrices excluded (flash attention keeps none; the plain attention path of LibTorch 1.13
// adds M x heads x seq^2 values per layer, not counted). Not counted either: LoRA adapters and
// their AdamW state (about 1% of the weights at r=16), the CUDA context, allocator fragmentation.
// So the check catches configurations that are off by large factors (10^9 layers, a huge batch);
// one that passes can still run out of memory by a few percent.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <torch/torch.h>
#include <traceml/detail/diagnostics.hpp>

#include "config.hpp"
#include "schedule.hpp"

#if defined(QWEN3_WITH_GPU_SOURCES) && QWEN3_WITH_GPU_SOURCES
#include <cuda_runtime_api.h>
#endif

namespace qwen3 {

/// Values kept per token, hidden unit and layer for backward without recomputation (see above).
inline constexpr double activation_values_per_layer = 17;

/// Bytes a training run needs, by part (doubles: an estimate of an absurd config must not overflow).
struct memory_estimate {
  double weight_bytes = 0;      ///< parameters x dtype bytes
  double activation_bytes = 0;  ///< activations one micro-batch keeps for backward
  double logits_bytes = 0;      ///< one micro-batch's fp32 log-probabilities
  double microbatch_bytes() const { return activation_bytes + logits_bytes; }
  double total_bytes() const { return weight_bytes + microbatch_bytes(); }
};

/// The estimate of the file comment. Pure; throws std::invalid_argument when the config's
/// parameter count overflows (config::parameter_count) or a size is not positive.
inline memory_estimate estimate_memory(const config& c, std::int64_t micro_batch, std::int64_t seq_len,
                                       std::int64_t dtype_bytes, bool checkpointing) {
  if (micro_batch <= 0 || seq_len <= 0 || dtype_bytes <= 0)
    throw std::invalid_argument("estimate_memory: micro-batch, sequence length and dtype size must be positive");
  const double tokens = static_cast<double>(micro_batch) * static_cast<double>(seq_len);
  const double layers = static_cast<double>(c.num_layers);
  const double kept_per_token_unit =
      checkpointing ? layers + activation_values_per_layer : layers * activation_values_per_layer;
  memory_estimate e;
  e.weight_bytes = static_cast<double>(c.parameter_count()) * static_cast<double>(dtype_bytes);
  e.activation_bytes =
      tokens * static_cast<double>(c.hidden_size) * static_cast<double>(dtype_bytes) * kept_per_token_unit;
  e.logits_bytes = tokens * static_cast<double>(c.vocab_size) * 4.0;
  return e;
}

/// "~1.23 GiB": three significant digits, so a tiny model reads "~0.000429 GiB" rather than "0.0".
inline std::string gib_text(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "~%.3g GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

/// Throws std::invalid_argument when e.total_bytes() exceeds available_bytes: "<what>: model needs
/// ~X GiB for weights + ~Y GiB per micro-batch; <where> has Z GiB".
inline void check_memory(const memory_estimate& e, double available_bytes, const std::string& where,
                         const std::string& what) {
  if (e.total_bytes() <= available_bytes) return;
  // substr(1): the available memory is measured, not estimated, so it loses the "~".
  throw std::invalid_argument(what + ": model needs " + gib_text(e.weight_bytes) + " for weights + " +
                              gib_text(e.microbatch_bytes()) + " per micro-batch; " + where + " has " +
                              gib_text(available_bytes).substr(1) + " (estimate: qwen3/memory_estimate.hpp)");
}

/// Memory a run may use: free memory of the current CUDA device (needs the CUDA runtime, i.e. a
/// build with QWEN3_WITH_GPU_SOURCES), else the host's physical memory. std::nullopt when unknown.
inline std::optional<double> available_memory_bytes(bool cuda) {
  if (cuda) {
#if defined(QWEN3_WITH_GPU_SOURCES) && QWEN3_WITH_GPU_SOURCES
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) return static_cast<double>(free_bytes);
#endif
    return std::nullopt;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::nullopt;
  return static_cast<double>(pages) * static_cast<double>(page);
}

/// Everything about a run's sizes that can be checked before the model exists: the sequence fits
/// max_position_embeddings, M x A x seq_len does not overflow for any schedule, and the weights
/// plus the largest micro-batch fit in available_memory_bytes(). Throws std::invalid_argument.
inline void check_run_fits(const config& c, const std::vector<schedule>& schedules, std::int64_t seq_len,
                           torch::Dtype dtype, const torch::Device& device, bool checkpointing) {
  if (seq_len > c.max_position_embeddings)
    throw std::invalid_argument("sequence length " + std::to_string(seq_len) + " is above max_position_embeddings " +
                                std::to_string(c.max_position_embeddings) + " of " + c.label() +
                                " (rotary positions beyond it were never trained)");
  std::int64_t largest = 0;
  for (const auto& s : schedules) {
    (void)tokens_per_step(s, seq_len);  // throws on overflow, naming the schedule
    largest = std::max(largest, s.micro_batch);
  }
  if (largest == 0) return;
  const auto dtype_bytes = static_cast<std::int64_t>(c10::elementSize(dtype));
  const auto e = estimate_memory(c, largest, seq_len, dtype_bytes, checkpointing);
  const auto available = available_memory_bytes(device.is_cuda());
  if (!available) {
    traceml::report_once("qwen3-memory-check",
                         "qwen3: cannot ask the device how much memory it has; "
                         "the memory estimate is not checked");
    return;
  }
  check_memory(e, *available, device.is_cuda() ? "the GPU (free memory)" : "the host (physical memory)",
               c.label() + ", micro-batch " + std::to_string(largest) + " x " + std::to_string(seq_len) + " tokens, " +
                   c10::toString(dtype) + (checkpointing ? ", checkpointing on" : ", checkpointing off"));
}

}  // namespace qwen3
