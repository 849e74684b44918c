// traceml: RAII scopes for steps, micro-batches and phases. The header a trainer includes.
//
//   #include <traceml/phase.hpp>
//   for (...) {
//     TRACEML_STEP();                                   // one optimizer update
//     for (int m = 0; m < accumulation; ++m) {
//       TRACEML_MICROBATCH();
//       { TRACEML_PHASE(dataloader); batch = next(); }
//       { TRACEML_PHASE(forward);    loss = model(batch); }
//       { TRACEML_PHASE(backward);   loss.backward(); }
//     }
//     { TRACEML_PHASE(optimizer); opt.step(); opt.zero_grad(); }
//   }
//
// Cost of one scope (enter + exit, recording on, NVTX headers present and no tool attached): two
// clock reads, two NVTX no-op calls and one ring write; benchmarks/scope_cost.cpp measures it.
// Everything compiles to nothing under TRACEML_DISABLE; set_enabled(false) turns it off at run time.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "traceml/config.hpp"
#include "traceml/detail/name_table.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/record.hpp"
#if TRACEML_ENABLED
#include "traceml/detail/recorder.hpp"
#else
TRACEML_BEGIN_NAMESPACE
TRACEML_BEGIN_MODE_NAMESPACE
inline void set_enabled(bool) noexcept {}
inline bool enabled() noexcept { return false; }
inline void mark_epoch() noexcept {}
TRACEML_END_MODE_NAMESPACE
TRACEML_END_NAMESPACE
#endif

TRACEML_BEGIN_NAMESPACE

/// Tag types for the built-in kinds. A user phase is any type with a `static constexpr const char*
/// name` (and optionally a `kind`), in the manner of NVTX3 domains:
///
///   struct tokenize { static constexpr const char* name = "tokenize"; };
///   traceml::scoped_phase<tokenize> s;
namespace phase {
struct step {
  static constexpr phase_kind kind = phase_kind::step;
  static constexpr const char* name = "step";
};
struct microbatch {
  static constexpr phase_kind kind = phase_kind::microbatch;
  static constexpr const char* name = "microbatch";
};
struct dataloader {
  static constexpr phase_kind kind = phase_kind::dataloader;
  static constexpr const char* name = "dataloader";
};
struct forward {
  static constexpr phase_kind kind = phase_kind::forward;
  static constexpr const char* name = "forward";
};
struct backward {
  static constexpr phase_kind kind = phase_kind::backward;
  static constexpr const char* name = "backward";
};
struct optimizer {
  static constexpr phase_kind kind = phase_kind::optimizer;
  static constexpr const char* name = "optimizer";
};
struct communication {
  static constexpr phase_kind kind = phase_kind::communication;
  static constexpr const char* name = "communication";
};
}  // namespace phase

namespace detail {
template <class Tag, class = void>
struct tag_kind {
  static constexpr phase_kind value = phase_kind::user;
};
template <class Tag>
struct tag_kind<Tag, decltype(void(Tag::kind))> {
  static constexpr phase_kind value = Tag::kind;
};
}  // namespace detail

/// A phase name given at run time, as named_phase and TRACEML_PHASE_NAMED take any name that is not
/// a string literal: a `const char*` (up to its NUL), a std::string or a std::string_view (its
/// size() bytes). A view only, valid while the scope's constructor runs: the scope copies the text
/// into the process-lifetime name table (detail/name_table.hpp) before it returns, so the string
/// may be freed or overwritten as soon as the scope is open.
class runtime_phase_name {
 public:
  runtime_phase_name(const char* s) noexcept : data_(s), size_(s ? unknown_size : 0) {}
  runtime_phase_name(const std::string& s) noexcept : data_(s.data()), size_(s.size()) {}
  runtime_phase_name(std::string_view s) noexcept : data_(s.data()), size_(s.size()) {}
  const char* data() const noexcept { return data_; }
  /// The bytes of the name (a strlen for a `const char*`, done only here: not when compiled out).
  std::size_t size() const noexcept { return size_ != unknown_size ? size_ : std::strlen(data_); }

 private:
  static constexpr std::size_t unknown_size = static_cast<std::size_t>(-1);
  const char* data_;
  std::size_t size_;
};

