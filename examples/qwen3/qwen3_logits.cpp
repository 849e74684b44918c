// qwen3_logits: runs a Hugging Face Qwen3 or Llama snapshot folder on a fixed token sequence and writes the
// logits, for comparing this implementation with another one (tests/qwen3/hf_parity.py).
//
//   qwen3_logits SNAPSHOT_DIR OUT.safetensors [--ids 1,2,3,...] [--dtype float32|bfloat16]
//                [--device cpu|cuda] [--plain]                (--help says what each one does)
//
// OUT holds "ids" (int64 [1, seq]) and "logits" (float32 [1, seq, vocab]). --plain disables the
// fused operators (scaled-dot-product attention, rms_norm) to compare both paths.
#include <CLI/CLI.hpp>

#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model.hpp"
#include "safetensors.hpp"
#include "weights.hpp"

namespace {
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

/// --ids: each id non-negative (CLI11's own range check words this badly for 64-bit numbers); the
/// upper bound, the vocabulary size, is known once the snapshot's config is read.
const CLI::Validator token_id(
    [](std::string& id) {
      return !id.empty() && id[0] == '-' ? "token ids are non-negative, got " + id : std::string();
    },
    "ID", "token id");
}  // namespace

int main(int argc, char** argv) {
  std::string folder, out, dtype_name = "float32", device_name = "cpu";
  std::vector<std::int64_t> ids;
  bool plain = false;
  CLI::App app{
      "Logits of a Hugging Face Qwen3 or Llama snapshot on a fixed token sequence, written as safetensors "
      "(\"ids\" int64 [1, seq], \"logits\" float32 [1, seq, vocab]) for comparing implementations."};
  app.add_option("SNAPSHOT_DIR", folder, "snapshot folder (config.json + safetensors)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("OUT", out, "output file (.safetensors)")->required();
  app.add_option("--ids", ids, "comma-separated token ids (default: 32 ids spread over the vocabulary)")
      ->delimiter(',')
      ->check(token_id);
  app.add_option("--dtype", dtype_name, "float32 | bfloat16")
      ->check(CLI::IsMember({"float32", "bfloat16"}))
      ->capture_default_str();
  app.add_option("--device", device_name, "cpu | cuda | cuda:N")->check(torch_device)->capture_default_str();
  app.add_flag("--plain", plain, "plain operators instead of the fused ones (scaled-dot-product attention, rms_norm)");
  CLI11_PARSE(app, argc, argv);
  const torch::Dtype dtype = dtype_name == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  const torch::Device device(device_name);
  try {
    auto cfg = qwen3::load_config(folder);
    for (const auto id : ids)
      if (id >= cfg.vocab_size)
        throw std::invalid_argument("--ids: token id " + std::to_string(id) + " is beyond the vocabulary (" +
                                    std::to_string(cfg.vocab_size) + " tokens)");
    if (ids.empty())  // a fixed, vocabulary-spanning sequence
      for (std::int64_t t = 0; t < 32; ++t) ids.push_back((t * 7919 + 13) % cfg.vocab_size);
    auto model = qwen3::from_pretrained(folder, qwen3::model_options().dtype(dtype).device(device).fused_ops(!plain));
    model->eval();
    torch::NoGradGuard no_grad;
    auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);
    auto logits = model->logits(input).to(torch::kCPU, torch::kFloat32);
    qwen3::safetensors::write(out, {{"ids", input.cpu()}, {"logits", logits}});
    std::cout << "wrote " << out << ": logits " << logits.sizes() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "qwen3_logits: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
