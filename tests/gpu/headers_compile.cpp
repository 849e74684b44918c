// The CUDA sources must degrade, never crash: without a device the factory returns nullptr and
// says so once; the sources report why they are off. With a device, the factory picks CUPTI.
#include <cstdio>
#include <string>

#include "traceml/gpu/source_factory.hpp"
#include "traceml/gpu/pm_sampling_source.hpp"

#include "expect.hpp"

int main() {
  traceml::reset_diagnostics(true);
  const bool have_device = traceml::check_cuda_device().ok();
  if (!have_device) {
    EXPECT(traceml::make_best_gpu_source() == nullptr);
    EXPECT(traceml::make_best_gpu_source() == nullptr);
    // Every source says the same why (no driver, an old one, no device: test_no_driver.cpp).
    const std::string why = traceml::check_cuda_device().why;
    EXPECT(!why.empty());
    const auto msgs = traceml::diagnostic_messages();
    EXPECT(msgs.size() == 1);  // said once, however often asked
    EXPECT(msgs[0] == "GPU timing off: " + why + "; phases are timed on the CPU");
    traceml::cupti_source c;
    EXPECT(!c.ok());
    EXPECT(c.status() == "kernel attribution off: " + why);
    EXPECT(!c.wants_scope_hooks());
    EXPECT(c.collect(true).steps.empty());
    traceml::cuda_events_source e;
    EXPECT(!e.ok());
    EXPECT(e.status() == "GPU timing off: " + why);
    EXPECT(e.collect(true).steps.empty());
    traceml::event_timer t(4);
    EXPECT(!t.ok());
    EXPECT(t.record(nullptr) == nullptr);
    EXPECT(traceml::diagnostic_messages().size() == 1);  // the sources said nothing more
    // Hardware counters: unavailable with the same why, said once; the inner source is untouched.
    traceml::pm_sampler ps;
    EXPECT(!ps.start());
    EXPECT(ps.why() == "hardware counters (CUPTI PM sampling) unavailable: " + why);
    EXPECT(!ps.running());
    EXPECT(ps.take().empty());
    traceml::pm_sampling_source pm(std::make_unique<traceml::cuda_events_source>());
    EXPECT(!pm.sampling());
    EXPECT(std::string(pm.name()) == "cuda-events+pm");
    EXPECT(pm.status() == "GPU timing off: " + why + "; " + ps.why());
    EXPECT(!pm.wants_scope_hooks());
    EXPECT(pm.collect(true).steps.empty());
    const auto after = traceml::diagnostic_messages();
    EXPECT(after.size() == 2);
    EXPECT(after.back() == ps.why() + "; running without hardware counters");
    traceml::gpu_clock clock(4);
    EXPECT(clock.stamp(nullptr) == -1);
    std::printf("no CUDA device: sources degrade as documented\n");
    return 0;
  }
  auto s = traceml::make_best_gpu_source();
  EXPECT(s != nullptr);
  std::printf("GPU source: %s (%s)\n", s->name(), s->status().c_str());
  // CUPTI, with the hardware counters on top where the GPU allows them ("cupti+pm").
  EXPECT(std::string(s->name()).rfind("cupti", 0) == 0);
  EXPECT(s->status().find("CUDA-event phase timing on every step") != std::string::npos);
  return 0;
}
