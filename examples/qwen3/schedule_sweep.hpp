// qwen3/schedule_sweep.hpp: `qwen3_accumulation --sweep N`, traceml's schedule sweep
// (traceml/sweep.hpp) over this trainer. Every MxA with M x A = N is probed for memory from the
// largest micro-batch down, the largest that fit are measured in interleaved rounds, and the sweep
// ranks them and recommends one with its reason and confidence.
//
//   qwen3::sweep_setup s;
//   s.trainer = {...};  s.effective_batch = 8;
//   auto r = qwen3::run_schedule_sweep(s, data);
//   std::fputs(traceml::format_sweep(r).c_str(), stdout);
//   auto results = qwen3::sweep_schedule_results(r);   // for compare_schedules (MFU, failed schedules)
//
// Every trial builds its trainer afresh (trainer.hpp) from the same seed and reads the same
// examples, so only the schedule differs; LibTorch's out-of-memory errors are recognised, and the
// caching allocator is emptied after every trial (traceml/torch_adapter.hpp).
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <traceml/gpu/gpu_source.hpp>
#include <traceml/sinks/live_view.hpp>
#include <traceml/sinks/sweep_report.hpp>
#include <traceml/sweep.hpp>
#include <traceml/torch_adapter.hpp>

#include "comparison.hpp"
#include "data.hpp"
#include "experiment_report.hpp"
#include "schedule.hpp"
#include "train_loop.hpp"
#include "trainer.hpp"

namespace qwen3 {

struct sweep_setup {
  trainer_setup trainer;
  std::int64_t effective_batch = 4;
  std::size_t steps = 20, warmup = 5, repeats = 3;
  std::size_t probe_steps = 2;     ///< steps of each fit probe
  std::size_t max_candidates = 4;  ///< the largest micro-batches that fit are measured; 0: all
  std::string out = ".";           ///< accumulation_steps_<schedule>.jsonl; trace_<schedule>.json of round 1
  bool traces = true;
  std::vector<std::pair<std::string, std::string>> config;  ///< echoed into every run (model, dtype, ...)
  /// A GPU time source for each trial (null: CPU timing only).
  std::function<std::unique_ptr<traceml::gpu_source>()> gpu_source;
};

/// The schedules of `--sweep N`: every MxA of N, the largest micro-batch first. Throws
/// std::invalid_argument for N outside 1..max_examples_per_step.
inline std::vector<schedule> sweep_schedules(std::int64_t effective_batch) {
  if (effective_batch < 1 || effective_batch > max_examples_per_step)
    throw std::invalid_argument("--sweep " + std::to_string(effective_batch) + ": the effective batch must be 1.." +
                                std::to_string(max_examples_per_step));
  std::vector<schedule> out;
  for (const auto& s : traceml::factorisations(effective_batch)) out.push_back({s.micro_batch, s.accumulation});
  return out;
}

/// "[sweep] 4x2#1: median step 72.0 ms over 15 steps" / "... out of memory: CUDA out of memory. ..."
inline void print_trial(const traceml::sweep_trial& t, const traceml::sweep_trial_outcome& out) {
  if (out.run) {
    const auto& s = out.run->summary;
    if (t.probe)
      std::fprintf(stderr, "[sweep] %s: fits (%zu steps)\n", t.name.c_str(), s.steps);
    else
      std::fprintf(stderr, "[sweep] %s: median step %.1f ms over %zu steps\n", t.name.c_str(), s.step_ms.median,
                   s.step_ms.count);
    return;
  }
  std::fprintf(stderr, "[sweep] %s: %s: %s\n", t.name.c_str(), traceml::to_string(out.status), out.error.c_str());
}

/// The sweep over this trainer (see the file comment). Throws std::invalid_argument for a setup
/// that cannot make a sweep; anything a trial throws is a result in the returned table.
inline traceml::sweep_result run_schedule_sweep(const sweep_setup& s, const token_source& data) {
  traceml::sweep_options o;
  o.effective_batch = s.effective_batch;
  o.steps = s.steps;
  o.warmup = s.warmup;
  o.repeats = s.repeats;
  o.probe_steps = s.probe_steps;
  o.max_candidates = s.max_candidates;
  o.is_out_of_memory = traceml::libtorch::is_out_of_memory;
  o.release_memory = [] { traceml::libtorch::release_cached_memory(); };
  o.device_memory_bytes = s.trainer.device.is_cuda() ? traceml::libtorch::device_memory_bytes() : -1;
  o.on_trial = print_trial;
  o.configure = [&](const traceml::sweep_trial& t, traceml::profiler_options& po) {
    const auto examples = static_cast<double>(t.schedule.effective_batch());
    po.tokens_per_step = examples * static_cast<double>(s.trainer.seq_len);
    po.samples_per_step = examples;
    po.live = !t.probe && traceml::stderr_is_terminal();  // the live view on a terminal, else the [sweep] lines
    po.config = s.config;
    po.config.insert(po.config.end(), {{"schedule", t.schedule.name()},
                                       {"micro_batch", std::to_string(t.schedule.micro_batch)},
                                       {"accumulation", std::to_string(t.schedule.accumulation)},
                                       {"repeat", t.probe ? std::string("probe") : std::to_string(t.repeat + 1)}});
    if (t.probe) return;  // a probe writes nothing: it only asks whether the schedule fits
    // Each repeat its own per-step file, named as the experiment's (files::steps), so none overwrites another.
    po.jsonl_path =
        s.out + "/" + files::steps(t.schedule.name(), static_cast<int>(t.repeat), static_cast<int>(s.repeats));
    if (s.traces && t.repeat == 0) po.trace_path = s.out + "/" + files::trace(t.schedule.name());
  };
  return traceml::sweep(o, [&](const traceml::sweep_trial& t, traceml::profiler& prof) {
    const schedule sched{t.schedule.micro_batch, t.schedule.accumulation};
    auto tr = make_trainer(s.trainer, data, sched);
    // Model construction must not be billed to the first step (a CPU-GPU sync point).
    if (s.trainer.device.is_cuda()) traceml::libtorch::synchronize();
    if (s.gpu_source) prof.set_gpu_source(s.gpu_source());
    traceml::callback_list callbacks;
    callbacks.add(prof);
    train_options to;
    to.sched = sched;
    to.steps = static_cast<std::int64_t>(t.steps);
    to.sync_each_step = true;  // each step's wall time holds its own GPU work, as in the experiment
    to.graphs = tr.graphs.get();
    to.scaler = tr.scaler.get();
    (void)train(*tr.model, tr.opt, data, to, callbacks);
  });
}

/// The sweep's candidates as the experiment's schedule results (compare_schedules: the detailed
/// table with MFU, the JSON comparison): ranked ones with their runs, in rank order, then those out
/// of memory ("OOM: ...") or failed; candidates not measured are left out.
inline std::vector<schedule_result> sweep_schedule_results(const traceml::sweep_result& r) {
  std::vector<schedule_result> out;
  for (const auto& c : r.candidates) {
    if (c.ranked())
      out.push_back({c.name(), c.runs, ""});
    else if (c.status == traceml::sweep_status::out_of_memory)
      out.push_back({c.name(), {}, "OOM: " + c.note});
    else if (c.status != traceml::sweep_status::not_measured)
      out.push_back({c.name(), {}, c.note});
  }
  return out;
}

}  // namespace qwen3
