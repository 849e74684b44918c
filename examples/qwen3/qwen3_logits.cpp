// qwen3_logits: runs a Hugging Face Qwen3 snapshot folder on a fixed token sequence and writes the
// logits, for comparing this implementation with another one (tests/qwen3/hf_parity.py).
//
//   qwen3_logits SNAPSHOT_DIR OUT.safetensors [--ids 1,2,3,...] [--dtype float32|bfloat16]
//                [--device cpu|cuda] [--plain]
//
// OUT holds "ids" (int64 [1, seq]) and "logits" (float32 [1, seq, vocab]). --plain disables the
// fused operators (scaled-dot-product attention, rms_norm) to compare both paths.
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "model.hpp"
#include "safetensors.hpp"
#include "weights.hpp"

namespace {
int usage() {
  std::cerr << "usage: qwen3_logits SNAPSHOT_DIR OUT.safetensors [--ids 1,2,3] [--dtype float32|bfloat16]"
               " [--device cpu|cuda] [--plain]\n";
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string folder = argv[1], out = argv[2];
  std::vector<std::int64_t> ids;
  torch::Dtype dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  bool plain = false;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ids" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      std::string tok;
      while (std::getline(ss, tok, ',')) ids.push_back(std::stoll(tok));
    } else if (a == "--dtype" && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d == "float32") dtype = torch::kFloat32;
      else if (d == "bfloat16") dtype = torch::kBFloat16;
      else return usage();
    } else if (a == "--device" && i + 1 < argc) {
      device = torch::Device(argv[++i]);
    } else if (a == "--plain") {
      plain = true;
    } else {
      return usage();
    }
  }
  try {
    auto cfg = qwen3::load_config(folder);
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
