// traceml: the seam where GPU time sources (CUPTI kernel records, CUDA events) plug into the
// profiler. A source only measures: it delivers raw per-step activity (gpu/activity.hpp) and the
// profiler turns it into reports in one place (gpu/attribution_stage.hpp). The profiler owns at most
// one source; callers never talk to it directly, so switching from CPU timing to CUDA events to
// CUPTI changes no user code.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/activity.hpp"
#include "traceml/gpu/attribution_io.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE

/// A GPU time source. Hooks marked hot run inside scopes; the rest run once per step.
class gpu_source {
 public:
  virtual ~gpu_source() = default;
  /// Short identifier: "cupti", "cuda-events".
  virtual const char* name() const noexcept = 0;
  /// Whether on_scope_begin/on_scope_end must be called (they cost a virtual call per scope).
  virtual bool wants_scope_hooks() const noexcept { return false; }
  /// Hot: a scope opened on the calling thread.
  virtual void on_scope_begin(phase_kind, const char* /*name*/, std::int32_t /*step*/,
                              std::int32_t /*microbatch*/) noexcept {}
  /// Hot: whether the step begun last gets GPU event timing (a source may time one step in N when
  /// its events would cost short steps too much: event_sampling.hpp). Asked after on_scope_begin.
  virtual bool step_timed() const noexcept { return true; }
  /// Hot: a scope closed.
  virtual void on_scope_end(const span_record&) noexcept {}
  /// Training thread, as a step's scope closes, before the next step begins: take what belongs to
  /// this instant (the step's recording decision, a memory sample). Keep it cheap: it is the only
  /// per-step call a source gets on the training thread besides the scope hooks.
  virtual void step_closed(const span_record& /*step*/) noexcept {}
  /// A step ended; `spans` holds all its CPU records (the step, its micro-batches and phases).
  /// Called after step_closed(), on the profiler's step worker: later steps may have begun since.
  virtual void step_ended(std::int32_t step, const std::vector<span_record>& spans) = 0;
  /// Raw activity: the steps whose GPU data is complete (in step order, each once) and the records
  /// and marker times that arrived since the last call. With `final` (end of run) every step that
  /// ended is delivered, synchronizing with the device if it must.
  virtual gpu_delivery collect(bool final) = 0;
  /// One line for humans: what is measured, or why it is not (e.g. "kernel attribution off:
  /// CUPTI already in use by another tool (Nsight Systems?); using CUDA events").
  virtual std::string status() const = 0;
  /// What it takes to set kernel records beside this source's hardware counters
  /// (attribution_options::counted); not modelled without counters.
  virtual records_as_counted counter_view() const noexcept { return {}; }
  /// The profiler's step worker: the CPU the attribution worker spent on this source's kernel records
  /// since the last call. A source that budgets its recordings charges it to them.
  virtual void charge_processing(std::int64_t /*cpu_ns*/) noexcept {}
  /// The table its records' names point into (gpu_record::name), which the run's outputs keep past
  /// the source; null when its names are static or it names nothing.
  virtual std::shared_ptr<const kernel_name_table> kernel_names() const noexcept { return nullptr; }
};

namespace detail {
/// Why this process has no GPU source, in the words a run's gpu.status gives (the reason and the
/// fix: no NVIDIA driver, no device, a build without traceml::cupti); empty while none was refused.
/// Set where the source is chosen (make_best_gpu_source, the TRACEML_OUT session) and read by a
/// profiler that ends with no source, so that its outputs say why rather than only how to attach one.
struct no_gpu_source_note {
  detail::mutex mu;
  std::string status TRACEML_GUARDED_BY(mu);
};
inline no_gpu_source_note& no_gpu_source_reason() {
  static no_gpu_source_note& note = *new no_gpu_source_note;  // never destroyed: read at exit
  return note;
}
inline void note_no_gpu_source(const std::string& status) {
  auto& n = no_gpu_source_reason();
  detail::lock_guard lock(n.mu);
  n.status = status;
}
inline std::string noted_no_gpu_source() {
  auto& n = no_gpu_source_reason();
  detail::lock_guard lock(n.mu);
  return n.status;
}
}  // namespace detail

/// For a program that itself chooses to attach no GPU source (it trains on the CPU, or GPU timing is
/// switched off): every output's gpu status then gives this reason, rather than how to attach a
/// source. Say what was chosen and how to change it, e.g. "the device is the CPU (--device cpu)".
inline void say_why_no_gpu_source(const std::string& reason) { detail::note_no_gpu_source(reason); }

TRACEML_END_NAMESPACE
