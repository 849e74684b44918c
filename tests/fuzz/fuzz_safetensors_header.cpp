// Fuzz target: safetensors headers (examples/qwen3/safetensors_header.hpp).
// Input: a whole .safetensors file. What the reader accepts must be safe to read: every tensor's
// bytes inside the data section, as many as its shape and dtype need, no two tensors overlapping.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "safetensors_header.hpp"

namespace st = qwen3::safetensors;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  try {
    // As the reader's constructor does: the length, then the JSON it frames, then the data section.
    const auto n = st::header_length("model.safetensors", size, file.substr(0, 8));
    const auto data_size = size - 8 - n;
    const auto h = st::parse_header("model.safetensors", std::string(file.substr(8, n)), data_size);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    for (const auto& [name, e] : h.entries) {
      std::uint64_t bytes = st::dtype_size(e.dtype, name);
      for (auto d : e.shape) bytes *= static_cast<std::uint64_t>(d);  // at most 2^48 x 8: no wrap
      if (e.begin > e.end || e.end > data_size || e.end - e.begin != bytes) std::abort();
      if (bytes > 0) spans.emplace_back(e.begin, e.end);
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i)
      if (spans[i].first < spans[i - 1].second) std::abort();
  } catch (const st::format_error& e) {
    fuzz::expect_names(e, "model.safetensors");
  }
  return 0;
}
