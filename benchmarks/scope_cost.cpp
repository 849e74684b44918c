// What one traceml scope costs the training thread. Built twice: scope_cost (recording compiled in,
// NVTX headers present when found, no NVTX tool attached) and scope_cost_disabled (TRACEML_DISABLE).
//
// Besides scopes: the trainer-callback path (a begin/end hook pair through a callback_list, budget
// 60 ns), the CPU side of the GPU hooks (a scope with a profiler and a fake GPU source attached,
// budget 1 us), and the two clock reads every scope needs. The clock differs per machine and is
// most of a scope's cost, so the run ends with the scope's cost beyond its clock reads (goal:
// 10 ns), computed from the medians (or means) measured in the same run.
//
// The rings: a scope outside a profiled step still writes its record to the thread's ring, and a
// ring holds 16384 records. A full ring drops records, which is a different (cheaper) path than the
// one we want to measure, so the loops drain every `drain_every` iterations with the timer paused.
// In a real run the profiler drains at each step end; that cost is per step, not per scope, and
// shows up in BM_profiled_step instead, which runs a whole step with the profiler attached.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include <traceml/clock.hpp>
#include <traceml/detail/scope_pairing.hpp>
#include <traceml/traceml.hpp>

#include "empty_step.hpp"

namespace {

constexpr std::int64_t drain_every = 8192;  // half a ring: never full, pauses rare

void drain_rings() {
#if TRACEML_ENABLED
  traceml::detail::drain_all([](const traceml::span_record& r) {
    auto end = r.end_ns;  // a non-const lvalue: the const-ref DoNotOptimize is deprecated
    benchmark::DoNotOptimize(end);
  });
#endif
}

// Runs `body` once per iteration, draining the rings with the timer stopped now and then.
template <class Body>
void run_scopes(benchmark::State& state, Body&& body) {
  drain_rings();
  std::int64_t since_drain = 0;
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();  // the scope's work may not be moved across iterations
    if (++since_drain == drain_every) {
      state.PauseTiming();
      drain_rings();
      since_drain = 0;
      state.ResumeTiming();
    }
  }
  drain_rings();
}

