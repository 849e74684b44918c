// Phase names given at run time: a scope or a hook given a name whose storage is freed (and
// overwritten) before the step ends still records the right name, because such names are copied
// into the process-lifetime name table; string literals are kept by address. Run under
// AddressSanitizer by scripts/sanitize.sh: the freed storage would otherwise be read at the step's
// end (heap-use-after-free).
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <traceml/traceml.hpp>

#include "test_helpers.hpp"

using namespace traceml;
using traceml_test::drain;
using traceml_test::reset_recorder;
using traceml_test::temp_path;

namespace {

/// Allocates and fills blocks of every small size, so that storage just freed is handed out again
/// and overwritten (a name read from it afterwards would read 'X's, or ASan reports it).
void overwrite_freed_heap() {
  std::vector<std::unique_ptr<char[]>> blocks;
  for (std::size_t size = 1; size <= 128; ++size)
    for (int k = 0; k < 4; ++k) {
      blocks.emplace_back(new char[size]);
      std::memset(blocks.back().get(), 'X', size);
    }
}

/// A name past any small-string buffer, so that it lives on the heap.
std::string long_name(const std::string& stem, int i) {
  return stem + "_" + std::to_string(i) + "_with_a_suffix_past_the_small_string_buffer";
}

}  // namespace

TEST_CASE("names given at run time survive their storage", "[names][profiler]") {
  reset_recorder();
  const std::string trace = temp_path("phase_names_trace.json");
  profiler_options opts;
  opts.print_table = false;
  opts.warmup_steps = 0;
  opts.trace_path = trace;  // the trace reads the names at finish(), long after the steps
  profiler prof(opts);
  recording_callback& hooks = prof;
  constexpr int steps = 3, layers = 4;
  for (int s = 0; s < steps; ++s) {
    TRACEML_STEP();
    for (int i = 0; i < layers; ++i) {
      // The c_str() of a temporary: freed as soon as the scope is open.
      TRACEML_PHASE_NAMED(std::string(long_name("layer", i)).c_str());
      overwrite_freed_heap();
    }
    {
      TRACEML_PHASE_NAMED(std::string("by_value_") + std::to_string(s % 2) + "_and_a_long_tail_past_sso");
      overwrite_freed_heap();
    }
    {
      auto owner = std::make_unique<std::string>(long_name("view", 0));
      named_phase p(phase_kind::backward, std::string_view(*owner));  // a built-in kind, its own name
      owner.reset();
      overwrite_freed_heap();
    }
    {
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "buffer_%d", 7);
      TRACEML_PHASE_NAMED(buffer);  // a writable buffer: copied, not kept by address
      std::snprintf(buffer, sizeof buffer, "XXXXXXXXXXXX");
    }
    {
      // A trainer hook given a name that goes away before the hook closes (and the step ends).
      auto owner = std::make_unique<std::string>(long_name("hook", 1));
      hooks.on_phase_begin(phase_kind::user, owner->c_str());
      const std::string again = *owner;  // the end hook gets another pointer to the same text
      owner.reset();
      overwrite_freed_heap();
      hooks.on_phase_end(phase_kind::user, again.c_str());
    }
  }
  const run_result& r = prof.finish();
  for (const auto& m : diagnostic_messages()) CHECK(m.find("hook") == std::string::npos);  // no hook taken for a misuse

  REQUIRE(r.steps.size() == steps);
  for (const auto& st : r.steps) {
    INFO("step " << st.step);
    std::map<std::string, int> counts;
    for (const auto& p : st.phases) counts[p.name] += p.count;
    for (int i = 0; i < layers; ++i) CHECK(counts[long_name("layer", i)] == 1);
    CHECK(counts[std::string("by_value_") + std::to_string(st.step % 2) + "_and_a_long_tail_past_sso"] == 1);
    CHECK(counts["buffer_7"] == 1);
    CHECK(counts[long_name("hook", 1)] == 1);
    REQUIRE(st.find(phase_kind::backward, long_name("view", 0)) != nullptr);
    CHECK(counts.size() == static_cast<std::size_t>(layers) + 4);  // nothing else, no 'X' name
  }
  std::ifstream in(trace);
  const auto doc = nlohmann::json::parse(in);
  std::multiset<std::string> names;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X") names.insert(e.at("name").get<std::string>());
  CHECK(names.count(long_name("layer", 3)) == steps);
  CHECK(names.count(long_name("hook", 1)) == steps);
  CHECK(names.count("buffer_7") == steps);
  for (const auto& n : names) CHECK(n.find("XXX") == std::string::npos);
  std::remove(trace.c_str());
}

TEST_CASE("literal names are kept by address, run-time names by content", "[names]") {
  reset_recorder();
  static const char literal[] = "tokenize_literal";
  const char* pointer = literal;  // the same text, given as a pointer: copied once
  const std::string owned = "tokenize_literal";
  {
    named_phase a(literal);
    named_phase b(pointer);
    named_phase c(owned);
    TRACEML_PHASE_NAMED(std::string_view(owned));
  }
  const auto recs = drain();
  REQUIRE(recs.size() == 4);
  // Records arrive in closing order: the macro's scope, c, b, a.
  CHECK(recs[3].name == literal);
  const char* kept = intern("tokenize_literal");
  CHECK(kept != literal);
  CHECK(std::string(kept) == "tokenize_literal");
  CHECK(recs[2].name == kept);
  CHECK(recs[1].name == kept);
  CHECK(recs[0].name == kept);
  // The same text on another thread (another cache) is the same copy; other text is another one.
  const char* elsewhere = nullptr;
  std::thread([&] { elsewhere = intern(std::string("tokenize_") + "literal"); }).join();
  CHECK(elsewhere == kept);
  CHECK(intern("tokenize_other") != kept);
  // A built-in name given at run time gives its kind, as a literal does.
  { named_phase f(std::string("forward")); }
  const auto fwd = drain();
  REQUIRE(fwd.size() == 1);
  CHECK(fwd[0].kind == phase_kind::forward);
}

TEST_CASE("empty and null run-time names record nothing and are said once", "[names]") {
  reset_recorder();
  {
    named_phase a(std::string{});
    named_phase b(static_cast<const char*>(nullptr));
    named_phase c(std::string_view{});
  }
  CHECK(drain().empty());
}

TEST_CASE("switched off, a run-time name is not copied", "[names]") {
  reset_recorder();
  const std::size_t before = [] {
    auto& t = detail::interned_names();
    detail::lock_guard lock(t.mu);
    return t.names.size();
  }();
  set_enabled(false);
  { TRACEML_PHASE_NAMED(std::string("never_interned_while_off")); }
  set_enabled(true);
  auto& t = detail::interned_names();
  detail::lock_guard lock(t.mu);
  CHECK(t.names.size() == before);
  CHECK(t.index.count("never_interned_while_off") == 0);
}