#if TRACEML_ENABLED
namespace detail {
/// Said once per process: a run-time phase name was null or empty, and its scope records nothing
/// (a record without a name would be a phase nobody can find). Cold (stderr).
inline void report_unusable_phase_name(bool null) noexcept {
  static std::atomic<bool> said{false};
  if (!said.exchange(true, std::memory_order_relaxed))
    std::fprintf(stderr,
                 "traceml: a phase with a%s name was ignored (named_phase and TRACEML_PHASE_NAMED need a "
                 "non-empty string)\n",
                 null ? " null" : "n empty");
}

/// A phase name must be a non-empty string: a null or empty one makes the scope record nothing.
inline bool usable_phase_name(const char* name) noexcept {
  if (name && *name) return true;
  report_unusable_phase_name(!name);
  return false;
}

/// The name a scope given a run-time name records: the name table's copy of its text (the same
/// pointer for the same text) and its kind, or a null text when the name is null or empty (said
/// once) or memory ran out (said once). Cost: detail::intern_phase_name's (a hash of the text and,
/// for a text this thread used lately, one compare: no lock, no allocation; otherwise a lock, and
/// the first time an allocation) plus a strlen for a `const char*`.
inline interned_name kept_phase_name(runtime_phase_name name) noexcept {
  if (!name.data()) {
    report_unusable_phase_name(true);
    return {};
  }
  const std::size_t n = name.size();
  if (n == 0) {
    report_unusable_phase_name(false);
    return {};
  }
  return intern_phase_name(name.data(), n);
}
}  // namespace detail
#endif

TRACEML_BEGIN_MODE_NAMESPACE

/// Base of every scope: noexcept, not copyable, not movable, not allocatable on the heap (a scope
/// that outlived its block would record a lie).
class scope_guard_base {
 public:
  scope_guard_base(const scope_guard_base&) = delete;
  scope_guard_base& operator=(const scope_guard_base&) = delete;
  scope_guard_base(scope_guard_base&&) = delete;
  scope_guard_base& operator=(scope_guard_base&&) = delete;
  static void* operator new(std::size_t) = delete;
  static void* operator new[](std::size_t) = delete;

 protected:
  scope_guard_base() noexcept = default;
  ~scope_guard_base() = default;
#if TRACEML_ENABLED
  detail::open_span span_;
#endif
};

/// Records the enclosing block as a phase of kind `Tag::kind` (user when absent) named `Tag::name`.
///   { traceml::scoped_phase<traceml::phase::forward> f; logits = model(x); }
template <class Tag>
class scoped_phase : public scope_guard_base {
 public:
  static constexpr phase_kind kind = detail::tag_kind<Tag>::value;
#if TRACEML_ENABLED
  scoped_phase() noexcept { detail::begin_span(span_, kind, Tag::name); }
  ~scoped_phase() { detail::end_span(span_); }
#else
  scoped_phase() noexcept {}
  ~scoped_phase() {}
#endif
};

/// One optimizer update. Steps are numbered 0, 1, ... per profiler run.
using scoped_step = scoped_phase<phase::step>;
/// One forward+backward inside a step. Numbered 0, 1, ... inside each step.
using scoped_microbatch = scoped_phase<phase::microbatch>;