void describe(benchmark::State& state, int scopes_per_iteration) {
  std::string label = TRACEML_ENABLED ? "recording" : "compiled out";
  if (TRACEML_ENABLED && !traceml::enabled()) label = "switched off at run time";
  if (TRACEML_HAS_NVTX) label += ", NVTX (no tool)";
  state.SetLabel(label);
  state.SetItemsProcessed(state.iterations() * scopes_per_iteration);
  // Seconds per scope (printed with an SI prefix: "18n" is 18 ns), whatever the scopes per iteration.
  state.counters["per_scope"] = benchmark::Counter(static_cast<double>(state.iterations() * scopes_per_iteration),
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

// One built-in phase scope: two clock reads, NVTX push/pop, one ring write.
static void BM_phase_scope(benchmark::State& state) {
  traceml::set_enabled(true);
  run_scopes(state, [] { TRACEML_PHASE(forward); });
  describe(state, 1);
}
BENCHMARK(BM_phase_scope);

// A phase named at run time (a built-in name is looked up: strcmp over the kinds).
static void BM_named_phase_scope(benchmark::State& state) {
  traceml::set_enabled(true);
  run_scopes(state, [] { TRACEML_PHASE_NAMED("tokenize"); });
  describe(state, 1);
}
BENCHMARK(BM_named_phase_scope);

#if TRACEML_ENABLED
// Recording compiled in but switched off with set_enabled(false): one relaxed load per scope.
static void BM_phase_scope_switched_off(benchmark::State& state) {
  traceml::set_enabled(false);
  run_scopes(state, [] { TRACEML_PHASE(forward); });
  describe(state, 1);
  traceml::set_enabled(true);
}
BENCHMARK(BM_phase_scope_switched_off);
#endif

// A step holding one micro-batch: two scopes, plus the step/micro-batch counters. No profiler, so
// the step end notifies nobody (see BM_profiled_step for that).
static void BM_step_microbatch(benchmark::State& state) {
  traceml::set_enabled(true);
  run_scopes(state, [] {
    TRACEML_STEP();
    TRACEML_MICROBATCH();
  });
  describe(state, 2);
}
BENCHMARK(BM_step_microbatch);

// A whole profiled step (4 micro-batches x forward/backward, an optimizer phase: 14 scopes) with the
// profiler attached: adds the per-step drain, statistics and bookkeeping. A fresh profiler every
// 1024 steps (timer paused) keeps its per-step results from growing without bound.
static void BM_profiled_step(benchmark::State& state) {
  traceml::set_enabled(true);
  traceml::profiler_options opts;
  opts.print_table = false;
  opts.warmup_steps = 0;
  auto prof = std::make_unique<traceml::profiler>(opts);
  std::int64_t steps = 0;
  for (auto _ : state) {
    traceml_bench::empty_step();
    if (++steps % 1024 == 0) {
      state.PauseTiming();
      prof.reset();
      prof = std::make_unique<traceml::profiler>(opts);
      state.ResumeTiming();
    }
  }
  prof.reset();
  describe(state, 14);
}
BENCHMARK(BM_profiled_step);

// The two clock reads a scope makes (begin and end), back to back: the floor under every scope.
static void BM_clock_pair(benchmark::State& state) {
  for (auto _ : state) {
    std::int64_t a = traceml::now_ns();
    benchmark::DoNotOptimize(a);
    std::int64_t b = traceml::now_ns();
    benchmark::DoNotOptimize(b);
  }
  state.SetLabel(traceml::clock_uses_tsc() ? "now_ns() x2, rdtsc" : "now_ns() x2, steady_clock");
}
BENCHMARK(BM_clock_pair);

// The trainer-callback path: on_phase_begin/on_phase_end through a callback_list holding a
// recording_callback (what the profiler is, without its step-end work). Budget: 60 ns a pair.
static void BM_callback_phase_pair(benchmark::State& state) {
  traceml::set_enabled(true);
  traceml::recording_callback rec;
  traceml::callback_list callbacks;
  callbacks.add(rec);
  run_scopes(state, [&] {
    callbacks.on_phase_begin(traceml::phase_kind::forward);
    callbacks.on_phase_end(traceml::phase_kind::forward);
  });
  describe(state, 1);
}
BENCHMARK(BM_callback_phase_pair);

namespace {

// What collect() returns, whichever the gpu_source interface of this tree says.
using gpu_collect_result = decltype(std::declval<traceml::gpu_source&>().collect(false));

// A GPU source whose scope hooks are virtual calls that count and do nothing else: what the
// profiler's dispatch to a source costs, without any CUDA call.
class fake_gpu_source : public traceml::gpu_source {
 public:
  const char* name() const noexcept override { return "fake"; }
  bool wants_scope_hooks() const noexcept override { return true; }
  void on_scope_begin(traceml::phase_kind, const char*, std::int32_t, std::int32_t) noexcept override { ++begins; }
  void on_scope_end(const traceml::span_record&) noexcept override { ++ends; }
  void step_ended(std::int32_t, const std::vector<traceml::span_record>&) override {}
  gpu_collect_result collect(bool) override { return gpu_collect_result{}; }
  std::string status() const override { return "fake GPU source (benchmark)"; }
  std::uint64_t begins = 0, ends = 0;
};

// The CPU side of a real source's hooks, without the CUDA calls: an uncontended lock and the scope
// pairing at begin and end, and the closed span taken back at once (as its step end would).
class pairing_gpu_source : public fake_gpu_source {
 public:
  void on_scope_begin(traceml::phase_kind, const char*, std::int32_t, std::int32_t) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    pairing_.begin(++seq_);
    ++begins;
  }
  void on_scope_end(const traceml::span_record& r) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    ++ends;
    std::uint64_t b = 0;
    if (!pairing_.end(b)) return;
    pairing_.closed(r, std::make_pair(b, ++seq_));
    auto taken = pairing_.take(r);
    benchmark::DoNotOptimize(taken);
  }

 private:
  std::mutex mu_;
  std::uint64_t seq_ = 0;
  traceml::detail::scope_pairing<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> pairing_;
};

// One phase scope with a profiler attached whose GPU source is `Source`.
template <class Source>
void phase_scope_with_source(benchmark::State& state) {
  traceml::set_enabled(true);
  traceml::profiler_options opts;
  opts.print_table = false;
  opts.warmup_steps = 0;
  auto prof = std::make_unique<traceml::profiler>(opts);
  auto source = std::make_unique<Source>();
  const Source& seen = *source;
  prof->set_gpu_source(std::move(source));
  run_scopes(state, [] { TRACEML_PHASE(forward); });
  if (TRACEML_ENABLED && seen.ends == 0) state.SkipWithError("the GPU source's scope hooks were never called");
  prof.reset();
  describe(state, 1);
}

}  // namespace

