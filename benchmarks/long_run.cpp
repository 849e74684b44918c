// Does the profiler grow with the run? Runs the core on loops of increasing length (4 micro-batches
// of forward and backward plus an optimizer phase per step, no work inside the scopes, every output
// on) and prints, side by side: the profiler's work per step, the peak resident memory during the
// loop, the time finish() takes, the peak after it, and the size of each output file.
//
// Each length runs in its own process (peak RSS only ever grows), so the driver re-runs itself:
//   long_run                         # 10,000 / 100,000 / 1,000,000 steps, in OUT (default /tmp)
//   long_run --steps 10000,200000 --out DIR
//   long_run --one 100000 --out DIR  # one length, one line (what the driver calls)
// Goals (issue "Long runs"): RSS growth <= 50 MB from 10k to 1M steps, finish() <= 1 s at any length,
// per-step cost flat.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <traceml/traceml.hpp>

#include "empty_step.hpp"

namespace {

double rss_mb() {  // current resident set, from /proc (Linux)
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // kB on Linux
}

double file_mb(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<double>(st.st_size) / (1 << 20) : 0.0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run_one(long steps, const std::string& out) {
  auto opts = traceml::profiler_options::named("long" + std::to_string(steps)).write_all_to(out);
  opts.print_table = false;
  traceml::profiler prof(opts);
  const double rss_before = rss_mb();
  const auto t0 = std::chrono::steady_clock::now();
  for (long s = 0; s < steps; ++s) traceml_bench::empty_step();
  const double loop_s = seconds_since(t0);
  const double rss_loop = rss_mb();
  const double peak_loop = peak_rss_mb();
  const auto t1 = std::chrono::steady_clock::now();
  prof.finish();
  const double finish_s = seconds_since(t1);
  const std::string base = out + "/long" + std::to_string(steps);
  std::printf("%10ld %12.2f %12.1f %12.1f %10.3f %12.1f %10.2f %10.2f %10.2f %10.2f\n", steps, loop_s / steps * 1e6,
              rss_loop - rss_before, peak_loop, finish_s, peak_rss_mb(), file_mb(base + "_summary.json"),
              file_mb(base + "_steps.jsonl"), file_mb(base + "_trace.json"), file_mb(base + "_report.html"));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Profiler memory and finish time against run length (core only, every output on)."};
  std::vector<long> lengths = {10000, 100000, 1000000};
  long one = 0;
  std::string out = "/tmp";
  app.add_option("--steps", lengths, "run lengths, comma-separated")->delimiter(',');
  app.add_option("--one", one, "run one length in this process");
  app.add_option("--out", out, "folder for the outputs (they are large for long runs)");
  CLI11_PARSE(app, argc, argv);
  if (one > 0) return run_one(one, out);
  std::printf("%10s %12s %12s %12s %10s %12s %10s %10s %10s %10s\n", "steps", "us/step", "loop dRSS MB", "peak loop MB",
              "finish s", "peak end MB", "json MB", "jsonl MB", "trace MB", "html MB");
  for (long n : lengths) {
    std::fflush(stdout);
    const std::string cmd = std::string("'") + argv[0] + "' --one " + std::to_string(n) + " --out '" + out + "'";
    if (std::system(cmd.c_str()) != 0) std::printf("%10ld failed\n", n);
  }
  return 0;
}
