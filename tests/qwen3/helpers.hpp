// Shared helpers for the qwen3 trainer tests.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <torch/torch.h>

#include <qwen3/qwen3.hpp>

namespace qwen3_test {

/// A fresh, empty folder under the system temp dir, removed when the object goes away.
class temp_dir {
 public:
  // POSIX calls rather than std::filesystem: a test binary linked against the LibTorch 2.x wheel and
  // built with GCC 13 crashed inside std::filesystem (seen on the GPU machine), and the tests need
  // no more than this.
  explicit temp_dir(const std::string& tag) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/traceml-qwen3-" + tag + "-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("temp_dir: cannot create " + pattern);
    path_ = pattern;
  }
  ~temp_dir() { remove_tree(path_); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::string str() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  static void remove_tree(const std::string& path) {
    if (DIR* d = ::opendir(path.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        const std::string child = path + "/" + name;
        struct stat st {};
        if (::lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
          remove_tree(child);
        else
          ::unlink(child.c_str());
      }
      ::closedir(d);
    }
    ::rmdir(path.c_str());
  }
  std::string path_;
};

/// Whether `path` names an existing file or folder.
inline bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

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

/// 30 steps of 2x2 with LoRA r=8 (lr 1e-2, 2 warm-up steps) on a repeating token pattern: the
/// losses of a model that can learn it (the "training lowers the loss" tests of either family).
inline std::vector<double> train_on_pattern(qwen3::CausalLMImpl& m) {
  qwen3::lora_options lo;
  lo.r = 8;
  qwen3::adamw_options ao;
  ao.lr = 1e-2;
  ao.warmup_steps = 2;
  qwen3::adamw opt(qwen3::apply_lora(m, lo), ao);
  qwen3::pattern_tokens data(m.cfg().vocab_size, 32, 16);
  qwen3::train_options t;
  t.sched = qwen3::parse_schedule("2x2");
  t.steps = 30;
  traceml::callback_list none;
  return qwen3::train(m, opt, data, t, none);
}

}  // namespace qwen3_test
