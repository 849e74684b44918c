// What one traceml scope costs the training thread. Built twice: scope_cost (recording compiled in,
// NVTX headers present when found, no NVTX tool attached) and scope_cost_disabled (TRACEML_DISABLE).
//
// The rings: a scope outside a profiled step still writes its record to the thread's ring, and a
// ring holds 16384 records. A full ring drops records, which is a different (cheaper) path than the
// one we want to measure, so the loops drain every `drain_every` iterations with the timer paused.
// In a real run the profiler drains at each step end; that cost is per step, not per scope, and
// shows up in BM_profiled_step instead, which runs a whole step with the profiler attached.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>

#include <traceml/traceml.hpp>

namespace {

constexpr std::int64_t drain_every = 8192;  // half a ring: never full, pauses rare

void drain_rings() {
#if TRACEML_ENABLED
  traceml::detail::drain_all([](const traceml::span_record& r) { benchmark::DoNotOptimize(r.end_ns); });
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
    {
      TRACEML_STEP();
      for (int m = 0; m < 4; ++m) {
        TRACEML_MICROBATCH();
        { TRACEML_PHASE(forward); }
        { TRACEML_PHASE(backward); }
      }
      { TRACEML_PHASE(optimizer); }
    }
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

BENCHMARK_MAIN();