// The GPU hooks' CPU side: a phase scope whose begin and end reach a GPU source through the
// profiler (two more virtual calls each). Budget: 1 us a scope, CUDA calls aside.
static void BM_phase_scope_gpu_hooks(benchmark::State& state) { phase_scope_with_source<fake_gpu_source>(state); }
BENCHMARK(BM_phase_scope_gpu_hooks);

// As above, with the hooks doing what the sources do on the CPU: a lock and the scope pairing.
static void BM_phase_scope_gpu_pairing(benchmark::State& state) { phase_scope_with_source<pairing_gpu_source>(state); }
BENCHMARK(BM_phase_scope_gpu_pairing);

namespace {

// Prints as the console reporter does, keeps each benchmark's CPU time per iteration (the median
// aggregate when repetitions are asked for, the mean when only that is there, else the one run),
// and ends with the budget lines.
// Google Benchmark 1.8 replaced Run::error_occurred with Run::skipped: whichever this version has.
template <class R>
auto run_failed(const R& r, int) -> decltype(static_cast<bool>(r.error_occurred)) {
  return static_cast<bool>(r.error_occurred);
}
template <class R>
auto run_failed(const R& r, long) -> decltype(static_cast<bool>(r.skipped)) {
  return static_cast<bool>(r.skipped);
}

class budget_reporter : public benchmark::ConsoleReporter {
 public:
  using benchmark::ConsoleReporter::ConsoleReporter;

  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (run_failed(r, 0)) continue;
      const int rank = r.run_type == Run::RT_Iteration ? 1
                       : r.aggregate_name == "mean"    ? 2
                       : r.aggregate_name == "median"  ? 3
                                                       : 0;
      if (rank == 0) continue;
      auto& slot = ns_[r.run_name.function_name];
      if (rank >= slot.first) slot = {rank, r.GetAdjustedCPUTime() * to_ns(r.time_unit)};
    }
  }

  void print_budgets() const {
    const double clock = get("BM_clock_pair"), scope = get("BM_phase_scope");
    const double callback = get("BM_callback_phase_pair"), gpu = get("BM_phase_scope_gpu_hooks");
    const char* what = ns_.count("BM_phase_scope") && ns_.at("BM_phase_scope").first == 3 ? "medians" : "means";
    std::printf("\nsummary (CPU time, %s of this run):\n", what);
    if (!TRACEML_ENABLED) {
      std::printf("  recording compiled out (TRACEML_DISABLE): the budgets apply to scope_cost\n");
      return;
    }
    if (clock > 0)
      std::printf("  two clock reads (now_ns, %s): %.1f ns\n", traceml::clock_uses_tsc() ? "rdtsc" : "steady_clock",
                  clock);
    if (clock > 0 && scope > 0)
      std::printf("  phase scope: %.1f ns = clock reads + %.1f ns beyond them (goal <= 10 ns beyond)%s\n", scope,
                  scope - clock, scope - clock <= 10 ? "" : "  [over the goal]");
    if (callback > 0)
      std::printf("  callback begin/end pair: %.1f ns (budget <= 60 ns)%s\n", callback,
                  callback <= 60 ? "" : "  [over budget]");
    if (gpu > 0)
      std::printf("  phase scope with GPU hooks (fake source, CPU side): %.1f ns (budget <= 1000 ns)%s\n", gpu,
                  gpu <= 1000 ? "" : "  [over budget]");
  }

 private:
  static double to_ns(benchmark::TimeUnit u) {
    switch (u) {
      case benchmark::kSecond: return 1e9;
      case benchmark::kMillisecond: return 1e6;
      case benchmark::kMicrosecond: return 1e3;
      default: return 1;
    }
  }
  double get(const std::string& name) const {
    auto it = ns_.find(name);
    return it == ns_.end() ? -1 : it->second.second;
  }
  std::map<std::string, std::pair<int, double>> ns_;  // benchmark -> (which statistic, ns per iteration)
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  budget_reporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_Color
                                                 : benchmark::ConsoleReporter::OO_None);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_budgets();
  benchmark::Shutdown();
  return 0;
}
