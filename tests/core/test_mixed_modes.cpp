// One program, translation units built in different modes (enabled with NVTX, enabled without,
// compiled out). Each TU must keep its own behaviour, and the enabled ones must share one recorder.
// Built at -O0 so that scope constructors are real out-of-line calls the linker could mix up.
#include <catch2/catch.hpp>

#include <traceml/traceml.hpp>

#include "test_mixed_modes.hpp"

namespace {
std::size_t drain_count() {
  std::size_t n = 0;
  traceml::detail::drain_all([&](const traceml::span_record&) { ++n; });
  return n;
}
}  // namespace

TEST_CASE("translation units in different modes keep their own behaviour", "[odr]") {
  traceml::set_enabled(true);
  drain_count();
  { TRACEML_PHASE(forward); }
  CHECK(drain_count() == 1);

  mixed_modes::record_compiled_out();
  CHECK(drain_count() == 0);
  CHECK_FALSE(mixed_modes::compiled_out_enabled());

  mixed_modes::record_without_nvtx();
  CHECK(drain_count() == 1);  // the same recorder as this TU's
  CHECK(traceml::enabled());

  { TRACEML_PHASE(backward); }
  CHECK(drain_count() == 1);
}
