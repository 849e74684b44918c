// A hand-made run that mixes recorded and unrecorded steps, as the default settings produce: CUDA-event
// GPU time on every step, kernel records on one step only (slower: recording costs), the step after
// it slightly slow too, and a phase ("eval") present on two steps only. Every sink's tests check
// their figures against the hand-computed values below, so that no sink can divide a figure of one
// sample set by a figure of another.
//
// 12 steps, 2 warm-up (3x slower). Per measured step, in ms:
//   unrecorded: dataloader 1, forward 2 x 4, backward 2 x 6, optimizer 2, residual 1   -> wall 24
//               GPU time (events): dataloader 2 x 0.5, forward 2 x 3.5, backward 2 x 5.5, optimizer 1.5,
//               step 20.5
//   steps 3, 9: + eval 4 (GPU 3.5)                                                     -> wall 28
//   step 5 (recorded): forward 2 x 6, backward 2 x 9, optimizer 3, dataloader 1, residual 1 -> wall 35
//               GPU time: dataloader 2 x 0.5, forward 2 x 5.5, backward 2 x 8.5, optimizer 2.5, step 31.5
//               kernels: forward per micro-batch window 5.5, busy 3, 100 launches (gemm 60 x 30 us,
//               elementwise 40 x 15 us); backward window 8.5, busy 6, 150 launches (gemm 100 x 50 us,
//               elementwise 50 x 10 us); optimizer window 2.5, busy 0.5, 10 launches (adam 10 x 40 us);
//               dataloader window 0.5, busy 0; step window 31.5, busy 18.5
//   step 6 (after the recorded one): forward 2 x 5, otherwise unrecorded                -> wall 26
//   hardware counters (PM samples covering every GPU window whole, one sample per 20 us) on every
//               step but step 6: busy share / SM active / tensor / DRAM of forward 0.5/0.25/0.2/0.1,
//               backward 0.8/0.6/0.5/0.3, optimizer 0.4/0.2/0/0.6, dataloader 0/0/0/0, eval 1/0.9/0.8/0.2;
//               on the recorded step forward 0.6, backward 0.7 busy (records say 3/5.5 and 6/8.5); the
//               step's counters are the sum of its phases'
// Hand-computed (measured steps 2..11):
//   step mean (24*6 + 28*2 + 35 + 26) / 10 = 26.1; baseline = steps 2,3,4,7,8,9,10,11 (8 steps):
//   mean (24*6 + 28*2) / 8 = 25, median 24; recording cost 35 / 24 - 1.
//   forward kernels (1 step): wall 12, window 11, busy 6, idle 5, busy share 6/11; 200 launches/step,
//   100 per micro-batch; forward baseline wall 8, GPU 7. eval: wall mean 0.8, baseline wall 1, GPU 0.875.
//   counters, sampled steps 2,3,4,5,7..11 (9): forward busy (8 x 3.5 + 6.6) / 9 = 3.8444 ms, busy share
//   34.6 / 67, SM 0.25, window (8 x 7 + 11) / 9; on the recorded step counters 0.6 against records 6/11;
//   forward baseline counter busy 3.5 (every baseline step sampled); backward baseline 8.8; eval busy
//   share 1, busy mean 2 x 3.5 / 9.
#pragma once
#include <traceml/analysis/run_accumulator.hpp>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace traceml_test {

/// Scales let the comparison tests build a second, different run from the same shape.
struct mixed_run_shape {
  std::string name = "mixed";
  double fb_scale = 1.0;       ///< forward/backward wall and GPU time on every step
  double busy_scale = 1.0;     ///< busy time of the recorded step's forward/backward
  double launch_scale = 1.0;   ///< launches of the recorded step's forward/backward
  double counter_scale = 1.0;  ///< forward/backward busy shares from hardware counters (capped at 1)
};

namespace detail_mixed {
inline std::int64_t ns(double ms) { return static_cast<std::int64_t>(ms * 1e6 + 0.5); }

inline traceml::phase_gpu_facts gpu_phase(traceml::phase_kind kind, const char* name, int micro, double span_ms) {
  traceml::phase_gpu_facts f;
  f.kind = kind;
  f.name = name;
  f.microbatch = micro;
  f.facts.span_ns = ns(span_ms);
  return f;
}

/// Hardware-counter facts of a phase entry: samples covering its whole GPU window with these shares.
inline void add_counters(traceml::phase_gpu_facts& f, double busy, double sm, double tensor, double dram) {
  auto& c = f.facts.counters;
  c.covered_ns = f.facts.span_ns;
  c.samples = static_cast<std::uint32_t>(f.facts.span_ns / 20000);
  const auto w = static_cast<double>(c.covered_ns);
  c.busy_ns = busy * w;
  c.sm_active_ns = sm * w;
  c.tensor_ns = tensor * w;
  c.dram_ns = dram * w;
  c.tensor_covered_ns = c.dram_covered_ns = c.covered_ns;
}

/// Kernel facts of a recorded phase entry: window, busy, and kernels given as (name, launches, us each).
inline void add_kernels(traceml::phase_gpu_facts& f, double window_ms, double busy_ms,
                        const std::vector<std::tuple<const char*, std::uint64_t, double>>& kernels) {
  f.facts.window_ns = ns(window_ms);
  f.facts.busy_ns = ns(busy_ms);
  f.facts.idle_ns = f.facts.window_ns - f.facts.busy_ns;
  for (const auto& [name, n, us] : kernels) {
    const auto total = static_cast<std::int64_t>(static_cast<double>(n) * us * 1e3 + 0.5);
    f.kernels.push_back({name, n, total});
    f.facts.kernel_count += n;
    f.facts.kernel_ns += total;
  }
}
}  // namespace detail_mixed

