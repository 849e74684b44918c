// The trainer-callback path allocates nothing: a whole step of hooks (step, micro-batches, built-in
// and user phases, with and without an observer such as the profiler's GPU hooks), run after a
// warm-up, under a global operator new that counts. Its own executable, because replacing operator
// new is program-wide.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>

#include <traceml/callback.hpp>

#include "hook_step.hpp"

namespace {
std::atomic<std::size_t> allocations{0};

void* counted_alloc(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void* operator new(std::size_t n, std::align_val_t a) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace traceml;

namespace {

// Counts the hot observer calls; allocates nothing itself.
struct counting_observer : recorder_observer {
  std::size_t begins = 0, ends = 0, steps = 0;
  void on_scope_begin(phase_kind, const char*, std::int32_t, std::int32_t) noexcept override { ++begins; }
  void on_scope_end(const span_record&) noexcept override { ++ends; }
  void on_step_end(const span_record&) noexcept override { ++steps; }
};

// A user callback that does nothing: the list still makes one virtual call per hook to it.
struct quiet_callback : callback {};

std::size_t drain_count() {
  std::size_t n = 0;
  detail::drain_all([&](const span_record&) { ++n; });
  return n;
}

// One step of a 2-micro-batch schedule through the hooks: 12 records. `attention` is a user phase
// name whose end hook gets another pointer to the same text (a strcmp, not a pointer compare).
void one_step(callback_list& cbs, const char* attention_begin, const char* attention_end) {
  traceml_test::hook_step(cbs, attention_begin, attention_end, /*dataloader=*/true);
}

}  // namespace

TEST_CASE("the allocation counter sees allocations", "[callbacks][alloc]") {
  const std::size_t before = allocations.load();
  std::string s(200, 'x');  // past any small-string buffer
  CHECK(allocations.load() > before);
  CHECK(s.size() == 200);
}

TEST_CASE("trainer-callback hooks allocate nothing after warm-up", "[callbacks][alloc]") {
  set_enabled(true);
  reset_diagnostics(/*quiet=*/true);
  auto& R = detail::recorder();
  R.step.store(-1);
  R.microbatch.store(-1);
  drain_count();

  recording_callback rec;
  quiet_callback user;
  callback_list cbs;
  cbs.add(user);
  cbs.add(rec);
  // Two pointers to one text, as when a name is interned in one place and spelled in another.
  static const char attention_a[] = "attention";
  static const char attention_b[] = "attention";
  REQUIRE(static_cast<const void*>(attention_a) != static_cast<const void*>(attention_b));

  counting_observer obs;
  const bool observed = GENERATE(false, true);
  CAPTURE(observed);
  R.observer.store(observed ? &obs : nullptr);
  R.observe_phases.store(observed);

  cbs.on_train_begin();
  one_step(cbs, attention_a, attention_b);  // warm-up: this thread's ring is allocated here
  drain_count();

  constexpr int steps = 500;  // 6000 records: well inside one ring, so nothing is dropped
  const std::size_t before = allocations.load();
  for (int s = 0; s < steps; ++s) one_step(cbs, attention_a, attention_b);
  const std::size_t during = allocations.load() - before;
  cbs.on_train_end();

  R.observe_phases.store(false);
  R.observer.store(nullptr);
  CHECK(during == 0);
  CHECK(drain_count() == static_cast<std::size_t>(steps) * 12);  // the hooks did record
  CHECK(diagnostic_messages().empty());
  if (observed) {
    CHECK(obs.begins == static_cast<std::size_t>(steps + 1) * 12);
    CHECK(obs.ends == obs.begins);
    CHECK(obs.steps == static_cast<std::size_t>(steps + 1));
  }
}

TEST_CASE("a misused hook may allocate to say so, and the path after it is clean again", "[callbacks][alloc]") {
  set_enabled(true);
  reset_diagnostics(/*quiet=*/true);
  drain_count();
  recording_callback rec;
  callback_list cbs;
  cbs.add(rec);
  cbs.on_step_begin();
  cbs.on_phase_end(phase_kind::forward);  // nothing of that name open: reported, ignored
  cbs.on_step_end();
  REQUIRE(diagnostic_messages().size() == 1);
  CHECK(diagnostic_messages()[0].find("on_phase_end(forward)") != std::string::npos);

  const std::size_t before = allocations.load();
  for (int s = 0; s < 100; ++s) {
    cbs.on_step_begin();
    cbs.on_phase_begin(phase_kind::forward);
    cbs.on_phase_end(phase_kind::forward);
    cbs.on_step_end();
  }
  CHECK(allocations.load() - before == 0);
  CHECK(drain_count() == 1 + 100 * 2);
}
