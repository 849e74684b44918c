// Shared helpers for the qwen3 trainer tests.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

#include <torch/torch.h>

#include <qwen3/qwen3.hpp>

namespace qwen3_test {

/// A fresh, empty folder under the system temp dir, removed when the object goes away.
class temp_dir {
 public:
  explicit temp_dir(const std::string& tag) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("traceml-qwen3-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// The tiny preset in fp32 on the CPU, seeded.
inline qwen3::Qwen3 tiny_model(std::uint64_t seed = 7, qwen3::model_options o = {}) {
  torch::manual_seed(seed);
  return qwen3::Qwen3(qwen3::preset("tiny"), o);
}

/// Gives every LoRA B matrix random values, so that both A and B get non-zero gradients (a fresh
/// adapter has B = 0, hence dL/dA = 0).
inline void randomize_lora_b(qwen3::Qwen3Impl& m, double std = 0.05) {
  torch::NoGradGuard no_grad;
  for (auto& kv : m.named_parameters())
    if (kv.key().find("lora_B_") != std::string::npos) kv.value().normal_(0.0, std);
}

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

inline double max_abs(const torch::Tensor& a) { return a.to(torch::kFloat64).abs().max().item<double>(); }

/// Random ids [batch, seq] in the vocabulary.
inline torch::Tensor random_ids(std::int64_t vocab, std::int64_t batch, std::int64_t seq, std::uint64_t seed = 3) {
  torch::manual_seed(seed);
  return torch::randint(vocab, {batch, seq}, torch::kInt64);
}

}  // namespace qwen3_test
