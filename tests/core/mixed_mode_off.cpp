// Built with TRACEML_DISABLE (see test_mixed_modes.cpp).
#include <traceml/traceml.hpp>

#include "test_mixed_modes.hpp"

void mixed_modes::record_compiled_out() { TRACEML_PHASE(forward); }
bool mixed_modes::compiled_out_enabled() { return traceml::enabled(); }
