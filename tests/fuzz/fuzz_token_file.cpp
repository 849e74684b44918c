// Fuzz target: token files (examples/qwen3/token_ids.hpp).
// Input: 1 byte that picks the sequence length (1..16), 2 bytes of vocabulary size (little-endian),
// then the file's bytes. Decoded ids must lie inside the vocabulary and fill at least one example.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "fuzz_check.hpp"
#include "token_ids.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const std::int64_t seq_len = 1 + data[0] % 16;
  const std::int64_t vocab = data[1] | data[2] << 8;  // 0 (nothing valid) .. 65535
  const std::vector<unsigned char> bytes(data + 3, data + size);
  try {
    const auto ids = qwen3::decode_token_ids("tokens.u32", bytes, vocab, seq_len);
    if (ids.size() * 4 != bytes.size() || ids.size() < static_cast<std::size_t>(seq_len)) std::abort();
    for (auto id : ids)
      if (id >= vocab) std::abort();
  } catch (const std::runtime_error& e) {
    fuzz::expect_names(e, "tokens.u32");
  }
  return 0;
}
