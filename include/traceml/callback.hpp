// traceml: the trainer-callback way in. A trainer calls hooks on a callback_list; the profiler is one
// callback among the user's own. Records made through hooks are identical to those made by scopes.
//
//   traceml::callback_list callbacks;
//   callbacks.add(profiler);              // any traceml::callback, held by reference
//   callbacks.on_train_begin();
//   for (...) {
//     callbacks.on_step_begin();
//     callbacks.on_phase_begin(traceml::phase_kind::forward); ...;
//     callbacks.on_phase_end(traceml::phase_kind::forward); callbacks.on_step_end();
//   }
//   callbacks.on_train_end();
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/phase.hpp"

TRACEML_BEGIN_NAMESPACE

/// Base class with no-op hooks; override the ones you need. A `name` given to a phase hook need only
/// be valid during the call (recording_callback keeps a copy: traceml::intern()); a callback of your
/// own that keeps it must do the same. Hooks should not throw.
class callback {
 public:
  virtual ~callback() = default;
  virtual void on_train_begin() {}
  virtual void on_train_end() {}
  virtual void on_step_begin() {}
  virtual void on_step_end() {}
  virtual void on_microbatch_begin() {}
  virtual void on_microbatch_end() {}
  virtual void on_phase_begin(phase_kind /*kind*/, const char* /*name*/) {}
  virtual void on_phase_end(phase_kind /*kind*/, const char* /*name*/) {}
};

/// Calls every registered callback, in registration order for begin hooks and in reverse order for
/// end hooks (so callbacks nest like scopes). Callbacks are held by reference and must outlive it.
///
/// Cost of every hook: one virtual call per registered callback, plus what those callbacks do; the
/// list itself allocates nothing and takes no lock (add() is the only member that allocates).
class callback_list {
 public:
  /// Registers `cb` (allocates: call it before the loop, not inside it).
  void add(callback& cb) { callbacks_.push_back(&cb); }
  std::size_t size() const noexcept { return callbacks_.size(); }

  void on_train_begin() {
    forward_order([](callback& c) { c.on_train_begin(); });
  }
  void on_train_end() {
    reverse_order([](callback& c) { c.on_train_end(); });
  }
  void on_step_begin() {
    forward_order([](callback& c) { c.on_step_begin(); });
  }
  void on_step_end() {
    reverse_order([](callback& c) { c.on_step_end(); });
  }
  void on_microbatch_begin() {
    forward_order([](callback& c) { c.on_microbatch_begin(); });
  }
  void on_microbatch_end() {
    reverse_order([](callback& c) { c.on_microbatch_end(); });
  }
  /// `name` defaults to the kind's own name ("forward"); a name given need only be valid during the call.
  void on_phase_begin(phase_kind kind, const char* name = nullptr) {
    const char* n = name ? name : to_string(kind);
    forward_order([&](callback& c) { c.on_phase_begin(kind, n); });
  }
  void on_phase_end(phase_kind kind, const char* name = nullptr) {
    const char* n = name ? name : to_string(kind);
    reverse_order([&](callback& c) { c.on_phase_end(kind, n); });
  }

 private:
  template <class F>
  void forward_order(F&& f) {
    for (auto* c : callbacks_) f(*c);
  }
  template <class F>
  void reverse_order(F&& f) {
    for (auto it = callbacks_.rbegin(); it != callbacks_.rend(); ++it) f(**it);
  }
  std::vector<callback*> callbacks_;
};

