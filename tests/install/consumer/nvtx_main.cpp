// traceml::nvtx: the NVTX3 headers are visible, so every scope also emits an NVTX range. No
// profiling tool is attached here, so each range is a no-op call; the build proves the wiring.
#include <cstdio>

#include <traceml/traceml.hpp>

static_assert(TRACEML_HAS_NVTX, "traceml::nvtx did not make the NVTX3 headers visible");

int main() {
  traceml::profiler_options opts;
  opts.run_name = "nvtx-consumer";
  opts.warmup_steps = 0;
  opts.print_table = false;
  traceml::profiler prof(opts);
  for (int s = 0; s < 2; ++s) {
    TRACEML_STEP();
    { TRACEML_PHASE(forward); }
  }
  const traceml::run_result& r = prof.finish();
  if (r.steps.size() != 2) {
    std::fprintf(stderr, "nvtx consumer: unexpected result (%zu steps)\n", r.steps.size());
    return 1;
  }
  std::printf("nvtx consumer: NVTX ranges compiled in, %zu steps\n", r.steps.size());
  return 0;
}
