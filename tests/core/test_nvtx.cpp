// NVTX ranges, checked on the CPU: the test injection library (nvtx_injection.cpp), loaded by NVTX
// from NVTX_INJECTION64_PATH, records every call the core makes. Without it these tests fail rather
// than pass vacuously.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <traceml/traceml.hpp>

#include "nvtx_injection.hpp"

static_assert(TRACEML_HAS_NVTX, "test_nvtx must be built with the NVTX3 headers on the include path");

namespace {

using traceml_test::nvtx_call;
using traceml_test::nvtx_event;

// Every event recorded so far. The injection is looked up lazily: NVTX loads it at its first call.
std::vector<nvtx_event> all_events() {
  static traceml_test_nvtx_read_fn read = nullptr;
  if (!read) {
    const char* path = std::getenv("NVTX_INJECTION64_PATH");
    INFO("NVTX_INJECTION64_PATH must name the test injection library (ctest sets it)");
    REQUIRE(path != nullptr);
    void* lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);  // the copy NVTX loaded, not a second one
    INFO("NVTX did not load " << path);
    REQUIRE(lib != nullptr);
    read = reinterpret_cast<traceml_test_nvtx_read_fn>(dlsym(lib, "traceml_test_nvtx_read"));
    REQUIRE(read != nullptr);
  }
  std::vector<nvtx_event> events(static_cast<std::size_t>(read(nullptr, 0)) + 64);
  events.resize(static_cast<std::size_t>(read(events.data(), static_cast<int>(events.size()))));
  return events;
}

std::size_t event_count() {
  traceml::detail::nvtx_domain();  // make sure NVTX initialised (and loaded the injection)
  return all_events().size();
}

// "push forward cat=4 d=3", "push step cat=1 #0 d=1", "pop d=3": readable when a check fails.
std::string describe(const nvtx_event& e) {
  switch (e.call) {
    case nvtx_call::domain_create: return std::string("domain ") + e.domain;
    case nvtx_call::pop: return "pop d=" + std::to_string(e.depth);
    case nvtx_call::push: break;
  }
  std::string s = std::string("push ") + e.message + " cat=" + std::to_string(e.category);
  if (e.payload_type == NVTX_PAYLOAD_TYPE_INT32)
    s += " #" + std::to_string(e.payload);
  else if (e.payload_type != 0)
    s += " payload-type=" + std::to_string(e.payload_type);
  return s + " d=" + std::to_string(e.depth);
}

std::vector<std::string> described_since(std::size_t mark) {
  std::vector<std::string> out;
  const auto events = all_events();
  for (std::size_t i = mark; i < events.size(); ++i) out.push_back(describe(events[i]));
  return out;
}

traceml::profiler_options quiet_options() {
  traceml::profiler_options o;
  o.print_table = false;
  o.warmup_steps = 0;
  return o;
}

struct tokenize {
  static constexpr const char* name = "tokenize";
};

}  // namespace

TEST_CASE("scopes open NVTX ranges named after their phases, steps and micro-batches carry their index", "[nvtx]") {
  traceml::profiler prof(quiet_options());  // numbers steps from 0
  const std::size_t mark = event_count();
  for (int s = 0; s < 2; ++s) {
    TRACEML_STEP();
    for (int m = 0; m < 2; ++m) {
      TRACEML_MICROBATCH();
      { TRACEML_PHASE(forward); }
      {
        TRACEML_PHASE(backward);
        { TRACEML_PHASE(communication); }
      }
    }
    { TRACEML_PHASE(optimizer); }
  }
  prof.finish();

  std::vector<std::string> expected;
  for (int s = 0; s < 2; ++s) {
    expected.push_back("push step cat=1 #" + std::to_string(s) + " d=1");
    for (int m = 0; m < 2; ++m) {
      expected.push_back("push microbatch cat=2 #" + std::to_string(m) + " d=2");
      expected.insert(expected.end(), {"push forward cat=4 d=3", "pop d=3", "push backward cat=5 d=3",
                                       "push communication cat=7 d=4", "pop d=4", "pop d=3", "pop d=2"});
    }
    expected.insert(expected.end(), {"push optimizer cat=6 d=2", "pop d=2", "pop d=1"});
  }
  CHECK(described_since(mark) == expected);
}

