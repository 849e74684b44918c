// pm_sampling_probe: can CUPTI PM sampling (hardware counters at a fixed interval) serve as a GPU
// time source on this machine? No LibTorch: the GPU work is device memsets, the idle gaps are host
// sleeps with the GPU synchronized.
//   1. Start: which counters one pass allows here, or the exact CUPTI failure.
//   2. Clock: the samples' clock aligned with the GPU's by a calibration burst (measure_clock_alignment),
//      then bursts of GPU work between two clock stamps (gpu_clock.hpp, %globaltimer), separated by
//      idle gaps: with the alignment right, the samples inside a burst read ~100% busy and those inside
//      a gap ~0%. Prints the raw clocks side by side, and the alignment measured again at the end (drift).
//   3. Rate: samples decoded per second, the interval achieved, the decoder's CPU time, overflows.
//   4. Together with CUPTI kernel records: a profiler with a CUPTI source recording every step runs
//      phases while the sampler runs; both must deliver.
//   5. The engine's time per kernel: the counters count the graphics engine active, which takes in a
//      kernel's launch set-up and tear-down; a kernel record spans its execution alone. Phases of
//      tiny one-thread kernels (the clock stamp), isolated (host spins between launches) and back to
//      back (queued behind a memset), beside long memsets: (counter busy - record busy) per kernel,
//      on the same steps. The same figure on the trainer comes from benchmarks/counter_agreement.py.
//      Phases of tiny memsets (as the boundary markers are) and of small pinned host-to-device copies
//      (a dataloader's GPU work), isolated like the kernels: what the graphics engine counts of each
//      beyond its record, per operation.
//   6. What sampling and decoding cost a launch-bound thread: tiny kernels launched back to back for
//      100 ms per block, the sampler on (decoding every 20 ms on its thread) or paused, in paired
//      rounds of alternating order; the launch rate's ratio with its interval. An eager trainer's
//      steps vary too much from one to the next to show a cost of +0.3% (qwen3_overhead): this is the
//      part of that cost a launch-bound step pays, measured where the noise is small.
// The step-time overhead on the trainer is measured by qwen3_overhead's +pm modes.
//
//   pm_sampling_probe [--interval-us 100] [--bursts 6] [--burst-ms 10] [--max-samples 1024] [--tiny-kernels 500]
//                     [--launch-rounds 20]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <traceml/gpu/cupti_source.hpp>
#include <traceml/gpu/gpu_clock.hpp>
#include <traceml/gpu/pm_sampler.hpp>
#include <traceml/gpu/pm_sampling_source.hpp>
#include <traceml/phase.hpp>
#include <traceml/profiler.hpp>

#include "median_interval.hpp"