/// A phase named at run time. A built-in name ("forward", ...) gives that kind; anything else is a
/// user phase.
///   { traceml::named_phase p("tokenize"); ... }                                  // kept as is
///   { traceml::named_phase p(std::string("layer_") + std::to_string(i)); ... }   // copied once
/// A string literal is kept by address, at no cost beyond a scope's (so is any `const char` array,
/// which must then live as long as a literal). Any other name (a `const char*`, std::string,
/// std::string_view, a writable char buffer) is copied into the process-lifetime name table, once
/// per distinct text, so that it may be freed or overwritten while the scope is open or before the
/// profiler reads it; the scope then costs a hash of the text and one compare more (no lock, no
/// allocation for a text this thread used lately: detail/name_table.hpp; about 10 ns on an x86
/// server for names up to 32 bytes). With recording switched off (set_enabled(false)) nothing is
/// copied.
class named_phase : public scope_guard_base {
 public:
#if TRACEML_ENABLED
  template <std::size_t N>
  explicit named_phase(const char (&name)[N]) noexcept {
    if (detail::usable_phase_name(name)) detail::begin_span(span_, phase_kind_from_name(name), name);
  }
  template <std::size_t N>
  named_phase(phase_kind kind, const char (&name)[N]) noexcept {
    if (detail::usable_phase_name(name)) detail::begin_span(span_, kind, name);
  }
  /// A writable buffer may change before the step ends: copied, as any run-time name.
  template <std::size_t N>
  explicit named_phase(char (&name)[N]) noexcept : named_phase(runtime_phase_name(static_cast<const char*>(name))) {}
  template <std::size_t N>
  named_phase(phase_kind kind, char (&name)[N]) noexcept
      : named_phase(kind, runtime_phase_name(static_cast<const char*>(name))) {}
  explicit named_phase(runtime_phase_name name) noexcept {
    if (!detail::recorder().enabled.load(std::memory_order_relaxed)) return;  // off: nothing copied
    const detail::interned_name kept = detail::kept_phase_name(name);
    if (kept.text) detail::begin_span(span_, kept.kind, kept.text);
  }
  named_phase(phase_kind kind, runtime_phase_name name) noexcept {
    if (!detail::recorder().enabled.load(std::memory_order_relaxed)) return;
    const detail::interned_name kept = detail::kept_phase_name(name);
    if (kept.text) detail::begin_span(span_, kind, kept.text);
  }
  ~named_phase() { detail::end_span(span_); }
#else
  template <std::size_t N>
  explicit named_phase(const char (&)[N]) noexcept {}
  template <std::size_t N>
  named_phase(phase_kind, const char (&)[N]) noexcept {}
  template <std::size_t N>
  explicit named_phase(char (&)[N]) noexcept {}
  template <std::size_t N>
  named_phase(phase_kind, char (&)[N]) noexcept {}
  explicit named_phase(runtime_phase_name) noexcept {}
  named_phase(phase_kind, runtime_phase_name) noexcept {}
  ~named_phase() {}
#endif
};

TRACEML_END_MODE_NAMESPACE
TRACEML_END_NAMESPACE

#if TRACEML_ENABLED
/// One-line forms. Arguments are not evaluated at all under TRACEML_DISABLE.
#define TRACEML_STEP() ::traceml::scoped_step TRACEML_CONCAT(traceml_scope_, __COUNTER__)
#define TRACEML_MICROBATCH() ::traceml::scoped_microbatch TRACEML_CONCAT(traceml_scope_, __COUNTER__)
/// TRACEML_PHASE(forward): a built-in phase (dataloader, forward, backward, optimizer, communication).
#define TRACEML_PHASE(builtin) \
  ::traceml::scoped_phase<::traceml::phase::builtin> TRACEML_CONCAT(traceml_scope_, __COUNTER__)
/// TRACEML_PHASE_TAG(my_tag): a phase named by a tag type.
#define TRACEML_PHASE_TAG(tag) ::traceml::scoped_phase<tag> TRACEML_CONCAT(traceml_scope_, __COUNTER__)
/// TRACEML_PHASE_NAMED("tokenize"): a phase named by a string: a literal is kept as is, any other
/// string (std::string, string_view, const char*) is copied once per distinct text (named_phase).
/// Braces: TRACEML_PHASE_NAMED(std::string(s)) declares a scope, not a function.
#define TRACEML_PHASE_NAMED(name) \
  ::traceml::named_phase TRACEML_CONCAT(traceml_scope_, __COUNTER__) { name }
/// TRACEML_EPOCH(): an epoch boundary here (traceml::mark_epoch()), between two epochs' steps.
#define TRACEML_EPOCH() ::traceml::mark_epoch()
#else
#define TRACEML_STEP() static_cast<void>(0)
#define TRACEML_MICROBATCH() static_cast<void>(0)
#define TRACEML_PHASE(builtin) static_cast<void>(0)
#define TRACEML_PHASE_TAG(tag) static_cast<void>(0)
#define TRACEML_PHASE_NAMED(name) static_cast<void>(0)
#define TRACEML_EPOCH() static_cast<void>(0)
#endif

// traceml::steps(loader): the loop's own range-based for as the steps (steps.hpp).
#include "traceml/steps.hpp"
