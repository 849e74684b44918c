// A trainer with profiler_options::finish_on_signal, run by test_stop_signal.cpp. It writes every
// output into OUT_DIR and runs 12 steps (two micro-batches of forward and backward, then the
// optimizer; each phase spins ~200 us); in step 3 it sends itself a signal, as MODE says:
//   int, term    SIGINT / SIGTERM once, in the forward phase of step 3
//   twice        SIGINT twice in step 3 (the second one must end the process at once)
//   after        SIGINT after the last step, before finish()
//   ignored      SIGINT ignored by the program (SIG_IGN before the profiler), sent in step 3
//   off          finish_on_signal left off, SIGINT in step 3 (the default action)
// on_signal_finish writes OUT_DIR/hook.txt: "steps=N signal=S".
//   usage: signal_trainer OUT_DIR MODE
#include <traceml/traceml.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>

namespace {
void spin(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: signal_trainer OUT_DIR int|term|twice|after|ignored|off\n");
    return 2;
  }
  const std::string out = argv[1], mode = argv[2];
  if (mode == "ignored") std::signal(SIGINT, SIG_IGN);

  traceml::profiler_options opts = traceml::profiler_options::named("signal_trainer").write_all_to(out);
  opts.warmup_steps = 1;
  opts.print_table = false;
  opts.finish_on_signal = mode != "off";
  opts.on_signal_finish = [out](const traceml::run_result& run, int sig) {
    if (std::FILE* f = std::fopen((out + "/hook.txt").c_str(), "w")) {
      std::fprintf(f, "steps=%zu signal=%d\n", run.summary.steps, sig);
      std::fclose(f);
    }
  };
  traceml::profiler prof(opts);

  const int sig = mode == "term" ? SIGTERM : SIGINT;
  for (int step = 0; step < 12; ++step) {
    TRACEML_STEP();
    for (int m = 0; m < 2; ++m) {
      TRACEML_MICROBATCH();
      {
        TRACEML_PHASE(forward);
        spin(std::chrono::microseconds(200));
        if (step == 3 && m == 0 && mode != "after") {
          // The step worker writes a finished step's line within 250 ms of its end: a kill 750 ms
          // into the next step finds the earlier steps on disk (a margin for loaded machines).
          spin(std::chrono::milliseconds(750));
          std::raise(sig);
          if (mode == "twice") std::raise(sig);
        }
      }
      {
        TRACEML_PHASE(backward);
        spin(std::chrono::microseconds(200));
      }
    }
    TRACEML_PHASE(optimizer);
    spin(std::chrono::microseconds(200));
  }
  if (mode == "after") std::raise(sig);
  prof.finish();
  return 0;
}