inline traceml::run_result mixed_run(const mixed_run_shape& shape = {}, std::size_t warmup = 2) {
  using traceml::phase_kind;
  using namespace detail_mixed;
  const double s = shape.fb_scale;
  std::vector<traceml::step_result> steps;
  for (int i = 0; i < 12; ++i) {
    const double slow = i < 2 ? 3.0 : 1.0;
    const bool recorded = i == 5, after = i == 6, eval = i == 3 || i == 9, sampled = i != 6;
    const double fwd = (recorded ? 6.0 : after ? 5.0 : 4.0) * s * slow, bwd = (recorded ? 9.0 : 6.0) * s * slow;
    const double opt = (recorded ? 3.0 : 2.0) * slow, data = 1.0 * slow, residual = 1.0 * slow;
    traceml::step_result st;
    st.step = i;
    st.begin_ns = ns(100.0 * i);
    st.microbatches = 2;
    st.phases.push_back({phase_kind::dataloader, "dataloader", data, 2, true});
    st.phases.push_back({phase_kind::forward, "forward", 2 * fwd, 2, true});
    st.phases.push_back({phase_kind::backward, "backward", 2 * bwd, 2, true});
    if (eval) st.phases.push_back({phase_kind::user, "eval", 4.0, 1, true});
    st.phases.push_back({phase_kind::optimizer, "optimizer", opt, 1, true});
    st.residual_ms = residual;
    st.wall_ms = residual;
    for (const auto& p : st.phases) st.wall_ms += p.wall_ms;

    traceml::step_gpu_report g;
    g.step = i;
    g.kernels_measured = recorded;
    g.peak_allocated_bytes = (2LL << 30) + (recorded ? (1LL << 20) : 0);
    g.peak_reserved_bytes = 3LL << 30;
    const double fspan = (recorded ? 5.5 : 3.5) * s * slow, bspan = (recorded ? 8.5 : 5.5) * s * slow;
    const double ospan = (recorded ? 2.5 : 1.5) * slow;
    for (int m = 0; m < 2; ++m) {
      auto d = gpu_phase(phase_kind::dataloader, "dataloader", m, 0.5 * slow);
      if (recorded) add_kernels(d, 0.5, 0.0, {});
      if (sampled) add_counters(d, 0, 0, 0, 0);
      g.phases.push_back(d);
      auto f = gpu_phase(phase_kind::forward, "forward", m, fspan);
      auto b = gpu_phase(phase_kind::backward, "backward", m, bspan);
      if (sampled) {
        add_counters(f, std::min(1.0, (recorded ? 0.6 : 0.5) * shape.counter_scale), 0.25, 0.2, 0.1);
        add_counters(b, std::min(1.0, (recorded ? 0.7 : 0.8) * shape.counter_scale), 0.6, 0.5, 0.3);
      }
      if (recorded) {
        const double L = shape.launch_scale;
        add_kernels(f, fspan, 3.0 * shape.busy_scale,
                    {{"gemm", static_cast<std::uint64_t>(60 * L), 30.0},
                     {"elementwise", static_cast<std::uint64_t>(40 * L), 15.0}});
        add_kernels(b, bspan, 6.0 * shape.busy_scale,
                    {{"gemm", static_cast<std::uint64_t>(100 * L), 50.0},
                     {"elementwise", static_cast<std::uint64_t>(50 * L), 10.0}});
      }
      g.phases.push_back(f);
      g.phases.push_back(b);
    }
    if (eval) {
      auto e = gpu_phase(phase_kind::user, "eval", -1, 3.5);
      if (sampled) add_counters(e, 1.0, 0.9, 0.8, 0.2);
      g.phases.push_back(e);
    }
    auto o = gpu_phase(phase_kind::optimizer, "optimizer", -1, ospan);
    if (recorded) add_kernels(o, ospan, 0.5, {{"adam", 10, 40.0}});
    if (sampled) add_counters(o, 0.4, 0.2, 0, 0.6);
    g.phases.push_back(o);
    for (const auto& p : g.phases) g.total.counters += p.facts.counters;
    const double step_span = 2 * 0.5 * slow + 2 * fspan + 2 * bspan + ospan + (eval ? 3.5 : 0.0);
    g.total.span_ns = ns(step_span);
    if (recorded) {
      for (const auto& p : g.phases) {
        g.total.kernel_ns += p.facts.kernel_ns;
        g.total.kernel_count += p.facts.kernel_count;
        g.total.busy_ns += p.facts.busy_ns;
      }
      g.total.window_ns = g.total.span_ns;
      g.total.idle_ns = g.total.window_ns - g.total.busy_ns;
    }
    st.gpu = g;
    steps.push_back(st);
  }
  traceml::run_result r;
  r.name = shape.name;
  r.config = {{"schedule", "2x2"}};
  r.steps = steps;
  r.summary = traceml::summarize_run(steps, warmup);
  r.summary.gpu_status =
      "CUPTI kernel records on 1 step, CUDA-event phase timing on every step, hardware counters on 11";
  return r;
}

