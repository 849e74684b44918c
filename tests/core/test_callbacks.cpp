// Trainer callbacks: the same records as scopes, ordered dispatch, clear diagnostics on misuse.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "hook_step.hpp"
#include "test_helpers.hpp"

using namespace traceml;
using traceml_test::drain;
using traceml_test::reset_recorder;

namespace {
// Everything about a record except its timestamps.
std::vector<std::string> shape(const std::vector<span_record>& recs) {
  std::vector<std::string> out;
  for (const auto& r : recs)
    out.push_back(std::string(to_string(r.kind)) + ":" + r.name + " s" + std::to_string(r.step) + " m" +
                  std::to_string(r.microbatch) + " n" + std::to_string(r.nesting) + " t" + std::to_string(r.thread));
  return out;
}

struct log_callback : callback {
  std::vector<std::string>& log;
  std::string id;
  log_callback(std::vector<std::string>& l, std::string i) : log(l), id(std::move(i)) {}
  void on_step_begin() override { log.push_back(id + " step_begin"); }
  void on_step_end() override { log.push_back(id + " step_end"); }
  void on_phase_begin(phase_kind, const char* name) override { log.push_back(id + " begin " + name); }
  void on_phase_end(phase_kind, const char* name) override { log.push_back(id + " end " + name); }
};
}  // namespace

TEST_CASE("hooks and scopes give identical records", "[callbacks]") {
  reset_recorder();
  for (int s = 0; s < 2; ++s) {
    TRACEML_STEP();
    for (int m = 0; m < 2; ++m) {
      TRACEML_MICROBATCH();
      {
        TRACEML_PHASE(forward);
        { TRACEML_PHASE_NAMED("attention"); }
      }
      { TRACEML_PHASE(backward); }
    }
    { TRACEML_PHASE(optimizer); }
  }
  const auto from_scopes = shape(drain());

  reset_recorder();
  recording_callback rec;
  callback_list cbs;
  cbs.add(rec);
  cbs.on_train_begin();
  for (int s = 0; s < 2; ++s) traceml_test::hook_step(cbs);
  cbs.on_train_end();
  const auto from_hooks = shape(drain());
  CHECK(from_hooks == from_scopes);
  CHECK(diagnostic_messages().empty());
}

TEST_CASE("abandon_step discards what an exception left open, and the next step pairs", "[callbacks]") {
  reset_recorder();
  recording_callback rec;
  callback_list cbs;
  cbs.add(rec);
  cbs.on_train_begin();
  cbs.on_step_begin();
  cbs.on_microbatch_begin();
  cbs.on_phase_begin(phase_kind::forward);  // an exception escapes here
  rec.abandon_step();
  CHECK(detail::tls_hooks.size == 0);
  CHECK(detail::tls_phase_depth == 0);
  CHECK(detail::recorder().step.load() == -1);
  CHECK(detail::recorder().microbatch.load() == -1);
  CHECK(drain().empty());  // nothing of the abandoned step is recorded

  traceml_test::hook_step(cbs);
  cbs.on_train_end();
  const auto after = shape(drain());
  reset_recorder();
  detail::recorder().next_step.store(1);  // the abandoned step took number 0
  traceml_test::hook_step(cbs);
  CHECK(after.size() == 10);       // step, optimizer, 2 x (micro-batch, forward, attention, backward)
  CHECK(after == shape(drain()));  // the same records as on a recorder that never saw the exception
  CHECK(diagnostic_messages().empty());
}

TEST_CASE("callback_list calls begin hooks in order and end hooks in reverse", "[callbacks]") {
  std::vector<std::string> log;
  log_callback a(log, "a"), b(log, "b");
  callback_list cbs;
  cbs.add(a);
  cbs.add(b);
  cbs.on_step_begin();
  cbs.on_phase_begin(phase_kind::forward);
  cbs.on_phase_end(phase_kind::forward);
  cbs.on_step_end();
  CHECK(log == std::vector<std::string>{"a step_begin", "b step_begin", "a begin forward", "b begin forward",
                                        "b end forward", "a end forward", "b step_end", "a step_end"});
}

TEST_CASE("misordered hooks give a clear diagnostic and no record", "[callbacks]") {
  reset_recorder();
  recording_callback rec;
  callback_list cbs;
  cbs.add(rec);

  SECTION("end of a phase that is not the innermost open one") {
    cbs.on_step_begin();
    cbs.on_phase_begin(phase_kind::forward);
    cbs.on_phase_end(phase_kind::backward);  // wrong: forward is open
    cbs.on_phase_end(phase_kind::forward);
    cbs.on_step_end();
    const auto msgs = diagnostic_messages();
    REQUIRE(msgs.size() == 1);
    CHECK(msgs[0].find("on_phase_end(backward)") != std::string::npos);
    CHECK(msgs[0].find("'forward'") != std::string::npos);
    const auto recs = shape(drain());
    CHECK(recs ==
          std::vector<std::string>{"forward:forward s0 m-1 n0 t" + std::to_string(detail::current_thread_index()),
                                   "step:step s0 m-1 n0 t" + std::to_string(detail::current_thread_index())});
  }
  SECTION("end with nothing open") {
    cbs.on_step_end();
    REQUIRE(diagnostic_messages().size() == 1);
    CHECK(diagnostic_messages()[0].find("nothing open") != std::string::npos);
    CHECK(drain().empty());
  }
  SECTION("a step begun inside a step") {
    cbs.on_step_begin();
    cbs.on_step_begin();
    REQUIRE(diagnostic_messages().size() == 1);
    CHECK(diagnostic_messages()[0].find("on_step_begin()") != std::string::npos);
    cbs.on_step_end();
    CHECK(drain().size() == 1);
  }
  SECTION("a micro-batch outside a step") {
    cbs.on_microbatch_begin();
    REQUIRE(diagnostic_messages().size() == 1);
    CHECK(diagnostic_messages()[0].find("on_microbatch_begin()") != std::string::npos);
  }
  SECTION("train end with scopes still open discards them and says so") {
    cbs.on_step_begin();
    cbs.on_phase_begin(phase_kind::forward);
    cbs.on_train_end();
    REQUIRE(diagnostic_messages().size() == 1);
    CHECK(diagnostic_messages()[0].find("still open") != std::string::npos);
    CHECK(drain().empty());
    // The thread is usable again afterwards.
    cbs.on_step_begin();
    cbs.on_step_end();
    CHECK(drain().size() == 1);
  }
  SECTION("the same misuse is reported once") {
    for (int i = 0; i < 5; ++i) cbs.on_step_end();
    CHECK(diagnostic_messages().size() == 1);
  }
}
