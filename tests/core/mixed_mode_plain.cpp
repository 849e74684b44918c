// Built with TRACEML_NO_NVTX (see test_mixed_modes.cpp).
#include <traceml/traceml.hpp>

#include "test_mixed_modes.hpp"

void mixed_modes::record_without_nvtx() { TRACEML_PHASE(forward); }
