// Fuzz target: the experiment's --schedules list (examples/qwen3/schedule.hpp).
// Input: the list text. Every schedule it yields must satisfy the documented limits, and
// tokens_per_step() must answer or throw for any sequence length.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "fuzz_check.hpp"
#include "schedule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto list = qwen3::parse_schedules(text);
    for (const auto& s : list) {
      if (s.micro_batch < 1 || s.accumulation < 1 || s.effective_batch() > qwen3::max_examples_per_step ||
          s.effective_batch() != list.front().effective_batch())
        std::abort();
      try {
        // The text's length as a sequence length, and the largest one: both answer or say why.
        if (qwen3::tokens_per_step(s, static_cast<std::int64_t>(size)) < 0) std::abort();
        (void)qwen3::tokens_per_step(s, INT64_MAX);
      } catch (const std::invalid_argument& e) {
        fuzz::expect_names(e, s.name());
      }
    }
  } catch (const std::invalid_argument& e) {
    fuzz::expect_names(e, "schedule");
  }
  return 0;
}
