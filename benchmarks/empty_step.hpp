// One training step of scopes and no work: 4 micro-batches of forward and backward, then the
// optimizer -- the shape the benchmarks time the profiler on (scope_cost, long_run).
#pragma once
#include <traceml/phase.hpp>

namespace traceml_bench {

inline void empty_step() {
  TRACEML_STEP();
  for (int m = 0; m < 4; ++m) {
    TRACEML_MICROBATCH();
    { TRACEML_PHASE(forward); }
    { TRACEML_PHASE(backward); }
  }
  { TRACEML_PHASE(optimizer); }
}

}  // namespace traceml_bench
