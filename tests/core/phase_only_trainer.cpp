// A trainer that only includes <traceml/phase.hpp>: no profiler, no sink, no GPU code. test_session.cpp
// runs it with and without TRACEML_OUT. Steps: 12, each two micro-batches of forward and backward,
// then the optimizer; every phase spins about 200 us so that the figures are not all zero.
//
// What the session must survive is asked for in the environment (tests only):
//   TRAINER_STEPS=n            steps to run (default 12)
//   TRAINER_REMOVE_OUT_AT=k    remove the TRACEML_OUT folder at the start of step k
//   TRAINER_SIGNAL_AT=k:SIG    send itself SIGINT or SIGTERM in the middle of step k
//   TRAINER_OWN_HANDLER=1      install its own SIGINT/SIGTERM handler first; on a signal it stops
//                              after the step and returns from main with status 0
//   TRAINER_EXIT_STATUS=n      return n from main (default 0)
#include <traceml/phase.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace {
void spin(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::atomic<int> own_signal{0};
extern "C" void own_handler(int sig) { own_signal.store(sig); }
}  // namespace

int main() {
  const int steps = env_int("TRAINER_STEPS", 12);
  const int remove_at = env_int("TRAINER_REMOVE_OUT_AT", -1);
  int signal_at = -1, signal_number = 0;
  if (const char* s = std::getenv("TRAINER_SIGNAL_AT"); s && std::strchr(s, ':')) {
    signal_at = std::atoi(s);
    signal_number = std::strcmp(std::strchr(s, ':') + 1, "SIGTERM") == 0 ? SIGTERM : SIGINT;
  }
  if (env_int("TRAINER_OWN_HANDLER", 0)) {
    std::signal(SIGINT, own_handler);
    std::signal(SIGTERM, own_handler);
  }
  for (int step = 0; step < steps && !own_signal.load(); ++step) {
    TRACEML_STEP();
    if (step == remove_at) std::filesystem::remove_all(std::getenv("TRACEML_OUT"));
    for (int m = 0; m < 2; ++m) {
      TRACEML_MICROBATCH();
      {
        TRACEML_PHASE(forward);
        spin(std::chrono::microseconds(200));
      }
      if (step == signal_at && m == 0) std::raise(signal_number);  // mid-step: the step goes on to its end
      {
        TRACEML_PHASE(backward);
        spin(std::chrono::microseconds(200));
      }
    }
    {
      TRACEML_PHASE(optimizer);
      spin(std::chrono::microseconds(200));
    }
  }
  return env_int("TRAINER_EXIT_STATUS", 0);
}