namespace {

std::int64_t clock_ns(clockid_t id) {
  timespec t{};
  clock_gettime(id, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

/// GPU work of about `ms`: memsets over `buf` (calibrated once with events).
struct burner {
  void* buf = nullptr;
  std::size_t bytes = std::size_t{1} << 30;
  int per_ms = 1;
  bool init() {
    if (cudaMalloc(&buf, bytes) != cudaSuccess) return false;
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a);
    for (int i = 0; i < 20; ++i) cudaMemsetAsync(buf, i, bytes);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    per_ms = std::max(1, static_cast<int>(20.0 / ms));
    std::printf("  calibration: 20 memsets of 1 GiB in %.3f ms (%d per ms)\n", ms, per_ms);
    return true;
  }
  void run(double ms) {
    const int n = std::max(1, static_cast<int>(ms * per_ms));
    for (int i = 0; i < n; ++i) cudaMemsetAsync(buf, i & 0xff, bytes);
  }
};

/// Part 5 (see the top): tiny kernels isolated and back to back, long memsets; per phase over the
/// recorded steps after the first, records and counters side by side and the engine time per kernel.
void engine_time_per_kernel(burner& burn, traceml::gpu_clock& clock, const traceml::pm_sampler_options& so, int tiny) {
  traceml::cupti_options co;
  co.overhead_budget = 0;
  co.sample_every = 1;
  traceml::pm_sampling_options po;
  po.sampler = so;
  auto src = std::make_unique<traceml::pm_sampling_source>(std::make_unique<traceml::cupti_source>(co), po);
  if (!src->sampling()) {
    std::printf("5. engine time per kernel: UNAVAILABLE: %s\n", src->why().c_str());
    return;
  }
  traceml::profiler_options o;
  o.run_name = "engine";
  o.print_table = false;
  o.warmup_steps = 1;
  traceml::profiler prof(o);
  prof.set_gpu_source(std::move(src));
  auto tiny_kernel = [&] { clock.release(clock.stamp(nullptr)); };  // one thread storing the clock: ~1 us
  constexpr std::size_t copy_bytes = 8192;                          // a micro-batch of 4 x 512 token ids
  void* host_copy = nullptr;
  void* dev_copy = nullptr;
  if (cudaMallocHost(&host_copy, copy_bytes) != cudaSuccess || cudaMalloc(&dev_copy, copy_bytes) != cudaSuccess) {
    std::printf("5. engine time per kernel: UNAVAILABLE: no memory for the copies\n");
    return;
  }
  auto spin_us = [](int us) {
    const std::int64_t until = traceml::now_ns() + std::int64_t{us} * 1000;
    while (traceml::now_ns() < until) {
    }
  };
  for (int step = 0; step < 6; ++step) {
    TRACEML_STEP();
    {
      TRACEML_PHASE_NAMED("isolated");  // a host spin of 20 us after each launch: the GPU idles between
      for (int i = 0; i < tiny; ++i) {
        tiny_kernel();
        spin_us(20);
      }
    }
    burn.run(2.0);  // outside any phase: the kernels below queue behind it
    {
      TRACEML_PHASE_NAMED("back_to_back");
      for (int i = 0; i < tiny; ++i) tiny_kernel();
    }
    {
      TRACEML_PHASE_NAMED("memsets");
      burn.run(5.0);
    }
    {
      TRACEML_PHASE_NAMED("tiny_memsets");  // the size of a boundary marker, isolated like the kernels
      for (int i = 0; i < tiny; ++i) {
        cudaMemsetAsync(dev_copy, 0x11, copy_bytes, nullptr);  // not the markers' 0xA7 fill
        spin_us(20);
      }
    }
    {
      TRACEML_PHASE_NAMED("copies");  // pinned host-to-device, a host spin of 20 us after each
      for (int i = 0; i < tiny; ++i) {
        cudaMemcpyAsync(dev_copy, host_copy, copy_bytes, cudaMemcpyHostToDevice, nullptr);
        spin_us(20);
      }
    }
    cudaDeviceSynchronize();
  }
  cudaFreeHost(host_copy);
  cudaFree(dev_copy);
  const auto& r = prof.finish();
  std::printf("5. engine time per kernel (%d tiny kernels or copies per phase, steps after the first)\n", tiny);
  std::printf("   %-13s %10s %9s %11s %12s %11s %16s\n", "phase", "window ms", "kernels", "records %", "counters %",
              "diff pts", "engine us/kernel");
  for (const char* name : {"isolated", "back_to_back", "memsets", "tiny_memsets", "copies"}) {
    const bool per_op = std::string(name) == "copies" || std::string(name) == "tiny_memsets";  // no kernels
    double window = 0, rec = 0, cnt = 0, kernels = 0;
    int n = 0;
    for (const auto& st : r.steps) {
      if (!st.gpu || st.step < 1) continue;
      for (const auto& p : st.gpu->phases) {
        const auto& f = p.facts;
        if (std::string(p.name) != name || f.window_ns <= 0 || f.counters.samples == 0) continue;
        window += static_cast<double>(f.window_ns);
        rec += static_cast<double>(f.busy_ns);
        cnt += traceml::busy_share(f.counters) * static_cast<double>(f.window_ns);
        kernels += static_cast<double>(f.kernel_count);
        ++n;
      }
    }
    if (n == 0 || window <= 0) {
      std::printf("   %-13s no step with both sources\n", name);
      continue;
    }
    char per_kernel[32] = "-";
    const double ops = per_op ? static_cast<double>(tiny) * n : kernels;
    if (ops > 0) std::snprintf(per_kernel, sizeof per_kernel, "%.3f%s", (cnt - rec) / ops / 1e3, per_op ? " /op" : "");
    std::printf("   %-13s %10.3f %9.0f %10.2f%% %11.2f%% %+11.2f %16s\n", name, window / n / 1e6, kernels / n,
                100.0 * rec / window, 100.0 * cnt / window, 100.0 * (cnt - rec) / window, per_kernel);
  }
}

/// Part 6 (see the top): ns per launch of tiny kernels back to back, sampler on against paused.
void launch_rate_beside_sampler(traceml::pm_sampler& sampler, traceml::gpu_clock& clock, int rounds) {
  const auto block = [&](bool on) {  // ns per launch over 100 ms of launching
    if (on)
      sampler.resume();
    else
      sampler.pause();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the decoder in its rhythm
    cudaDeviceSynchronize();
    const std::int64_t t0 = traceml::now_ns();
    std::int64_t launches = 0, t = 0;
    while ((t = traceml::now_ns() - t0) < 100000000) {
      for (int i = 0; i < 64; ++i) clock.release(clock.stamp(nullptr));
      launches += 64;
    }
    cudaDeviceSynchronize();
    if (on) sampler.take();  // nobody places these samples
    return static_cast<double>(t) / static_cast<double>(launches);
  };
  std::vector<double> ratios, on_ns, off_ns;
  const auto passes0 = sampler.stats().decode_passes;
  for (int r = 0; r < rounds; ++r) {
    double on = 0, off = 0;
    if (r % 2 == 0) {
      on = block(true);
      off = block(false);
    } else {
      off = block(false);
      on = block(true);
    }
    on_ns.push_back(on);
    off_ns.push_back(off);
    ratios.push_back(on / off);
  }
  sampler.pause();
  const auto ci = traceml_bench::median_interval(ratios);
  const auto med = [](std::vector<double> v) {  // the upper median of an even count
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double ratio = med(ratios);
  std::printf(
      "6. launch-bound thread beside the sampler (%d rounds of 100 ms blocks, %llu decode passes): %.3f us per "
      "launch on, %.3f us paused (medians); on/paused %.4f (%+.2f%%) [%.4f, %.4f] (%.0f%%)\n",
      rounds, static_cast<unsigned long long>(sampler.stats().decode_passes - passes0), med(on_ns) / 1e3,
      med(off_ns) / 1e3, ratio, 100.0 * (ratio - 1.0), ci.lo, ci.hi, 100.0 * ci.coverage);
}

}  // namespace

int main(int argc, char** argv) {
  int interval_us = 100, bursts = 6, tiny_kernels = 500, launch_rounds = 20;
  std::uint32_t max_samples = traceml::pm_sampler_options{}.max_samples;
  double burst_ms = 10;
  CLI::App app{"Feasibility of CUPTI PM sampling as a GPU time source (clock, rate, coexistence with CUPTI records)."};
  app.add_option("--interval-us", interval_us, "sampling interval")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--bursts", bursts, "busy bursts, each followed by an idle gap")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--burst-ms", burst_ms, "length of a burst and of a gap")
      ->check(CLI::Range(0.1, 1000.0))
      ->capture_default_str();
  app.add_option("--max-samples", max_samples, "samples one decode pass holds (counter-data image)")
      ->check(CLI::Range(16, 1 << 20))
      ->capture_default_str();
  app.add_option("--tiny-kernels", tiny_kernels, "tiny kernels per phase in part 5")
      ->check(CLI::Range(10, 100000))
      ->capture_default_str();
  app.add_option("--launch-rounds", launch_rounds, "paired rounds of part 6")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // every line, even if the driver takes the process down

  std::printf("pm_sampling_probe: interval %d us, %d bursts of %.1f ms, %u samples per decode pass\n", interval_us,
              bursts, burst_ms, max_samples);
  traceml::pm_sampler_options so;
  so.interval_ns = std::int64_t{interval_us} * 1000;
  so.max_samples = max_samples;
  so.decode_budget = 0;  // every sample evaluated: the rate and cost below are of full decoding
  const std::int64_t t_start = traceml::now_ns();
  // The process's sampler, as the profiler's source uses it (never disabled: step 4 takes it over).
  traceml::pm_sampler& sampler = traceml::process_pm_sampler(so);
  if (!sampler.running()) {
    std::printf("1. start: UNAVAILABLE: %s\n", sampler.why().c_str());
    return 0;
  }
  std::printf("1. start: %.1f ms, %s\n", static_cast<double>(traceml::now_ns() - t_start) / 1e6,
              sampler.status().c_str());

  burner burn;
  if (!burn.init()) {
    std::printf("no device memory for the bursts\n");
    return 1;
  }
  traceml::gpu_clock clock(256);
  const auto aligned = traceml::measure_clock_alignment(sampler, clock, so.interval_ns);
  if (!aligned.ok)  // go on unaligned: the bursts below show where the busy samples fall against the stamps
    std::printf("2. clock alignment: FAILED: %s (going on with offset 0)\n", aligned.why.c_str());
  else
    std::printf("2. clock alignment: a %.3f ms burst seen as %.3f ms busy; samples' clock + %+.3f ms = GPU clock\n",
                aligned.burst_ms, aligned.busy_ms, static_cast<double>(aligned.offset_ns) / 1e6);
  struct burst {
    int a = -1, b = -1;
    std::int64_t ta = -1, tb = -1;
  };
  std::vector<burst> bs(static_cast<std::size_t>(bursts));
  const std::int64_t cpu_mono0 = clock_ns(CLOCK_MONOTONIC), cpu_real0 = clock_ns(CLOCK_REALTIME);
  const int s0 = clock.stamp(nullptr);
  cudaDeviceSynchronize();
  std::int64_t g0 = -1;
  clock.read(s0, g0);
  std::printf(
      "   clocks side by side: GPU %%globaltimer %lld, CLOCK_REALTIME %lld (GPU - realtime %+.3f ms), "
      "CLOCK_MONOTONIC %lld%s\n",
      static_cast<long long>(g0), static_cast<long long>(cpu_real0), static_cast<double>(g0 - cpu_real0) / 1e6,
      static_cast<long long>(cpu_mono0), clock.why().empty() ? "" : (" (clock: " + clock.why() + ")").c_str());
  const std::int64_t wall0 = traceml::now_ns();
  for (auto& b : bs) {
    b.a = clock.stamp(nullptr);
    burn.run(burst_ms);
    b.b = clock.stamp(nullptr);
    cudaDeviceSynchronize();
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int>(burst_ms * 1000)));
  }
  for (auto& b : bs) {
    clock.read(b.a, b.ta);
    clock.read(b.b, b.tb);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  sampler.flush();
  const std::int64_t wall = traceml::now_ns() - wall0;
  auto samples = sampler.take();
  const std::int64_t raw_last_end = samples.empty() ? 0 : samples.back().end_ns;
  traceml::shift_samples(samples, aligned.offset_ns);
  std::printf("   %zu samples; first [%lld, %lld], last ends %lld; first stamp %lld\n", samples.size(),
              samples.empty() ? 0LL : static_cast<long long>(samples.front().begin_ns),
              samples.empty() ? 0LL : static_cast<long long>(samples.front().end_ns),
              samples.empty() ? 0LL : static_cast<long long>(samples.back().end_ns), static_cast<long long>(bs[0].ta));
  std::printf("   %-6s %12s %10s %10s %10s %10s %10s | %10s %10s\n", "burst", "length ms", "busy %", "SM %", "tensor %",
              "DRAM %", "samples", "gap busy %", "samples");
  for (std::size_t i = 0; i < bs.size(); ++i) {
    const auto& b = bs[i];
    const auto in = traceml::measure_window(samples, b.ta, b.tb);
    const std::int64_t gap_end = i + 1 < bs.size() ? bs[i + 1].ta : b.tb + static_cast<std::int64_t>(burst_ms * 1e6);
    // The gap from 1 ms after the burst's end (the sync and sleep start) to its next begin.
    const auto gap = traceml::measure_window(samples, b.tb + 1000000, gap_end - 100000);
    auto pct = [](double v) { return v < 0 ? -1.0 : 100.0 * v; };
    std::printf("   %-6zu %12.3f %10.2f %10.2f %10.2f %10.2f %10u | %10.2f %10u\n", i,
                static_cast<double>(b.tb - b.ta) / 1e6, pct(traceml::busy_share(in)), pct(traceml::sm_active_share(in)),
                pct(traceml::tensor_share(in)), pct(traceml::dram_share(in)), in.samples, pct(traceml::busy_share(gap)),
                gap.samples);
  }
  // Where the busy edges are, against the stamps: the first sample after each stamp that reads busy.
  for (std::size_t i = 0; i < bs.size() && i < 3; ++i) {
    std::int64_t edge = -1;
    for (const auto& s : samples)
      if (s.begin_ns >= bs[i].ta - 5000000 && s.gpu_busy > 0.5) {
        edge = s.begin_ns;
        break;
      }
    std::printf("   burst %zu: first busy sample begins %+.3f us from the stamp\n", i,
                edge < 0 ? 0.0 : static_cast<double>(edge - bs[i].ta) / 1e3);
  }
  {  // The first busy samples beside the first burst's stamps: the raw material of any alignment.
    int shown = 0;
    for (const auto& x : samples)
      if (x.gpu_busy > 0.5 && shown++ < 3)
        std::printf("   busy sample [%lld, %lld] (aligned clock), %.2f busy; first burst stamps [%lld, %lld]\n",
                    static_cast<long long>(x.begin_ns), static_cast<long long>(x.end_ns), x.gpu_busy,
                    static_cast<long long>(bs[0].ta), static_cast<long long>(bs[0].tb));
  }
  // Which clock CUPTI stamped the samples with: the raw end of the last one beside the clocks now.
  {
    const int sn = clock.stamp(nullptr);
    cudaDeviceSynchronize();
    std::int64_t gnow = -1;
    clock.read(sn, gnow);
    std::printf("   raw last sample end %lld; now: GPU %lld, CLOCK_MONOTONIC %lld, CLOCK_REALTIME %lld\n",
                static_cast<long long>(raw_last_end), static_cast<long long>(gnow),
                static_cast<long long>(clock_ns(CLOCK_MONOTONIC)), static_cast<long long>(clock_ns(CLOCK_REALTIME)));
  }
  const auto again = traceml::measure_clock_alignment(sampler, clock, so.interval_ns, aligned.offset_ns,
                                                      2 * traceml::clock_calibration_burst_ns(so.interval_ns));
  std::printf("   alignment again after %.2f s: %s %+.3f us from the first\n",
              static_cast<double>(traceml::now_ns() - wall0) / 1e9,
              again.ok ? "offset moved" : ("FAILED (" + again.why + ")").c_str(),
              again.ok ? static_cast<double>(again.offset_ns - aligned.offset_ns) / 1e3 : 0.0);
  const auto st = sampler.stats();
  std::printf(
      "3. rate: %llu samples in %.3f s of GPU time (%.0f per s), mean interval %.2f us (asked %d), %llu decode "
      "passes, decoder %.3f ms of CPU per s of run, %llu overflows\n",
      static_cast<unsigned long long>(st.samples), static_cast<double>(st.last_ns - st.first_ns) / 1e9,
      st.last_ns > st.first_ns ? static_cast<double>(st.samples) / (static_cast<double>(st.last_ns - st.first_ns) / 1e9)
                               : 0.0,
      st.mean_interval_ns / 1e3, interval_us, static_cast<unsigned long long>(st.decode_passes),
      static_cast<double>(st.decode_cpu_ns) / 1e6 / (static_cast<double>(wall) / 1e9),
      static_cast<unsigned long long>(st.overflows));
  sampler.pause();  // as between profilers; the source below resumes it

  // 4. With CUPTI kernel records on every step, through the source the profiler uses.
  {
    traceml::cupti_options co;
    co.overhead_budget = 0;
    co.sample_every = 1;
    auto inner = std::make_unique<traceml::cupti_source>(co);
    const bool cupti_ok = inner->ok();
    const std::string inner_why = inner->why();
    traceml::pm_sampling_options po;
    po.sampler = so;
    auto src = std::make_unique<traceml::pm_sampling_source>(std::move(inner), po);
    auto* pm = src.get();
    traceml::profiler_options o;
    o.run_name = "probe";
    o.print_table = false;
    o.warmup_steps = 1;
    traceml::profiler prof(o);
    prof.set_gpu_source(std::move(src));
    for (int step = 0; step < 8; ++step) {
      TRACEML_STEP();
      {
        TRACEML_PHASE(forward);
        burn.run(burst_ms);
      }
      {
        TRACEML_PHASE(optimizer);
        std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int>(burst_ms * 500)));
        burn.run(burst_ms / 2);
      }
    }
    // Read before finish(): it releases the source.
    const bool pm_running = pm->sampling();
    const std::string pm_why = pm->why();
    const auto& r = prof.finish();
    std::printf("4. with CUPTI records on every step: CUPTI %s; PM sampling %s\n",
                cupti_ok ? "running" : ("unavailable: " + inner_why).c_str(),
                pm_running ? "running" : ("unavailable: " + pm_why).c_str());
    std::printf("   %-5s %-10s %12s %12s %12s %12s %10s\n", "step", "phase", "window ms", "records busy",
                "counters busy", "SM active", "samples");
    for (const auto& s : r.steps) {
      if (!s.gpu) continue;
      for (const auto& p : s.gpu->phases) {
        const auto& f = p.facts;
        std::printf("   %-5d %-10s %12.3f %11.2f%% %11.2f%% %11.2f%% %10u\n", s.step, p.name,
                    f.window_ns >= 0 ? static_cast<double>(f.window_ns) / 1e6 : -1.0,
                    f.window_ns > 0 ? 100.0 * static_cast<double>(f.busy_ns) / static_cast<double>(f.window_ns) : -1.0,
                    100.0 * traceml::busy_share(f.counters), 100.0 * traceml::sm_active_share(f.counters),
                    f.counters.samples);
      }
    }
    std::printf("   status: %s\n", r.summary.gpu_status.c_str());
    // The run's summary: the two sources side by side on the same recorded steps.
    for (const auto& p : r.summary.phases)
      if (p.counters)
        std::printf(
            "   %-10s counters busy %.2f%% on %zu sampled steps; on %zu recorded steps counters %.2f%% vs records "
            "%.2f%%\n",
            p.name.c_str(), 100.0 * p.counters->busy_share, p.counters->steps, p.counters->recorded_steps,
            100.0 * p.counters->recorded_counter_busy_share, 100.0 * p.counters->recorded_kernel_busy_share);
  }
  engine_time_per_kernel(burn, clock, so, tiny_kernels);
  launch_rate_beside_sampler(sampler, clock, launch_rounds);
  cudaFree(burn.buf);
  return 0;
}
