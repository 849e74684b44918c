// traceml::steps(range): a range-based for whose iterations are the steps, each fetch timed as the
// dataloader phase of the step (or micro-batch) it feeds. Standard containers and a hand-written
// input range here; a torch::data loader in test_steps_torch.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "test_helpers.hpp"

using namespace traceml;
using traceml_test::drain;
using traceml_test::reset_recorder;
using traceml_test::spin_for;
using namespace std::chrono_literals;

namespace {
std::vector<span_record> of_kind(const std::vector<span_record>& records, phase_kind kind) {
  std::vector<span_record> out;
  for (const auto& r : records)
    if (r.kind == kind) out.push_back(r);
  return out;
}

/// An input range whose begin() and each increment take `fetch` of CPU time (a busy wait, so that
/// the time is close to what was asked on a loaded machine), as a data loader's fetch does.
/// `timed`, when given, gets each begin()'s and increment's own duration in ms (a fetch timed by hand).
struct slow_range {
  int size;
  std::chrono::microseconds fetch;
  std::vector<double>* timed = nullptr;
  struct sentinel {};
  struct iterator {
    const slow_range* r;
    int i;
    int operator*() const { return i; }
    iterator& operator++() {
      r->take_time();
      ++i;
      return *this;
    }
    bool operator!=(sentinel) const { return i < r->size; }
  };
  iterator begin() const {
    take_time();
    return {this, 0};
  }
  sentinel end() const { return {}; }
  void take_time() const {
    const auto t = std::chrono::steady_clock::now();
    spin_for(fetch);
    if (timed)
      timed->push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
};

/// Checks the common shape: `steps` step records numbered from 0, each dataloader record inside the
/// step (and micro-batch) it belongs to, and steps that follow one another.
void check_nesting(const std::vector<span_record>& records) {
  const auto steps = of_kind(records, phase_kind::step);
  for (const auto& d : of_kind(records, phase_kind::dataloader)) {
    REQUIRE(d.step >= 0);
    REQUIRE(static_cast<std::size_t>(d.step) < steps.size());
    const auto& s = steps[static_cast<std::size_t>(d.step)];
    CHECK(s.step == d.step);
    CHECK(d.begin_ns >= s.begin_ns);
    CHECK(d.end_ns <= s.end_ns);
    CHECK(d.end_ns >= d.begin_ns);
  }
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CHECK(steps[i].step == static_cast<std::int32_t>(i));
    if (i > 0) CHECK(steps[i].begin_ns >= steps[i - 1].end_ns);
  }
}
}  // namespace

TEST_CASE("steps over a vector: one step per element, each opening with its fetch as the dataloader phase", "[steps]") {
  reset_recorder();
  const std::vector<int> values{3, 1, 4, 1, 5};
  std::vector<int> seen;
  for (const int& v : traceml::steps(values)) {
    TRACEML_PHASE(forward);
    seen.push_back(v);
  }
  CHECK(seen == values);
  const auto records = drain();
  const auto steps = of_kind(records, phase_kind::step);
  const auto fetches = of_kind(records, phase_kind::dataloader);
  const auto forwards = of_kind(records, phase_kind::forward);
  REQUIRE(steps.size() == 5);
  REQUIRE(fetches.size() == 5);
  REQUIRE(forwards.size() == 5);
  CHECK(of_kind(records, phase_kind::microbatch).empty());
  check_nesting(records);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(fetches[i].step == static_cast<std::int32_t>(i));
    CHECK(fetches[i].begin_ns == steps[i].begin_ns);  // the step begins with its fetch
    CHECK(fetches[i].microbatch == -1);
    CHECK(forwards[i].step == static_cast<std::int32_t>(i));
    CHECK(forwards[i].begin_ns >= fetches[i].end_ns);
  }
  // The loop is over: no step stays open, and a scope step after it opens normally.
  CHECK(detail::recorder().step.load() == -1);
  { TRACEML_STEP(); }
  const auto after = of_kind(drain(), phase_kind::step);
  REQUIRE(after.size() == 1);
  CHECK(after[0].step == 5);
}

TEST_CASE("steps over a temporary range keep it alive for the loop", "[steps]") {
  reset_recorder();
  int sum = 0;
  for (int v : traceml::steps(std::vector<int>{10, 20, 30})) sum += v;
  CHECK(sum == 60);
  CHECK(of_kind(drain(), phase_kind::step).size() == 3);
}

TEST_CASE("steps over an empty range record nothing", "[steps]") {
  reset_recorder();
  const std::vector<int> none;
  int n = 0;
  for (int v : traceml::steps(none)) n += v + 1;
  CHECK(n == 0);
  CHECK(drain().empty());
  CHECK(detail::recorder().step.load() == -1);
}

