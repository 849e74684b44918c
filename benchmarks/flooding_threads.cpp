// Does the profiler slow the training loop when other threads flood it with records? N threads
// record phases non-stop (an empty named phase in a loop: the worst a producer can do) while the
// main thread runs steps of a fixed wall time (a busy-wait inside a forward phase). Blocks of steps
// alternate between no profiler and a profiler attached, so that drift in the machine's load falls on
// both alike; it prints, side by side, the main loop's step time in each mode (mean, median, p90, max,
// measured around the whole step scope, the profiler's step-end drain included), their ratio (overall
// and per round, which shows the noise), the CPU time the step end took on the main thread (what the
// profiler costs it apart from waiting for a core), and what the profiler dropped.
//
//   build/benchmarks/flooding_threads          # 32 threads, steps of 2 ms, 6 rounds of 25 steps per mode
//   build/benchmarks/flooding_threads --threads 32 --step-ms 2 --rounds 6 --block 25 --other-records 256
//
// Goal (issue "Bounded profiler cost under any load"): the mean step with the profiler within 5% of
// the mean step without it. With more spinning threads than cores, the main thread waits for a core
// for most of each step in both modes, so that the wall-time ratio is noisy; the step end's CPU time
// is the steadier figure. The flooding threads' records are mostly dropped by design (the step-end
// drain takes max_other_thread_records of them: profiler.hpp); the counts printed say how many.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <traceml/traceml.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

void spin_for(std::chrono::microseconds d) {  // busy, like a training thread's own work
  const auto until = clock_type::now() + d;
  while (clock_type::now() < until) {
  }
}

double thread_cpu_ms() {  // CPU time this thread ran, not the time it waited for a core
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

/// One training step as the benchmark times it: from before the step scope opens to after it closed
/// (with a profiler, its step end drains the rings and summarizes the step inside that time). Also
/// adds the CPU time the step end took on this thread (from the end of the work to after the scope
/// closed) to `end_cpu_ms`: what the profiler costs the thread, apart from waiting for a core.
double timed_step(std::chrono::microseconds work, double& end_cpu_ms) {
  const auto t0 = clock_type::now();
  double cpu0 = 0;
  {
    TRACEML_STEP();
    {
      TRACEML_PHASE(forward);
      spin_for(work);
    }
    cpu0 = thread_cpu_ms();
  }
  end_cpu_ms += thread_cpu_ms() - cpu0;
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

struct step_times {
  std::vector<double> ms;
  double end_cpu_ms = 0;             // summed over the steps
  double quantile(double q) const {  // nearest rank: enough for a side-by-side look
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
  }
  double mean() const {
    double s = 0;
    for (double x : ms) s += x;
    return ms.empty() ? 0.0 : s / static_cast<double>(ms.size());
  }
};

void print_row(const char* mode, const step_times& t) {
  std::printf("  %-12s %6zu %10.3f %10.3f %10.3f %10.3f %14.1f\n", mode, t.ms.size(), t.mean(), t.quantile(0.5),
              t.quantile(0.9), t.quantile(1.0), t.end_cpu_ms * 1e3 / static_cast<double>(t.ms.size()));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The training loop's step time with and without the profiler while threads flood it with records."};
  int threads = 32, rounds = 6, block = 25;
  double step_ms = 2.0;
  std::size_t others = traceml::profiler_options{}.max_other_thread_records;
  app.add_option("--threads", threads, "threads recording phases non-stop")->check(CLI::Range(0, 1024));
  app.add_option("--step-ms", step_ms, "wall time of the main thread's work per step")->check(CLI::Range(0.01, 1000.0));
  app.add_option("--rounds", rounds, "pairs of blocks (no profiler, profiler)")->check(CLI::Range(1, 1000));
  app.add_option("--block", block, "steps per block")->check(CLI::Range(1, 100000));
  app.add_option("--other-records", others, "profiler_options::max_other_thread_records")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const auto work = std::chrono::microseconds(static_cast<long>(step_ms * 1000.0));

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> attempted{0};  // phases the flooding threads closed
  std::vector<std::thread> flood;
  for (int t = 0; t < threads; ++t)
    flood.emplace_back([&] {
      std::uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        TRACEML_PHASE_NAMED("flood");
        ++n;
      }
      attempted.fetch_add(n);
    });

  step_times off, on;
  std::vector<double> round_ratios;  // each round's mean step with the profiler over its mean without
  std::uint64_t ring_full = 0, capped = 0;
  std::size_t recorded = 0;
  const auto t0 = clock_type::now();
  for (int r = 0; r < rounds; ++r) {
    const std::size_t first = off.ms.size();
    for (int s = 0; s < block; ++s) off.ms.push_back(timed_step(work, off.end_cpu_ms));
    traceml::profiler_options opts = traceml::profiler_options::named("flooded");
    opts.print_table = false;
    opts.warmup_steps = 0;
    opts.max_other_thread_records = others;
    auto prof = std::make_unique<traceml::profiler>(opts);
    for (int s = 0; s < block; ++s) on.ms.push_back(timed_step(work, on.end_cpu_ms));
    double sum_off = 0, sum_on = 0;
    for (std::size_t i = first; i < off.ms.size(); ++i) sum_off += off.ms[i], sum_on += on.ms[i];
    round_ratios.push_back(sum_on / sum_off);
    const traceml::run_result& res = prof->finish();
    recorded += res.summary.steps;
    ring_full += res.summary.dropped_records;
    capped += res.summary.capped_records;
  }
  const double total_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  stop.store(true);
  for (auto& t : flood) t.join();

  std::printf(
      "%d threads recording phases non-stop, steps of %.3f ms of work, %d rounds of %d steps per mode, "
      "max_other_thread_records %zu (%u hardware threads)\n",
      threads, step_ms, rounds, block, others, std::thread::hardware_concurrency());
  std::printf("  %-12s %6s %10s %10s %10s %10s %14s\n", "mode", "steps", "mean ms", "median ms", "p90 ms", "max ms",
              "step end CPU us");
  print_row("no profiler", off);
  print_row("profiler", on);
  std::sort(round_ratios.begin(), round_ratios.end());
  std::printf("  ratio (profiler / none): mean %.3f, median %.3f; per round (mean over mean) %.3f .. %.3f\n",
              on.mean() / off.mean(), on.quantile(0.5) / off.quantile(0.5), round_ratios.front(), round_ratios.back());
  const double extra_cpu_us = (on.end_cpu_ms - off.end_cpu_ms) * 1e3 / static_cast<double>(on.ms.size());
  std::printf("  the profiler's step end: +%.1f us of CPU per step, %.1f%% of the step's work\n", extra_cpu_us,
              extra_cpu_us / (step_ms * 10.0));
  std::printf(
      "  profiler: %zu of %zu steps recorded; flooding threads closed %.1f million phases in %.1f s, "
      "%.1f million dropped by full rings, %.1f million left out by the step-end drain's cap\n",
      recorded, on.ms.size(), static_cast<double>(attempted.load()) / 1e6, total_s,
      static_cast<double>(ring_full) / 1e6, static_cast<double>(capped) / 1e6);
  return 0;
}
