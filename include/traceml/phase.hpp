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

#include "traceml/config.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/record.hpp"
#if TRACEML_ENABLED
#include "traceml/detail/recorder.hpp"
#else
TRACEML_BEGIN_NAMESPACE
TRACEML_BEGIN_MODE_NAMESPACE
inline void set_enabled(bool) noexcept {}
inline bool enabled() noexcept { return false; }
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
struct step { static constexpr phase_kind kind = phase_kind::step; static constexpr const char* name = "step"; };
struct microbatch { static constexpr phase_kind kind = phase_kind::microbatch; static constexpr const char* name = "microbatch"; };
struct dataloader { static constexpr phase_kind kind = phase_kind::dataloader; static constexpr const char* name = "dataloader"; };
struct forward { static constexpr phase_kind kind = phase_kind::forward; static constexpr const char* name = "forward"; };
struct backward { static constexpr phase_kind kind = phase_kind::backward; static constexpr const char* name = "backward"; };
struct optimizer { static constexpr phase_kind kind = phase_kind::optimizer; static constexpr const char* name = "optimizer"; };
struct communication { static constexpr phase_kind kind = phase_kind::communication; static constexpr const char* name = "communication"; };
}  // namespace phase

namespace detail {
template <class Tag, class = void>
struct tag_kind { static constexpr phase_kind value = phase_kind::user; };
template <class Tag>
struct tag_kind<Tag, decltype(void(Tag::kind))> { static constexpr phase_kind value = Tag::kind; };
}  // namespace detail

#if TRACEML_ENABLED
namespace detail {
/// A run-time phase name must be a non-empty string: a null or empty one makes the scope record
/// nothing (a record without a name would be a phase nobody can find), said once per process.
inline bool usable_phase_name(const char* name) noexcept {
  if (name && *name) return true;
  static std::atomic<bool> said{false};
  if (!said.exchange(true, std::memory_order_relaxed))
    std::fprintf(stderr, "traceml: a phase with a%s name was ignored (named_phase and TRACEML_PHASE_NAMED need a "
                 "non-empty string that outlives the profiler)\n", name ? "n empty" : " null");
  return false;
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

/// A phase named at run time. `name` must outlive the profiler (a string literal, or intern()).
/// A built-in name ("forward", ...) gives that kind; anything else is a user phase.
///   { traceml::named_phase p("tokenize"); ... }
class named_phase : public scope_guard_base {
 public:
#if TRACEML_ENABLED
  explicit named_phase(const char* name) noexcept {
    if (detail::usable_phase_name(name)) detail::begin_span(span_, phase_kind_from_name(name), name);
  }
  named_phase(phase_kind kind, const char* name) noexcept {
    if (detail::usable_phase_name(name)) detail::begin_span(span_, kind, name);
  }
  ~named_phase() { detail::end_span(span_); }
#else
  explicit named_phase(const char*) noexcept {}
  named_phase(phase_kind, const char*) noexcept {}
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
/// TRACEML_PHASE_NAMED("tokenize"): a phase named by a string with static storage.
#define TRACEML_PHASE_NAMED(name) ::traceml::named_phase TRACEML_CONCAT(traceml_scope_, __COUNTER__)(name)
#else
#define TRACEML_STEP() static_cast<void>(0)
#define TRACEML_MICROBATCH() static_cast<void>(0)
#define TRACEML_PHASE(builtin) static_cast<void>(0)
#define TRACEML_PHASE_TAG(tag) static_cast<void>(0)
#define TRACEML_PHASE_NAMED(name) static_cast<void>(0)
#endif
