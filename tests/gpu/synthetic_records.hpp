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

/// A span record of `step` [b, e): a step's own (micro-batch -1) or a phase of micro-batch 0.
inline traceml::span_record span_of(traceml::phase_kind k, const char* name, std::int32_t step, std::int64_t b,
                                    std::int64_t e) {
  traceml::span_record s;
  s.kind = k;
  s.name = name;
  s.step = step;
  s.microbatch = k == traceml::phase_kind::step ? -1 : 0;
  s.begin_ns = b;
  s.end_ns = e;
  return s;
}

}  // namespace traceml_test