TEST_CASE("steps with accumulation: one step per N batches, each fetch in its own micro-batch", "[steps]") {
  reset_recorder();
  const std::vector<int> values{0, 1, 2, 3, 4, 5, 6};
  int n = 0;
  for (int v : traceml::steps(values, 3)) {
    CHECK(v == n);
    ++n;
    TRACEML_PHASE(forward);
  }
  CHECK(n == 7);
  const auto records = drain();
  const auto steps = of_kind(records, phase_kind::step);
  const auto micros = of_kind(records, phase_kind::microbatch);
  const auto fetches = of_kind(records, phase_kind::dataloader);
  REQUIRE(steps.size() == 3);  // 3 + 3 + 1: the range ended inside the last step
  REQUIRE(micros.size() == 7);
  REQUIRE(fetches.size() == 7);
  check_nesting(records);
  const std::int32_t step_of[] = {0, 0, 0, 1, 1, 1, 2};
  const std::int32_t micro_of[] = {0, 1, 2, 0, 1, 2, 0};
  for (std::size_t i = 0; i < 7; ++i) {
    CHECK(fetches[i].step == step_of[i]);
    CHECK(fetches[i].microbatch == micro_of[i]);
    CHECK(micros[i].step == step_of[i]);
    CHECK(micros[i].microbatch == micro_of[i]);
    CHECK(fetches[i].begin_ns == micros[i].begin_ns);  // the micro-batch begins with its fetch
    CHECK(fetches[i].end_ns <= micros[i].end_ns);
  }
  CHECK(steps[1].begin_ns == fetches[3].begin_ns);
  CHECK_THROWS_AS(traceml::steps(values, 0), std::invalid_argument);
}

TEST_CASE("steps end on break and on an exception, and the next loop numbers on", "[steps]") {
  reset_recorder();
  const std::vector<int> values(10, 1);
  SECTION("break") {
    int n = 0;
    for (int v : traceml::steps(values)) {
      n += v;
      if (n == 4) break;
    }
    CHECK(detail::recorder().step.load() == -1);  // the fourth step ended at the break
    const auto records = drain();
    CHECK(of_kind(records, phase_kind::step).size() == 4);
    CHECK(of_kind(records, phase_kind::dataloader).size() == 4);
    check_nesting(records);
  }
  SECTION("an exception") {
    int n = 0;
    try {
      for (int v : traceml::steps(values, 2)) {
        TRACEML_PHASE(forward);
        n += v;
        if (n == 5) throw std::runtime_error("out of memory");
      }
      FAIL("no exception");
    } catch (const std::runtime_error&) {
    }
    CHECK(detail::recorder().step.load() == -1);
    CHECK(detail::recorder().microbatch.load() == -1);
    const auto records = drain();
    CHECK(of_kind(records, phase_kind::step).size() == 3);  // batches 0-1, 2-3, and 4 when it threw
    CHECK(of_kind(records, phase_kind::microbatch).size() == 5);
    CHECK(of_kind(records, phase_kind::forward).size() == 5);
    check_nesting(records);
  }
  // A second loop after either: its steps are numbered on, each whole.
  int m = 0;
  for (int v : traceml::steps(values)) m += v;
  CHECK(m == 10);
  const auto steps = of_kind(drain(), phase_kind::step);
  REQUIRE(steps.size() == 10);
  CHECK(steps.front().step > 0);
}

TEST_CASE("steps time a slow fetch as the dataloader phase, and the profiler sees one step per batch", "[steps]") {
  reset_recorder();
  profiler_options o;
  o.run_name = "steps";
  o.print_table = false;
  o.warmup_steps = 0;
  profiler prof(o);
  std::vector<double> fetches;  // each begin() and increment, timed by hand inside them
  const slow_range loader{8, 2000us, &fetches};
  // And from outside: from the end of one iteration's body to the start of the next (the first from
  // before the loop), which holds the fetch and the previous step's end.
  using clock = std::chrono::steady_clock;
  std::vector<double> by_hand;
  int n = 0;
  auto body_end = clock::now();
  for (int v : traceml::steps(loader)) {
    by_hand.push_back(std::chrono::duration<double, std::milli>(clock::now() - body_end).count());
    CHECK(v == n);
    ++n;
    {
      TRACEML_PHASE(forward);
      spin_for(500us);
    }
    body_end = clock::now();
  }
  const auto& r = prof.finish();
  CHECK(r.summary.steps == 8);
  REQUIRE(r.steps.size() == 8);
  const phase_summary* fetch = nullptr;
  for (const auto& p : r.summary.phases)
    if (p.kind == phase_kind::dataloader) fetch = &p;
  REQUIRE(fetch != nullptr);
  CHECK(fetch->wall_ms.count == 8);
  CHECK(fetch->wall_ms.min >= 1.99);  // each fetch spins 2 ms (at least: a loaded machine may take longer)
  REQUIRE(fetches.size() == 9);       // the last increment found the end
  std::vector<double> ratios;
  for (std::size_t i = 0; i < 8; ++i) {
    const phase_time* f = r.steps[i].find(phase_kind::dataloader, "dataloader");
    REQUIRE(f != nullptr);
    INFO("step " << i << ": dataloader " << f->wall_ms << " ms, the fetch " << fetches[i] << " ms, from outside "
                 << by_hand[i] << " ms");
    // The phase holds the fetch, and no more than what lies between two bodies (clocks apart by 1%).
    CHECK(f->wall_ms >= fetches[i] * 0.99 - 0.01);
    CHECK(f->wall_ms <= by_hand[i] * 1.01 + 0.01);
    CHECK(r.steps[i].wall_ms >= f->wall_ms);
    ratios.push_back(f->wall_ms / fetches[i]);
  }
  std::sort(ratios.begin(), ratios.end());
  CHECK(ratios[4] == Approx(1.0).epsilon(0.10));  // the median step: the phase is the fetch
}
