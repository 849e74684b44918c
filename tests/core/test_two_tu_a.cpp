// One definition rule: the library included from two translation units of one program must share
// one recorder, one per-thread ring, one diagnostics log; records from both land in one run.
#include <catch2/catch.hpp>
#include <string>

#include <traceml/traceml.hpp>

#include "test_two_tu.hpp"

TEST_CASE("two translation units share the recorder, the thread's ring and the diagnostics", "[odr]") {
  CHECK(two_tu_b::recorder_address() == &traceml::detail::recorder());
  { TRACEML_PHASE(forward); }  // give this thread its ring from this TU...
  two_tu_b::record_phases(1);  // ...and use it from the other
  CHECK(two_tu_b::ring_slot_address() == &traceml::detail::tls_ring);
  CHECK(two_tu_b::diagnostics_address() == &traceml::detail::diagnostics());

  traceml::reset_diagnostics(true);
  two_tu_b::report("raised in the other translation unit");
  const auto messages = traceml::diagnostic_messages();
  REQUIRE(messages.size() == 1);
  CHECK(messages[0] == "raised in the other translation unit");
  traceml::reset_diagnostics(false);
}

TEST_CASE("records from both translation units land in one profiler run", "[odr]") {
  traceml::profiler_options opts;
  opts.print_table = false;
  opts.warmup_steps = 0;
  traceml::profiler prof(opts);
  for (int s = 0; s < 3; ++s) {
    TRACEML_STEP();
    { TRACEML_PHASE(forward); }
    two_tu_b::record_phases(2);
  }
  const traceml::run_result& r = prof.finish();
  REQUIRE(r.steps.size() == 3);
  for (int s = 0; s < 3; ++s) {
    const auto& st = r.steps[static_cast<std::size_t>(s)];
    CHECK(st.step == s);
    const auto* forward = st.find(traceml::phase_kind::forward, "forward");
    const auto* from_b = st.find(traceml::phase_kind::user, "from_b");
    REQUIRE(forward != nullptr);
    REQUIRE(from_b != nullptr);
    CHECK(forward->count == 1);
    CHECK(from_b->count == 2);
  }
}