#if TRACEML_ENABLED
namespace detail {
/// Scopes opened through hooks live here, per thread, until their end hook. Fixed size: no
/// allocation; deeper nesting is reported and ignored.
struct hook_stack {
  static constexpr int capacity = 32;
  open_span spans[capacity];
  int size = 0;
};
inline thread_local hook_stack tls_hooks;

TRACEML_BEGIN_MODE_NAMESPACE
inline const char* describe_open(const hook_stack& s) { return s.size ? s.spans[s.size - 1].name : "nothing"; }

/// Cold: a begin hook that may not open here (too deep, a step inside a scope, a micro-batch not
/// directly inside a step). Slow path (allocates).
inline void report_begin_misuse(phase_kind kind, const hook_stack& s) noexcept {
  if (s.size == hook_stack::capacity)
    report_once("hook-depth", "trainer hooks nested deeper than 32 levels; the extra begin hooks are ignored");
  else if (kind == phase_kind::step)
    report_once("hook-step-nested", std::string("on_step_begin() called while '") + describe_open(s) +
                                        "' is still open; hook ignored (close it first)");
  else
    report_once("hook-micro-outside", std::string("on_microbatch_begin() called while '") + describe_open(s) +
                                          "' is open (expected directly inside a step); hook ignored");
}

/// Cost: two compares and begin_span (the step counters, an NVTX push, a clock read) into the next
/// slot of this thread's fixed stack. Allocates only to report a misuse.
inline void hook_begin(phase_kind kind, const char* name) noexcept {
  auto& s = tls_hooks;
  const bool misuse = s.size == hook_stack::capacity || (kind == phase_kind::step && s.size > 0) ||
                      (kind == phase_kind::microbatch && (s.size == 0 || s.spans[s.size - 1].kind != phase_kind::step));
  if (misuse) {
    report_begin_misuse(kind, s);
    return;
  }
  begin_span(s.spans[s.size++], kind, name);
}

/// A name as a hook wrote it: the same pointer (string literals, tag names), else the same text.
inline bool same_name(const char* a, const char* b) noexcept {
  return a == b || (a != nullptr && b != nullptr && std::strcmp(a, b) == 0);
}

/// "on_phase_end(forward)" or "on_step_end()": how a misused end hook is named in diagnostics.
/// Slow path (allocates): only called to report a misuse.
inline std::string describe_end_hook(phase_kind kind, const char* name) {
  return is_phase(kind) ? std::string("on_phase_end(") + name + ")" : std::string("on_") + to_string(kind) + "_end()";
}

/// Cold: an end hook with nothing open on this thread.
inline void report_end_with_nothing_open(phase_kind kind, const char* name) noexcept {
  const std::string what = describe_end_hook(kind, name);
  report_once("hook-unbalanced-" + what, what + " called with nothing open; hook ignored");
}

/// Cold: an end hook that does not match the innermost open scope.
inline void report_end_out_of_order(phase_kind kind, const char* name, const open_span& top) noexcept {
  const std::string what = describe_end_hook(kind, name);
  report_once("hook-order-" + what,
              what + " called while '" + top.name + "' is the innermost open scope; hook ignored (hooks must nest)");
}

/// Cost when the hook matches the innermost open scope (the normal case): a pointer compare (or a
/// strcmp for names built at run time) and end_span (a clock read, one ring write). Allocates only
/// to report a misuse.
inline void hook_end(phase_kind kind, const char* name) noexcept {
  auto& s = tls_hooks;
  if (s.size == 0) {
    report_end_with_nothing_open(kind, name);
    return;
  }
  open_span& top = s.spans[s.size - 1];
  // A begin hook past the name table's bounds recorded too_many_names_label: its end matches by kind.
  if (top.kind != kind || !(same_name(top.name, name) || top.name == too_many_names_label)) {
    report_end_out_of_order(kind, name, top);
    return;
  }
  --s.size;
  end_span(top);
}

/// Discards every hook this thread left open (innermost first) without writing a record: the
/// phase depth, the open step and micro-batch and the NVTX ranges are put back as if they had never
/// opened, so that the next on_step_begin() opens a step again. Cost: nothing when none is open.
inline void hook_discard_thread() noexcept {
  auto& s = tls_hooks;
  while (s.size > 0) {
    open_span& top = s.spans[--s.size];
    if (is_phase(top.kind) && tls_phase_depth > 0) --tls_phase_depth;
    // An abandoned step: later phases must not count in it. (A step ignored for overlapping
    // another, inactive, never held the open step: begin_span.)
    if (top.kind == phase_kind::step && top.active) {
      recorder().step.store(-1, std::memory_order_relaxed);
      recorder().microbatch.store(-1, std::memory_order_relaxed);
    }
    if (top.active) nvtx_pop();
  }
}

inline void hook_reset_thread() noexcept {
  const auto& s = tls_hooks;
  if (s.size > 0)
    report_once("hook-left-open",
                std::string("on_train_end() with '") + describe_open(s) + "' still open; it is discarded");
  hook_discard_thread();
}
TRACEML_END_MODE_NAMESPACE
}  // namespace detail
#endif

