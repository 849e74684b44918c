// Compile-time guarantees of the scope types, checked in the enabled and the compiled-out build
// (this file is built into both): construction cannot throw, a scope cannot be copied, moved or
// put on the heap (a scope that outlives its block would record a lie).
#include <catch2/catch.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <traceml/phase.hpp>

namespace {

struct tokenize {
  // Read by a scope's constructor, which these compile-time checks never instantiate.
  [[maybe_unused]] static constexpr const char* name = "tokenize";
};

// True when `new T(args...)` (or `new T[2]` for default-constructible T) is well-formed.
template <class Void, class T, class... Args>
struct heap_allocatable_impl : std::false_type {};
template <class T, class... Args>
struct heap_allocatable_impl<std::void_t<decltype(new T(std::declval<Args>()...))>, T, Args...> : std::true_type {};
template <class T, class... Args>
constexpr bool heap_allocatable = heap_allocatable_impl<void, T, Args...>::value;
template <class T, class = void>
struct heap_array_allocatable : std::false_type {};
template <class T>
struct heap_array_allocatable<T, std::void_t<decltype(new T[2])>> : std::true_type {};

// Not copyable, not movable, not on the heap; `Args` construct one.
template <class Scope, class... Args>
constexpr bool pinned_to_its_block() {
  static_assert(std::is_constructible_v<Scope, Args...>, "the check below would be vacuous");
  return !std::is_copy_constructible_v<Scope> && !std::is_copy_assignable_v<Scope> &&
         !std::is_move_constructible_v<Scope> && !std::is_move_assignable_v<Scope> &&
         !heap_allocatable<Scope, Args...> && !heap_array_allocatable<Scope>::value;
}

static_assert(std::is_nothrow_default_constructible_v<traceml::scoped_step>);
static_assert(std::is_nothrow_default_constructible_v<traceml::scoped_microbatch>);
static_assert(std::is_nothrow_default_constructible_v<traceml::scoped_phase<traceml::phase::forward>>);
static_assert(std::is_nothrow_default_constructible_v<traceml::scoped_phase<tokenize>>);
static_assert(std::is_nothrow_constructible_v<traceml::named_phase, const char*>);
static_assert(std::is_nothrow_constructible_v<traceml::named_phase, traceml::phase_kind, const char*>);
// Names built at run time: copied into the name table, so any string type will do.
static_assert(std::is_nothrow_constructible_v<traceml::named_phase, std::string>);
static_assert(std::is_nothrow_constructible_v<traceml::named_phase, const std::string&>);
static_assert(std::is_nothrow_constructible_v<traceml::named_phase, std::string_view>);
static_assert(std::is_nothrow_constructible_v<traceml::named_phase, char (&)[16]>);
static_assert(std::is_nothrow_constructible_v<traceml::named_phase, const char (&)[9]>);
static_assert(std::is_nothrow_constructible_v<traceml::named_phase, traceml::phase_kind, std::string>);
static_assert(std::is_nothrow_destructible_v<traceml::scoped_phase<traceml::phase::forward>>);
static_assert(std::is_nothrow_destructible_v<traceml::named_phase>);

// A named phase takes its name explicitly: no silent conversion from a string.
static_assert(!std::is_convertible_v<const char*, traceml::named_phase>);
static_assert(!std::is_convertible_v<std::string, traceml::named_phase>);

static_assert(pinned_to_its_block<traceml::scoped_step>());
static_assert(pinned_to_its_block<traceml::scoped_microbatch>());
static_assert(pinned_to_its_block<traceml::scoped_phase<traceml::phase::optimizer>>());
static_assert(pinned_to_its_block<traceml::scoped_phase<tokenize>>());
static_assert(pinned_to_its_block<traceml::named_phase, const char*>());
static_assert(pinned_to_its_block<traceml::named_phase, traceml::phase_kind, const char*>());

// Kinds come from the tag, user when the tag has none.
static_assert(traceml::scoped_step::kind == traceml::phase_kind::step);
static_assert(traceml::scoped_microbatch::kind == traceml::phase_kind::microbatch);
static_assert(traceml::scoped_phase<traceml::phase::dataloader>::kind == traceml::phase_kind::dataloader);
static_assert(traceml::scoped_phase<tokenize>::kind == traceml::phase_kind::user);

// The vocabulary is usable at compile time.
static_assert(traceml::to_string(traceml::phase_kind::backward)[0] == 'b');
static_assert(!traceml::is_phase(traceml::phase_kind::step) && traceml::is_phase(traceml::phase_kind::user));

}  // namespace

TEST_CASE("scope type traits hold (checked at compile time)", "[traits]") {
  SUCCEED((TRACEML_ENABLED ? "enabled build" : "compiled-out build"));
}
