// Included from two translation units: every function in these headers must be inline.
#include "traceml/gpu/attribution.hpp"
#include "traceml/gpu/attribution_stage.hpp"
#include "traceml/gpu/kernel_name.hpp"
#include "traceml/gpu/recording_schedule.hpp"
#include "traceml/gpu/step_readiness.hpp"
std::size_t traceml_gpu_odr_a() {
  traceml::attribution_stage stage;
  std::vector<traceml::readiness_step> steps(1);
  return traceml::attribute({}).reports.size() + traceml::shorten_kernel_name("a").size() + stage.add({}).size() +
         traceml::ready_prefix(steps, {}, {}) +
         static_cast<std::size_t>(traceml::recording_schedule(0, 0, 1).at(0).cycle + 1);
}
