// Hand-made runs for the HTML report's tests: an accumulation experiment (1x4, 2x2, 4x1) with GPU
// facts (GPU time on every step, kernel records on some) and kernel names that need escaping, built
// from steps so the summaries are the real ones.
#pragma once
#include <traceml/traceml.hpp>

#include <string>
#include <vector>

namespace traceml_test {

/// The kernel whose name must never appear unescaped.
inline constexpr const char* nasty_kernel = "void f<int>(a&b)";

/// One schedule's run: `steps` steps, the first `warmup` of them three times slower (as a first
/// step with its allocations and autotuning is). GPU time between phase boundaries on every step
/// (CUDA events); kernel records on every fourth step (1, 5, 9, ...), which run 10% slower, as the
/// default recording budget makes them. With `counters`, hardware-counter samples on every step too
/// (busy as the kernels make it), except the tensor counter on the 4x1 run (as a GPU that lacks it),
/// so that a report shows both a sampled and a "not sampled" counter. Deterministic: no random numbers.
inline traceml::run_result sample_schedule(int micro, int accum, int steps = 24, std::size_t warmup = 3,
                                           bool gpu = true, bool counters = false) {
  using traceml::phase_kind;
  std::vector<traceml::step_result> out;
  const double fwd_per_micro = 6.0 + 4.0 * micro;  // bigger micro-batches cost more, but not linearly
  for (int i = 0; i < steps; ++i) {
    const bool recorded = gpu && i % 4 == 1;
    const double slow = (static_cast<std::size_t>(i) < warmup ? 3.0 : 1.0) * (recorded ? 1.1 : 1.0);
    const double jitter = 0.03 * static_cast<double>((i * 7919) % 13) / 13.0;  // a few per cent, fixed
    traceml::step_result st;
    st.step = i;
    st.microbatches = accum;
    const double data = 0.8 * accum * slow, fwd = fwd_per_micro * accum * slow * (1 + jitter);
    const double bwd = 2 * fwd, opt = 9.0 * slow, residual = 1.2 + 0.4 * accum;
    st.phases.push_back({phase_kind::dataloader, "dataloader", data, accum, true});
    st.phases.push_back({phase_kind::forward, "forward", fwd, accum, true});
    st.phases.push_back({phase_kind::backward, "backward", bwd, accum, true});
    st.phases.push_back({phase_kind::optimizer, "optimizer", opt, 1, true});
    st.phases.push_back({phase_kind::user, "clip <norm> & log", 0.3 * opt, 1, false});  // nested in optimizer
    st.residual_ms = residual;
    st.wall_ms = data + fwd + bwd + opt + residual;
    if (gpu) {
      traceml::step_gpu_report rep;
      rep.step = i;
      rep.kernels_measured = recorded;
      rep.peak_allocated_bytes = static_cast<std::int64_t>(micro) * (512LL << 20) + (3LL << 30);
      rep.peak_reserved_bytes = rep.peak_allocated_bytes + (256LL << 20);
      // One (phase, micro-batch) entry: its GPU window is the phase's wall time, a fraction of it busy.
      const auto add = [&](phase_kind kind, const char* name, int mb, double wall_ms, double busy_frac,
                           std::uint64_t kernels, bool with_kernels = true) {
        traceml::phase_gpu_facts f;
        f.kind = kind;
        f.name = name;
        f.microbatch = mb;
        const auto wall_ns = static_cast<std::int64_t>(wall_ms * 1e6);
        f.facts.span_ns = wall_ns * 19 / 20;
        if (recorded) {
          f.facts.window_ns = wall_ns;
          f.facts.busy_ns = static_cast<std::int64_t>(static_cast<double>(wall_ns) * busy_frac);
          f.facts.idle_ns = f.facts.window_ns - f.facts.busy_ns;
          f.facts.kernel_count = with_kernels ? kernels : 0;
          if (with_kernels) {
            f.facts.kernel_ns = f.facts.busy_ns * 9 / 10;
            f.kernels.push_back(
                {"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", kernels / 2, f.facts.kernel_ns / 2});
            f.kernels.push_back({nasty_kernel, kernels / 4, f.facts.kernel_ns / 5});
            f.kernels.push_back({"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
                                 kernels / 4, f.facts.kernel_ns / 10});
          } else {  // host-to-device copies only
            f.facts.memcpy_ns = f.facts.busy_ns;
            f.facts.memcpy_bytes = 4096ULL * 4 * static_cast<std::uint64_t>(micro);
          }
        }
        if (counters) {
          auto& c = f.facts.counters;
          c.covered_ns = f.facts.span_ns;
          c.samples = static_cast<std::uint32_t>(c.covered_ns / 20000);
          const auto w = static_cast<double>(c.covered_ns);
          c.busy_ns = busy_frac * w;
          c.sm_active_ns = 0.7 * busy_frac * w;
          c.dram_ns = 0.3 * w;
          c.dram_covered_ns = c.covered_ns;
          if (micro != 4) {
            c.tensor_ns = 0.5 * busy_frac * w;
            c.tensor_covered_ns = c.covered_ns;
          }
        }
        rep.total += f.facts;
        rep.phases.push_back(std::move(f));
      };
      // Small micro-batches leave the GPU idle between launches: the effect the report explains.
      const double busy = 0.35 + 0.12 * micro;
      for (int m = 0; m < accum; ++m) {
        add(phase_kind::dataloader, "dataloader", m, data / accum, 0.1, 0, false);
        add(phase_kind::forward, "forward", m, fwd / accum, busy, 180);
        add(phase_kind::backward, "backward", m, bwd / accum, busy + 0.05, 360);
      }
      add(phase_kind::optimizer, "optimizer", -1, opt, 0.6, 40);
      // The step's window is the whole step: the phases' busy time, the rest idle.
      if (recorded) {
        rep.total.window_ns = static_cast<std::int64_t>(st.wall_ms * 1e6);
        rep.total.idle_ns = rep.total.window_ns - rep.total.busy_ns;
      }
      st.gpu = std::move(rep);
    }
    out.push_back(std::move(st));
  }
  traceml::run_result r;
  r.name = std::to_string(micro) + "x" + std::to_string(accum);
  r.config = {{"schedule", r.name}, {"model", "Qwen3-1.7B (LoRA r=16)"}, {"dtype", "bf16"}, {"note", "a<b & c>d"}};
  r.steps = std::move(out);
  r.summary = traceml::summarize_run(r.steps, warmup, 4.0 * 512, 4.0);
  if (gpu) r.summary.gpu_status = "CUPTI kernel records on every fourth step, CUDA-event phase timing on every step";
  return r;
}

/// The three schedules of the accumulation experiment (with hardware counters: see sample_schedule).
inline std::vector<traceml::run_result> sample_experiment(bool counters = false) {
  return {sample_schedule(1, 4, 24, 3, true, counters), sample_schedule(2, 2, 24, 3, true, counters),
          sample_schedule(4, 1, 24, 3, true, counters)};
}

}  // namespace traceml_test
