// A trainer that only includes <traceml/phase.hpp>: no profiler, no sink, no GPU code. test_session.cpp
// runs it with and without TRACEML_OUT. Steps: 12, each two micro-batches of forward and backward,
// then the optimizer; every phase spins about 200 us so that the figures are not all zero.
#include <traceml/phase.hpp>

#include <chrono>

namespace {
void spin(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}
}  // namespace

int main() {
  for (int step = 0; step < 12; ++step) {
    TRACEML_STEP();
    for (int m = 0; m < 2; ++m) {
      TRACEML_MICROBATCH();
      { TRACEML_PHASE(forward); spin(std::chrono::microseconds(200)); }
      { TRACEML_PHASE(backward); spin(std::chrono::microseconds(200)); }
    }
    { TRACEML_PHASE(optimizer); spin(std::chrono::microseconds(200)); }
  }
  return 0;
}
