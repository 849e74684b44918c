// qwen3/token_ids.hpp: a token file's bytes to token ids, checked (no LibTorch: fuzzed on its own).
//
//   std::vector<std::uint32_t> ids = qwen3::read_token_ids("corpus.u32", vocab_size, seq_len);
//
// Token file format: a flat sequence of little-endian uint32 token ids, no header, at least one
// example of seq_len tokens. Every id must be < vocab_size; the first offending id is reported with
// its position. A missing, unreadable or empty path, a directory, or a size that is not a multiple
// of 4 is one error line naming the path (std::runtime_error).
#pragma once
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "input_file.hpp"

namespace qwen3 {

/// The ids in `bytes` (the whole content of the token file `path`, named in errors).
inline std::vector<std::uint32_t> decode_token_ids(const std::string& path, const std::vector<unsigned char>& bytes,
                                                   std::int64_t vocab_size, std::int64_t seq_len) {
  if (seq_len <= 0) throw std::invalid_argument("token_file: seq_len must be positive");
  if (bytes.empty()) throw std::runtime_error(path + ": token file is empty (0 bytes, no token ids)");
  if (bytes.size() % 4 != 0)
    throw std::runtime_error(path + ": " + std::to_string(bytes.size()) +
                             " bytes is not a whole number of uint32 token ids (truncated or not a token file?)");
  const std::uint64_t n = bytes.size() / 4;
  if (n < static_cast<std::uint64_t>(seq_len))
    throw std::runtime_error(path + ": " + std::to_string(n) + " tokens, fewer than one example of " +
                             std::to_string(seq_len));
  std::vector<std::uint32_t> ids(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const unsigned char* b = bytes.data() + 4 * i;
    const std::uint32_t v =
        std::uint32_t(b[0]) | std::uint32_t(b[1]) << 8 | std::uint32_t(b[2]) << 16 | std::uint32_t(b[3]) << 24;
    if (static_cast<std::int64_t>(v) >= vocab_size)
      throw std::runtime_error(path + ": token " + std::to_string(i) + " (byte offset " + std::to_string(4 * i) +
                               ", example " + std::to_string(i / seq_len) + " position " + std::to_string(i % seq_len) +
                               ") is " + std::to_string(v) + ", outside the vocabulary [0, " +
                               std::to_string(vocab_size) + ")");
    ids[i] = v;
  }
  return ids;
}

/// Reads and checks the token file `path`. The size comes from stat(), not from a seek, which on a
/// directory "succeeds" with 2^63 - 1 bytes.
inline std::vector<std::uint32_t> read_token_ids(const std::string& path, std::int64_t vocab_size,
                                                 std::int64_t seq_len) {
  const auto probe = probe_input_file(path);
  if (!probe.problem.empty())
    throw std::runtime_error(path + ": " + probe.problem + " (expected a token file: little-endian uint32 ids)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open token file");
  std::vector<unsigned char> bytes(probe.size);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) throw std::runtime_error(path + ": read failed");
  return decode_token_ids(path, bytes, vocab_size, seq_len);
}

}  // namespace qwen3
