// Compiled by the bare_compile test with nothing but `-std=c++17 -I<include>`: the header a trainer
// includes must need only the C++17 standard library (no CMake target, no NVTX, no CUDA).
#include <traceml/phase.hpp>

struct tokenize {
  static constexpr const char* name = "tokenize";
};

int bare_training_step(int accumulation) {
  int work = 0;
  TRACEML_STEP();
  for (int m = 0; m < accumulation; ++m) {
    TRACEML_MICROBATCH();
    {
      TRACEML_PHASE(forward);
      ++work;
    }
    {
      TRACEML_PHASE_TAG(tokenize);
      ++work;
    }
    {
      TRACEML_PHASE_NAMED("sampler");
      ++work;
    }
  }
  traceml::set_enabled(traceml::enabled());
  return work;
}
