// The smallest real use of traceml: a profiler, three steps of two micro-batches, a check.
#include <cstdio>

#include <traceml/traceml.hpp>

int main() {
  traceml::profiler_options opts;
  opts.run_name = "consumer";
  opts.warmup_steps = 0;
  opts.print_table = false;
  traceml::profiler prof(opts);
  volatile int work = 0;
  for (int s = 0; s < 3; ++s) {
    TRACEML_STEP();
    for (int m = 0; m < 2; ++m) {
      TRACEML_MICROBATCH();
      {
        TRACEML_PHASE(forward);
        work = work + 1;
      }
      {
        TRACEML_PHASE(backward);
        work = work + 1;
      }
    }
    {
      TRACEML_PHASE(optimizer);
      work = work + 1;
    }
  }
  const traceml::run_result& r = prof.finish();
  const traceml::phase_time* fwd = r.steps.empty() ? nullptr : r.steps[0].find(traceml::phase_kind::forward, "forward");
  if (r.steps.size() != 3 || !fwd || fwd->count != 2 || r.steps[0].microbatches != 2) {
    std::fprintf(stderr, "consumer: unexpected result (%zu steps)\n", r.steps.size());
    return 1;
  }
  std::printf("consumer: traceml %s recorded %zu steps\n", TRACEML_VERSION_STRING, r.steps.size());
  return 0;
}
