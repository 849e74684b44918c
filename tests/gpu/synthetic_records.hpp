// Synthetic GPU activity for the CPU tests of attribution and the attribution stage.
#pragma once
#include <cstdint>

#include "traceml/gpu/activity.hpp"

namespace traceml_test {

/// A kernel record [b, e) on `stream` of device 0.
inline traceml::gpu_record kernel_record(const char* name, std::int64_t b, std::int64_t e, std::uint32_t stream) {
  traceml::gpu_record r;
  r.what = traceml::gpu_activity::type::kernel;
  r.begin_ns = b;
  r.end_ns = e;
  r.stream = stream;
  r.name = name;
  return r;
}

}  // namespace traceml_test
