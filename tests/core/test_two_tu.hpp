// What test_two_tu_b.cpp offers test_two_tu_a.cpp: both include the whole library, so a header
// entity that is not inline (or an inline one that is not unique) breaks the link or the test.
#pragma once
#include <traceml/traceml.hpp>

namespace two_tu_b {
const void* recorder_address();
const void* ring_slot_address();  // this thread's ring pointer variable, as TU b sees it
const void* diagnostics_address();
void record_phases(int count);     // `count` phases named "from_b", in whatever step is open
void report(const char* message);  // a diagnostic raised in TU b
}  // namespace two_tu_b