/// mixed_run with `edit(phase facts, phase name)` applied to every phase of its recorded step, and
/// `edit_total(step facts)` to the step's, then summarized again (the variants below).
template <class Edit, class EditTotal>
traceml::run_result mixed_run_edited(Edit edit, EditTotal edit_total) {
  traceml::run_result r = mixed_run();
  for (auto& st : r.steps) {
    auto& g = *st.gpu;
    if (!g.kernels_measured) continue;
    for (auto& p : g.phases) edit(p.facts, std::string(p.name));
    edit_total(g.total);
  }
  const std::string status = r.summary.gpu_status;
  r.summary = traceml::summarize_run(r.steps, 2);
  r.summary.gpu_status = status;
  return r;
}

/// mixed_run with its recorded step's records as the counters would count them
/// (gpu_facts::counted_busy_ns): each forward micro-batch 3.4 ms (records 3), each backward 6.2
/// (records 6), the optimizer 0.9 (0.5), the dataloader 0.1 (0), the step 21.5 (18.5), seen through
/// 100 us samples and 1.5 us per launch. Hand-computed shares over the one recorded step: forward
/// 6.8 / 11, backward 12.4 / 17, optimizer 0.9 / 2.5, step 21.5 / 31.5.
inline traceml::run_result mixed_run_as_counted() {
  traceml::run_result r = mixed_run_edited(
      [](traceml::gpu_facts& f, const std::string& name) {
        f.counted_busy_ns = detail_mixed::ns(name == "forward"     ? 3.4
                                             : name == "backward"  ? 6.2
                                             : name == "optimizer" ? 0.9
                                                                   : 0.1);
      },
      [](traceml::gpu_facts& total) { total.counted_busy_ns = detail_mixed::ns(21.5); });
  r.summary.counted_interval_us = 100;
  r.summary.launch_engine_us = 1.5;
  return r;
}

/// mixed_run with work side by side on its recorded step (gpu_facts::own_ns, hidden_ns): each
/// backward micro-batch's own 6 ms with 0.2 ms of it beside other work, the optimizer's own 0.5 ms
/// with 0.2 ms beside other work (a side stream). Hand-computed hidden shares over the one recorded
/// step: backward 0.4 / 12 = 1/30, optimizer 0.2 / 0.5 = 0.4, forward 0 (own 3 per micro-batch).
inline traceml::run_result mixed_run_side_by_side() {
  return mixed_run_edited(
      [](traceml::gpu_facts& f, const std::string& name) {
        f.own_ns = f.busy_ns;
        if (name == "backward" || name == "optimizer") f.hidden_ns = detail_mixed::ns(0.2);
      },
      [](traceml::gpu_facts&) {});
}

/// mixed_run with its recorded step's idle time split by kind (gpu/idle_split.hpp) and copies:
/// each forward micro-batch's 2.5 ms idle as 1.5 host, 0.5 kernel gaps, 0.5 other; each backward's
/// 2.5 as 2 host, 0.5 kernel gaps; the optimizer's 2 all host; each dataloader's 0.5 as 0.1 host,
/// 0.4 other, with 0.2 ms of copies in its window. Per recorded step: forward 3 / 1 / 1 ms.
inline traceml::run_result mixed_run_idle_split() {
  return mixed_run_edited(
      [](traceml::gpu_facts& f, const std::string& name) {
        using detail_mixed::ns;
        const double host = name == "forward" ? 1.5 : name == "backward" ? 2.0 : name == "optimizer" ? 2.0 : 0.1;
        const double gaps = name == "forward" || name == "backward" ? 0.5 : 0.0;
        f.idle_host_ns = ns(host);
        f.idle_kernel_gap_ns = ns(gaps);
        f.idle_other_ns = f.idle_ns - f.idle_host_ns - f.idle_kernel_gap_ns;
        if (name == "dataloader") f.copy_busy_ns = ns(0.2);
      },
      [](traceml::gpu_facts& total) { total.idle_host_ns = total.idle_ns; });
}

}  // namespace traceml_test