TEST_CASE("every range lives in one 'traceml' domain, created once", "[nvtx]") {
  { TRACEML_PHASE(forward); }
  { TRACEML_PHASE(backward); }
  int created = 0;
  int pushes = 0, pops = 0;
  for (const auto& e : all_events()) {
    if (e.call == nvtx_call::domain_create) {
      ++created;
      CHECK(std::string(e.domain) == "traceml");
    } else {
      CHECK(std::string(e.domain) == "traceml");
      (e.call == nvtx_call::push ? pushes : pops) += 1;
    }
  }
  CHECK(created == 1);
  CHECK(pushes == pops);  // every range closed
  CHECK(pushes >= 2);
}

TEST_CASE("tag-type and run-time-named phases use their names, user phases get the user category", "[nvtx]") {
  const std::size_t mark = event_count();
  { traceml::scoped_phase<tokenize> t; }
  { TRACEML_PHASE_NAMED("forward"); }  // a built-in name gives the built-in kind
  { TRACEML_PHASE_NAMED("sampler"); }
  { traceml::named_phase p(traceml::phase_kind::dataloader, "prefetch"); }
  CHECK(described_since(mark) == std::vector<std::string>{"push tokenize cat=8 d=1", "pop d=1",
                                                          "push forward cat=4 d=1", "pop d=1", "push sampler cat=8 d=1",
                                                          "pop d=1", "push prefetch cat=3 d=1", "pop d=1"});
}

TEST_CASE("recording switched off at run time opens no range, and never leaves one open", "[nvtx]") {
  const std::size_t mark = event_count();
  SECTION("a scope opened while off") {
    traceml::set_enabled(false);
    { TRACEML_PHASE(forward); }
    traceml::set_enabled(true);
    CHECK(described_since(mark).empty());
  }
  SECTION("a scope opened while on and closed while off still closes its range") {
    {
      TRACEML_PHASE(forward);
      traceml::set_enabled(false);
    }
    traceml::set_enabled(true);
    CHECK(described_since(mark) == std::vector<std::string>{"push forward cat=4 d=1", "pop d=1"});
  }
}

TEST_CASE("trainer hooks open the same ranges as scopes", "[nvtx]") {
  traceml::profiler prof(quiet_options());
  traceml::callback_list hooks;
  hooks.add(prof);
  const std::size_t mark = event_count();
  hooks.on_train_begin();
  hooks.on_step_begin();
  hooks.on_microbatch_begin();
  hooks.on_phase_begin(traceml::phase_kind::forward);
  hooks.on_phase_end(traceml::phase_kind::forward);
  hooks.on_microbatch_end();
  hooks.on_phase_begin(traceml::phase_kind::user, "clip");
  hooks.on_phase_end(traceml::phase_kind::user, "clip");
  hooks.on_step_end();
  hooks.on_train_end();
  CHECK(described_since(mark) == std::vector<std::string>{"push step cat=1 #0 d=1", "push microbatch cat=2 #0 d=2",
                                                          "push forward cat=4 d=3", "pop d=3", "pop d=2",
                                                          "push clip cat=8 d=2", "pop d=2", "pop d=1"});
}

TEST_CASE("hooks left open at the end of training close their ranges", "[nvtx]") {
  traceml::reset_diagnostics(true);  // the unbalanced hooks are reported; keep stderr clean
  traceml::profiler prof(quiet_options());
  traceml::callback_list hooks;
  hooks.add(prof);
  const std::size_t mark = event_count();
  hooks.on_step_begin();
  hooks.on_phase_begin(traceml::phase_kind::forward);
  hooks.on_train_end();
  CHECK(described_since(mark) ==
        std::vector<std::string>{"push step cat=1 #0 d=1", "push forward cat=4 d=2", "pop d=2", "pop d=1"});
  traceml::reset_diagnostics(false);
}

TEST_CASE("ranges nest per thread", "[nvtx]") {
  const std::size_t mark = event_count();
  {
    TRACEML_PHASE(forward);
    std::thread worker([] { TRACEML_PHASE(dataloader); });
    worker.join();
  }
  const auto events = all_events();
  REQUIRE(events.size() == mark + 4);
  const nvtx_event& outer = events[mark];
  const nvtx_event& inner = events[mark + 1];
  CHECK(std::string(inner.message) == "dataloader");
  CHECK(inner.depth == 1);  // not nested inside the main thread's forward
  CHECK(inner.thread != outer.thread);
  CHECK(events[mark + 2].thread == inner.thread);
  CHECK(events[mark + 3].thread == outer.thread);
}
