// Functions defined in translation units built in other modes (see test_mixed_modes.cpp).
#pragma once
namespace mixed_modes {
void record_compiled_out();  // built with TRACEML_DISABLE
bool compiled_out_enabled();
void record_without_nvtx();  // built with TRACEML_NO_NVTX
}  // namespace mixed_modes