TRACEML_BEGIN_MODE_NAMESPACE
/// A callback that turns hooks into records, exactly as scopes would. The profiler derives from it.
///
/// Cost: a begin hook costs what a scope's constructor does (a clock read, the step counters, an
/// NVTX push) plus a push onto a fixed per-thread stack; an end hook what a scope's destructor does
/// (a clock read, an NVTX pop, one ring write) plus a pointer compare with the innermost open hook
/// (a strcmp when the names are different pointers). No hook allocates or locks, except to report
/// a misuse once (the misuse is then ignored). Without a profiler attached that is all; with one,
/// its step end also collects the step (per step, not per phase: see profiler.hpp).
class recording_callback : public callback {
 public:
#if TRACEML_ENABLED
  /// After an exception escaped a step that hooks opened (an out-of-memory error inside forward):
  /// discards the step, micro-batch and phases this thread's hooks left open, writing no record, so
  /// that the next on_step_begin() opens a step again instead of being ignored as nested. Only the
  /// calling thread's hooks; RAII scopes need nothing (unwinding closes them). Then finish the run:
  /// a GPU source still holds the abandoned step's open boundaries, so measure again with a new
  /// profiler (a profiler destroyed by an exception calls this itself; traceml::sweep does both).
  /// Cost: nothing when no hook is open.
  void abandon_step() noexcept { detail::hook_discard_thread(); }
  /// Closes (and reports) whatever hooks this thread left open. Cost: nothing when all are closed.
  void on_train_end() override { detail::hook_reset_thread(); }
  /// Opens a step: as TRACEML_STEP()'s constructor, plus a stack push.
  void on_step_begin() override { detail::hook_begin(phase_kind::step, "step"); }
  /// Closes the step: as TRACEML_STEP()'s destructor (which notifies the profiler, if any).
  void on_step_end() override { detail::hook_end(phase_kind::step, "step"); }
  /// Opens a micro-batch: as TRACEML_MICROBATCH()'s constructor, plus a stack push.
  void on_microbatch_begin() override { detail::hook_begin(phase_kind::microbatch, "microbatch"); }
  /// Closes the micro-batch: as TRACEML_MICROBATCH()'s destructor.
  void on_microbatch_end() override { detail::hook_end(phase_kind::microbatch, "microbatch"); }
  /// Opens a phase: as a phase scope's constructor, plus a stack push. A name other than the kind's
  /// own (to_string(kind), which callback_list passes by default) is recorded as its copy in the
  /// name table, so that it may be freed once the hook returns: a hash of the text and one compare
  /// more (no lock, no allocation for a text this thread used lately; named_phase says the rest).
  void on_phase_begin(phase_kind kind, const char* name) override {
    if (!is_phase(kind)) {
      report_once("hook-phase-kind", "on_phase_begin() given a step/microbatch kind; use their own hooks");
      return;
    }
    const char* own = to_string(kind);
    const char* kept = !name || name == own ? own
                       : !*name             ? detail::empty_name
                                            : detail::intern_name(name, std::strlen(name));
    // Out of memory (said once): its end hook matches by kind, as past the table's bounds.
    detail::hook_begin(kind, kept ? kept : detail::too_many_names_label);
  }
  /// Closes a phase: as a phase scope's destructor, plus a name compare.
  void on_phase_end(phase_kind kind, const char* name) override {
    if (!is_phase(kind)) return;
    detail::hook_end(kind, name ? name : to_string(kind));
  }
#else
  void abandon_step() noexcept {}
#endif
};
TRACEML_END_MODE_NAMESPACE

TRACEML_END_NAMESPACE
