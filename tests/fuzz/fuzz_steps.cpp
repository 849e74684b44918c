// Fuzz target: the per-step JSONL reader of `traceml ranks` (tools/steps_reader.hpp), and what the
// command then does with the steps it accepts (ranks.hpp's merge and table). Input: one rank's file.
// The steps read are merged as rank 0 beside a rank 1 that took twice as long outside communication,
// in a world of 3 (rank 2 missing); every figure must be possible.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <traceml/analysis/ranks.hpp>

#include "fuzz_check.hpp"
#include "steps_reader.hpp"

namespace {
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz: broken contract: %s\n", what);
    std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  traceml::tools::read_steps got;
  try {
    got = traceml::tools::parse_rank_steps(text, 0);
  } catch (const traceml::tools::steps_error& e) {
    fuzz::expect_names(e, "line ");  // the command prefixes the file's name; the line is named here
    return 0;
  }
  traceml::rank_steps slower{1, {}};
  for (const auto& st : got.steps.steps) {
    require(std::isfinite(st.wall_ms) && st.wall_ms >= 0, "wall_ms finite and >= 0");
    require(std::isfinite(st.communication_ms) && st.communication_ms >= 0, "communication_ms finite and >= 0");
    slower.steps.push_back({st.step, st.wall_ms * 2, st.communication_ms});
  }
  // The reader refuses a repeated step number, merge_ranks' one refusal of a file's steps: steps it
  // accepts merge (an std::invalid_argument escaping here is a finding).
  const auto m = traceml::merge_ranks({got.steps, slower}, 3, /*warmup=*/1);
  (void)traceml::format_rank_table(m);
  std::size_t slowest = 0;
  for (const auto& r : m.ranks) {
    slowest += r.slowest_on;
    if (!r.present || m.steps.empty()) continue;
    require(r.wait_ms.min >= 0 && std::isfinite(r.wait_ms.max), "waits finite and >= 0");
    require(r.compute_ms.max <= r.step_ms.max, "compute within the step");
  }
  require(slowest == m.steps.size(), "one slowest rank per compared step");
  require(m.missing.size() == (got.steps.steps.empty() ? 3u : 1u), "the missing ranks");
  require(!(m.step_skew_ms.min < 0) && !(m.compute_skew_ms.min < 0), "skews >= 0");
  return 0;
}
