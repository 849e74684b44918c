// The compiled-out build (TRACEML_DISABLE): macros vanish without evaluating their arguments, the
// types and the profiler API stay so user code builds unchanged, and nothing is recorded.
#ifndef TRACEML_DISABLE
#error "test_disabled.cpp must be compiled with TRACEML_DISABLE"
#endif

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include <traceml/traceml.hpp>

static_assert(!TRACEML_ENABLED, "TRACEML_DISABLE must turn TRACEML_ENABLED off");
static_assert(!TRACEML_HAS_NVTX, "a disabled build must not emit NVTX ranges, even with the headers present");

namespace {
struct tokenize {
  [[maybe_unused]] static constexpr const char* name = "tokenize";
};

int counter = 0;
[[maybe_unused]] const char* counted_name() {  // only named inside compiled-out macros
  ++counter;
  return "counted";
}
}  // namespace

TEST_CASE("compiled-out macros never evaluate their arguments", "[disabled]") {
  counter = 0;
  {
    TRACEML_STEP();
    TRACEML_MICROBATCH();
    TRACEML_PHASE(forward);
    TRACEML_PHASE_TAG(tokenize);
    TRACEML_PHASE_NAMED((++counter, "x"));
    TRACEML_PHASE_NAMED(counted_name());
    TRACEML_PHASE_NAMED(std::string(counted_name()) + std::to_string(++counter));
  }
  CHECK(counter == 0);
}

TEST_CASE("compiled-out scopes and hooks still build, and the run switch reads off", "[disabled]") {
  {
    traceml::scoped_step step;
    traceml::scoped_microbatch micro;
    traceml::scoped_phase<traceml::phase::forward> forward;
    traceml::scoped_phase<tokenize> user;
    traceml::named_phase named("tokenize");
    traceml::named_phase kinded(traceml::phase_kind::backward, "backward");
    const std::string built = std::string("layer_") + std::to_string(3);
    traceml::named_phase from_string(built);
    traceml::named_phase from_view(traceml::phase_kind::forward, std::string_view(built));
    traceml::named_phase from_pointer(built.c_str());
    CHECK(std::string(traceml::intern(built)) == "layer_3");  // the table works in every build
  }
  // A disabled scope holds no state: it costs nothing on the stack either.
  static_assert(std::is_empty<traceml::scoped_phase<traceml::phase::forward>>::value);
  static_assert(std::is_empty<traceml::named_phase>::value);
  static_assert(traceml::scoped_phase<tokenize>::kind == traceml::phase_kind::user);

  traceml::set_enabled(true);
  CHECK_FALSE(traceml::enabled());
}

TEST_CASE("the compiled-out profiler API works and returns an empty result", "[disabled]") {
  traceml::profiler_options opts;
  opts.run_name = "disabled";
  opts.print_table = true;  // nothing to print: finish() must stay silent and write no file
  opts.json_path = "never-written.json";
  traceml::profiler prof(opts);
  prof.set_gpu_source(nullptr);
  CHECK(prof.gpu() == nullptr);
  CHECK(prof.options().run_name == "disabled");

  traceml::callback_list hooks;
  hooks.add(prof);
  hooks.on_train_begin();
  for (int s = 0; s < 3; ++s) {
    hooks.on_step_begin();
    hooks.on_microbatch_begin();
    hooks.on_phase_begin(traceml::phase_kind::forward);
    hooks.on_phase_end(traceml::phase_kind::forward);
    hooks.on_microbatch_end();
    hooks.on_step_end();
    TRACEML_STEP();
  }
  hooks.on_train_end();

  CHECK(prof.steps_recorded() == 0);
  const traceml::run_result& r = prof.finish();
  CHECK(r.steps.empty());
  CHECK(r.summary.steps == 0);
  CHECK(&prof.result() == &r);
}
