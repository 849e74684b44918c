// A trainer that prints lines of its own while the live view runs: tests/core/live_view_tmux.sh runs
// it in a real terminal and checks that every line it printed is still there at the end, and that
// the view redraws in place while the trainer is quiet. Its steps: 30 printing a line every third
// step, "trainer quiet", 60 quiet ones, 20 printing every second step; then the profiler's table
// and "trainer done". 50 ms per step (forward and backward of 25 ms).
#include <chrono>
#include <cstdio>
#include <thread>

#include <traceml/traceml.hpp>

namespace {
int lines_printed = 0;

void steps(int n, int print_every) {
  for (int i = 0; i < n; ++i) {
    {
      TRACEML_STEP();
      {
        TRACEML_PHASE(forward);
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
      }
      {
        TRACEML_PHASE(backward);
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
      }
    }
    if (print_every > 0 && i % print_every == 0) {
      std::printf("trainer line %d\n", lines_printed++);
      std::fflush(stdout);
    }
  }
}
}  // namespace

int main() {
  traceml::profiler_options o = traceml::profiler_options::named("tmux");
  o.live = true;
  o.expected_steps = 110;
  o.warmup_steps = 0;
  traceml::profiler prof(o);
  steps(30, 3);
  std::printf("trainer quiet\n");
  std::fflush(stdout);
  steps(60, 0);
  steps(20, 2);
  prof.finish();
  std::printf("trainer done (%d lines)\n", lines_printed);
  return 0;
}
