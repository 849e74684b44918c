// Fuzz target: a Hugging Face config.json (examples/qwen3/config.hpp), parsed as load_config() parses
// a file's text. Input: the file's bytes. An accepted config must be valid: validate() passes, so its
// sizes are positive, bounded, and their products fit in 64 bits.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "config.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto c = qwen3::parse_config(text, "config.json");
    c.validate();
    if (c.q_dim() <= 0 || c.kv_dim() <= 0 || c.parameter_count() <= 0) std::abort();
  } catch (const std::invalid_argument& e) {
    fuzz::expect_names(e, "config.json");
  }
  return 0;
}
