// The second translation unit of the ODR check (see test_two_tu_a.cpp).
#include <traceml/traceml.hpp>

#include "test_two_tu.hpp"

namespace two_tu_b {

const void* recorder_address() { return &traceml::detail::recorder(); }
const void* ring_slot_address() { return &traceml::detail::tls_ring; }
const void* diagnostics_address() { return &traceml::detail::diagnostics(); }

void record_phases(int count) {
  for (int i = 0; i < count; ++i) {
    TRACEML_PHASE_NAMED("from_b");
  }
}

void report(const char* message) { traceml::report_once(message, message); }

}  // namespace two_tu_b
