// What the profiler costs the training thread on short CPU steps: a loop of steps of 4 phases that
// each spin `--phase-us` (5 us: 20 us steps), timed without a profiler and with one writing every
// default output (JSON summary, per-step JSONL, Chrome trace, HTML report: what TRACEML_OUT gives,
// without a GPU source). Blocks of the two modes alternate, the order swapped every round; per mode
// the median over rounds of the block's wall time per step and of the training thread's CPU time per
// step (CLOCK_THREAD_CPUTIME_ID: work on other threads is not in it), and the paired difference
// (profiled minus plain, the same round) with its median's interval.
//
//   cpu_step_cost [--rounds 21] [--steps 20000] [--phase-us 5] [--wait-us 0] [--out DIR]
//
// --wait-us makes each step sleep that long as well (an eager GPU step's wait): the profiler's
// background threads then wake at a real step's pace; their CPU per step is printed for every run.
//
// The profiled block includes the profiler's construction and finish() outside the timed loop;
// their times are printed apart.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <traceml/traceml.hpp>

#include "median_interval.hpp"

namespace {

std::int64_t process_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}
std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void spin_ns(std::int64_t ns) {
  const std::int64_t until = wall_ns() + ns;
  while (wall_ns() < until) {
  }
}

struct block_time {
  double wall_us_per_step = 0;
  double cpu_us_per_step = 0;
  double others_us_per_step = 0;  // every other thread's CPU: the profiler's background threads
};

/// One block of `steps` steps; the same loop in both modes. `wait_ns`: each step also sleeps this
/// long in its backward phase (as an eager step waits for its GPU work).
block_time run_steps(int steps, std::int64_t phase_ns, std::int64_t wait_ns = 0) {
  const std::int64_t w0 = wall_ns(), c0 = traceml::thread_cpu_ns(), p0 = process_cpu_ns();
  for (int s = 0; s < steps; ++s) {
    TRACEML_STEP();
    {
      TRACEML_PHASE(dataloader);
      spin_ns(phase_ns);
    }
    {
      TRACEML_PHASE(forward);
      spin_ns(phase_ns);
    }
    {
      TRACEML_PHASE(backward);
      spin_ns(phase_ns);
      if (wait_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait_ns));
    }
    {
      TRACEML_PHASE(optimizer);
      spin_ns(phase_ns);
    }
  }
  const std::int64_t c1 = traceml::thread_cpu_ns(), p1 = process_cpu_ns(), w1 = wall_ns();
  return {static_cast<double>(w1 - w0) / 1e3 / steps, static_cast<double>(c1 - c0) / 1e3 / steps,
          static_cast<double>((p1 - p0) - (c1 - c0)) / 1e3 / steps};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cpu_step_cost: the profiler's cost to the training thread on short CPU steps"};
  int rounds = 21, steps = 20000;
  double phase_us = 5, wait_us = 0;
  std::string out = (std::filesystem::temp_directory_path() / "traceml_cpu_step_cost").string();
  app.add_option("--rounds", rounds, "rounds of one block per mode")->check(CLI::Range(1, 1000));
  app.add_option("--steps", steps, "steps per block")->check(CLI::Range(10, 10000000));
  app.add_option("--phase-us", phase_us, "each of the 4 phases spins this long")->check(CLI::Range(0.0, 1e6));
  app.add_option("--wait-us", wait_us, "each step also sleeps this long (a GPU wait): the step worker's pace")
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--out", out, "folder for the profiled blocks' outputs");
  CLI11_PARSE(app, argc, argv);
  std::filesystem::create_directories(out);
  const auto phase_ns = static_cast<std::int64_t>(phase_us * 1e3);
  const auto wait_ns = static_cast<std::int64_t>(wait_us * 1e3);

  std::vector<double> plain_wall, plain_cpu, prof_wall, prof_cpu, diff_wall, diff_cpu, start_ms, finish_ms, diff_others;
  traceml::set_enabled(false);
  (void)run_steps(steps / 10 + 1, phase_ns);  // warm the caches and the clock; nothing records it
  traceml::set_enabled(true);
  for (int r = 0; r < rounds; ++r) {
    block_time plain{}, prof{};
    for (int half = 0; half < 2; ++half) {
      if ((half == 0) == (r % 2 == 0)) {
        traceml::set_enabled(false);  // the loop's scopes compiled in, recording off: the plain loop
        plain = run_steps(steps, phase_ns, wait_ns);
        traceml::set_enabled(true);
      } else {
        const std::int64_t s0 = wall_ns();
        auto options = traceml::profiler_options::named("cpu_step_cost").write_all_to(out);
        options.print_table = false;
        traceml::profiler p(options);
        const std::int64_t s1 = wall_ns();
        prof = run_steps(steps, phase_ns, wait_ns);
        const std::int64_t f0 = wall_ns();
        p.finish();
        const std::int64_t f1 = wall_ns();
        start_ms.push_back(static_cast<double>(s1 - s0) / 1e6);
        finish_ms.push_back(static_cast<double>(f1 - f0) / 1e6);
        if (p.result().summary.steps != static_cast<std::size_t>(steps)) {
          std::fprintf(stderr, "cpu_step_cost: the profiler recorded %zu of %d steps\n", p.result().summary.steps,
                       steps);
          return 1;
        }
      }
    }
    plain_wall.push_back(plain.wall_us_per_step);
    plain_cpu.push_back(plain.cpu_us_per_step);
    prof_wall.push_back(prof.wall_us_per_step);
    prof_cpu.push_back(prof.cpu_us_per_step);
    diff_wall.push_back(prof.wall_us_per_step - plain.wall_us_per_step);
    diff_cpu.push_back(prof.cpu_us_per_step - plain.cpu_us_per_step);
    diff_others.push_back(prof.others_us_per_step - plain.others_us_per_step);
  }
  const auto dw = traceml_bench::median_interval(diff_wall), dc = traceml_bench::median_interval(diff_cpu);
  std::printf("cpu_step_cost: %d rounds of %d steps of 4 phases x %.1f us%s\n", rounds, steps, phase_us,
              wait_us > 0 ? (", each step waiting " + std::to_string(static_cast<long>(wait_us)) + " us").c_str() : "");
  std::printf("  %-34s %12s %12s\n", "median per step", "wall us", "thread CPU us");
  std::printf("  %-34s %12.3f %12.3f\n", "plain (recording off)", median(plain_wall), median(plain_cpu));
  std::printf("  %-34s %12.3f %12.3f\n", "profiler, every default output", median(prof_wall), median(prof_cpu));
  std::printf("  added per step (paired, median)    %+12.3f %+12.3f\n", median(diff_wall), median(diff_cpu));
  std::printf("  interval (%.0f%%)                     %6.3f..%-6.3f %5.3f..%.3f\n", dw.coverage * 100, dw.lo, dw.hi,
              dc.lo, dc.hi);
  const auto dt = traceml_bench::median_interval(diff_others);
  std::printf("  the profiler's threads' CPU per step (paired, median) %.3f us (%.3f..%.3f)\n", median(diff_others),
              dt.lo, dt.hi);
  std::printf("  profiler start-up %.2f ms, finish() %.2f ms (medians; %d steps per run)\n", median(start_ms),
              median(finish_ms), steps);
  return 0;
}
