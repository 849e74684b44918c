// qwen3/data.hpp: the training examples, served so that every schedule sees the same examples in the
// same order.
//
//   qwen3::synthetic_tokens data(cfg.vocab_size, /*seq_len=*/512, /*seed=*/1234);
//   qwen3::token_file data("corpus.u32", cfg.vocab_size, 512);     // tokenised text, see below
//   auto ids = qwen3::microbatch(data, schedule, step, micro);     // [M, seq_len] int64, CPU
//
// Example numbering: step s of a schedule MxA consumes examples [s*M*A, (s+1)*M*A), micro-batch k
// of it examples [s*M*A + k*M, s*M*A + (k+1)*M). The effective batch M*A is the same for all compared
// schedules, so example i reaches the optimizer in the same step whichever schedule runs.
//
// Token file format: token_ids.hpp (little-endian uint32 ids, no header). It is cut into consecutive
// examples of exactly seq_len tokens (a trailing remainder shorter than seq_len is not used); example
// i is chunk i modulo the number of chunks.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "schedule.hpp"
#include "token_ids.hpp"

namespace qwen3 {

/// Anything that can produce example i as seq_len token ids.
class token_source {
 public:
  virtual ~token_source() = default;
  virtual std::int64_t seq_len() const = 0;
  virtual std::int64_t vocab_size() const = 0;
  /// Writes example `index` (any non-negative index) into out[0 .. seq_len).
  virtual void example(std::int64_t index, std::int64_t* out) const = 0;

  /// Examples [first, first + count) as a [count, seq_len] int64 CPU tensor.
  torch::Tensor examples(std::int64_t first, std::int64_t count) const {
    auto t = torch::empty({count, seq_len()}, torch::kInt64);
    auto* p = t.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < count; ++i) example(first + i, p + i * seq_len());
    return t;
  }
};

/// Uniform random ids in [0, vocab). Example i depends only on (seed, i): a counter-based generator
/// (splitmix64), so examples can be produced in any order and on any schedule identically.
class synthetic_tokens : public token_source {
 public:
  synthetic_tokens(std::int64_t vocab_size, std::int64_t seq_len, std::uint64_t seed = 1234)
      : vocab_(vocab_size), seq_(seq_len), seed_(seed) {
    if (vocab_size <= 0 || seq_len <= 0)
      throw std::invalid_argument("synthetic_tokens: vocab and seq_len must be positive");
  }
  std::int64_t seq_len() const override { return seq_; }
  std::int64_t vocab_size() const override { return vocab_; }
  void example(std::int64_t index, std::int64_t* out) const override {
    std::uint64_t state = seed_ ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(index + 1));
    for (std::int64_t t = 0; t < seq_; ++t) {
      // A 64-bit draw modulo vocab: the bias is below vocab / 2^64, i.e. nothing.
      out[t] = static_cast<std::int64_t>(next(state) % static_cast<std::uint64_t>(vocab_));
    }
  }

 private:
  static std::uint64_t next(std::uint64_t& s) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::int64_t vocab_, seq_;
  std::uint64_t seed_;
};

/// A learnable toy: each example counts upward from a start that depends on its index,
/// (start + t) mod period, so every next token follows from the current one. A model that learns
/// anything drives the loss toward zero; used to check that training reduces the loss.
class pattern_tokens : public token_source {
 public:
  pattern_tokens(std::int64_t vocab_size, std::int64_t seq_len, std::int64_t period)
      : vocab_(vocab_size), seq_(seq_len), period_(period) {
    if (period <= 0 || period > vocab_size) throw std::invalid_argument("pattern_tokens: need 0 < period <= vocab");
  }
  std::int64_t seq_len() const override { return seq_; }
  std::int64_t vocab_size() const override { return vocab_; }
  void example(std::int64_t index, std::int64_t* out) const override {
    const auto start = (index * 7) % period_;
    for (std::int64_t t = 0; t < seq_; ++t) out[t] = (start + t) % period_;
  }

 private:
  std::int64_t vocab_, seq_, period_;
};

/// Token ids from a file of little-endian uint32 (token_ids.hpp). The whole file is read and validated
/// when opened.
class token_file : public token_source {
 public:
  token_file(const std::string& path, std::int64_t vocab_size, std::int64_t seq_len)
      : vocab_(vocab_size), seq_(seq_len) {
    ids_ = read_token_ids(path, vocab_size, seq_len);
    chunks_ = static_cast<std::int64_t>(ids_.size() / static_cast<std::uint64_t>(seq_len));
  }

  std::int64_t seq_len() const override { return seq_; }
  std::int64_t vocab_size() const override { return vocab_; }
  std::int64_t num_examples() const { return chunks_; }
  void example(std::int64_t index, std::int64_t* out) const override {
    const auto c = index % chunks_;
    const auto* src = ids_.data() + c * seq_;
    for (std::int64_t t = 0; t < seq_; ++t) out[t] = src[t];
  }

  /// Writes ids as a token file (for tests and for users converting their own data).
  static void write(const std::string& path, const std::vector<std::uint32_t>& ids) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(path + ": cannot create");
    for (auto v : ids) {
      const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                                  static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
      out.write(reinterpret_cast<const char*>(b), 4);
    }
  }

 private:
  std::int64_t vocab_, seq_, chunks_ = 0;
  std::vector<std::uint32_t> ids_;
};

/// Index of the first example of micro-batch `micro` of optimizer step `step` under schedule `s`.
inline std::int64_t first_example(const schedule& s, std::int64_t step, std::int64_t micro) {
  return step * s.effective_batch() + micro * s.micro_batch;
}

/// The [micro_batch, seq_len] ids of one micro-batch (CPU, int64).
inline torch::Tensor microbatch(const token_source& data, const schedule& s, std::int64_t step, std::int64_t micro) {
  return data.examples(first_example(s, step, micro), s.micro_batch);
}

}  // namespace qwen3
