// qwen3_step_timing: a bare step-time measurement of the LoRA trainer, without the profiler, for a
// quick look at a preset and a few schedules (the full experiment is qwen3_accumulation).
//
//   qwen3_step_timing [--preset qwen3-1.7b] [--schedules 4x1,1x4] [--steps 10] [--warmup 3]
//                     [--seq-len 512] [--dtype bfloat16|float32] [--checkpointing] [--device cuda]
//                     [--expand-kv] [--fp32-adapters] [--loss-chunk N]   (--help says what each one does)
//
// Each schedule gets a fresh model (same seed), `warmup` untimed steps, then `steps` timed ones;
// every timed step ends with a loss read, a CPU-GPU sync point, so its wall time includes all of its
// GPU work. Prints the median step time per schedule.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <torch/cuda.h>

#include "qwen3.hpp"

namespace {
struct step_clock : traceml::callback {
  std::vector<double> ms;
  std::chrono::steady_clock::time_point start;
  void on_step_begin() override { start = std::chrono::steady_clock::now(); }
  void on_step_end() override {
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
};

/// --schedules: a list parse_schedules() accepts; its own words say what is wrong otherwise.
const CLI::Validator schedule_list(
    [](std::string& list) {
      try {
        qwen3::parse_schedules(list);
        return std::string();
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
    },
    "MxA,...", "schedule list");

/// --device: what torch::Device accepts (cpu, cuda, cuda:N).
const CLI::Validator torch_device(
    [](std::string& name) {
      try {
        (void)torch::Device(name);
        return std::string();
      } catch (const std::exception&) {
        return "'" + name + "' is not a device (expected cpu, cuda or cuda:N)";
      }
    },
    "cpu|cuda|cuda:N", "device");
}  // namespace

int main(int argc, char** argv) {
  std::string preset = "qwen3-1.7b", schedules = "4x1,1x4", device_name = torch::cuda::is_available() ? "cuda" : "cpu";
  std::int64_t steps = 10, warmup = 3, seq = 512, loss_chunk = 0;
  std::string dtype_name = "bfloat16";
  bool checkpointing = false, expand_kv = false, fp32_adapters = false;
  CLI::App app{
      "Bare median step time of the Qwen3 LoRA trainer per schedule, without the profiler "
      "(the profiled experiment is qwen3_accumulation)."};
  app.add_option("--preset", preset, "model preset")
      ->check(CLI::IsMember(qwen3::preset_names()))
      ->capture_default_str();
  app.add_option("--schedules", schedules, "comma-separated MxA schedules (micro-batch x accumulation)")
      ->check(schedule_list)
      ->capture_default_str();
  app.add_option("--steps", steps, "timed optimizer steps per schedule")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps before them")->check(CLI::Range(0, 1000000))->capture_default_str();
  app.add_option("--seq-len", seq, "tokens per example")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--dtype", dtype_name, "bfloat16 | float32")
      ->check(CLI::IsMember({"bfloat16", "float32"}))
      ->capture_default_str();
  app.add_flag("--checkpointing", checkpointing, "recompute each decoder layer in backward");
  app.add_option("--device", device_name, "cpu | cuda | cuda:N (default: cuda when available)")->check(torch_device);
  app.add_flag("--expand-kv", expand_kv, "copy key/value heads for attention instead of sharing them (enable_gqa)");
  app.add_flag("--fp32-adapters", fp32_adapters, "LoRA adapters in float32 (peft's default adapter dtype)");
  app.add_option("--loss-chunk", loss_chunk, "loss computed this many target tokens at a time (0: full logits)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const torch::Dtype dtype = dtype_name == "float32" ? torch::kFloat32 : torch::kBFloat16;
  try {
    const auto cfg = qwen3::preset(preset);
    const torch::Device device(device_name);
    qwen3::synthetic_tokens data(cfg.vocab_size, seq, 1234);
    std::printf("%s, seq %lld, %s, checkpointing %s, %s%s%s, loss chunk %lld\n", preset.c_str(),
                static_cast<long long>(seq), dtype == torch::kBFloat16 ? "bf16" : "fp32", checkpointing ? "on" : "off",
                device_name.c_str(), expand_kv ? ", key/value heads expanded" : "",
                fp32_adapters ? ", fp32 adapters" : "", static_cast<long long>(loss_chunk));
    for (const auto& s : qwen3::parse_schedules(schedules)) {
      torch::manual_seed(1234);
      auto model = qwen3::make_model(cfg, qwen3::model_options()
                                              .dtype(dtype)
                                              .device(device)
                                              .gradient_checkpointing(checkpointing)
                                              .shared_kv_heads(!expand_kv)
                                              .loss_chunk(loss_chunk));
      qwen3::lora_options lo;
      if (fp32_adapters) lo.dtype = torch::kFloat32;
      qwen3::adamw opt(qwen3::apply_lora(*model, lo));
      traceml::callback_list none;
      qwen3::train_options t;
      t.sched = s;
      t.steps = warmup;
      t.sync_each_step = true;
      qwen3::train(*model, opt, data, t, none);
      step_clock clock;
      traceml::callback_list callbacks;
      callbacks.add(clock);
      t.steps = steps;
      t.first_step = warmup;
      const auto losses = qwen3::train(*model, opt, data, t, callbacks);
      auto sorted = clock.ms;
      std::sort(sorted.begin(), sorted.end());
      const double median = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
      std::printf("%-6s median %8.1f ms/step  min %8.1f  max %8.1f  last loss %.4f\n", s.name().c_str(), median,
                  sorted.empty() ? 0.0 : sorted.front(), sorted.empty() ? 0.0 : sorted.back(),
                  losses.empty() ? 0.0 : losses.back());
    }
  } catch (const std::exception& e) {
    std::cerr << "qwen3_step_timing: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
