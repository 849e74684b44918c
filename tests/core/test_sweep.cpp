// The schedule sweep (sweep.hpp) and its report (sinks/sweep_report.hpp): factorisations, the
// interleaved order, the fit probes, ranking, ties, headroom, failures, and isolation: a candidate
// that runs out of memory in the middle of a phase leaves nothing behind for the next one.
#include <catch2/catch.hpp>

#include <traceml/sinks/sweep_report.hpp>
#include <traceml/sweep.hpp>

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_helpers.hpp"

using namespace traceml;

namespace {
using traceml_test::contains;

std::vector<std::string> names(const std::vector<sweep_schedule>& list) {
  std::vector<std::string> out;
  for (const auto& s : list) out.push_back(s.name());
  return out;
}

constexpr std::int64_t gib = std::int64_t{1} << 30;

/// A hand-made run of `steps` steps of `step_ms` each (one forward phase), its peak memory set.
run_result hand_run(const std::string& name, std::size_t steps, std::size_t warmup, double step_ms, std::int64_t peak) {
  std::vector<step_result> out;
  for (std::size_t s = 0; s < steps; ++s) {
    step_result st;
    st.step = static_cast<std::int32_t>(s);
    st.wall_ms = step_ms;
    st.phases.push_back({phase_kind::forward, "forward", step_ms, 1, true});
    out.push_back(st);
  }
  run_result r;
  r.name = name;
  r.steps = out;
  r.summary = summarize_run(out, warmup);
  r.summary.peak_reserved_bytes = peak;
  r.summary.peak_allocated_bytes = peak < 0 ? -1 : peak - gib / 2;
  return r;
}

/// A machine made by hand: each schedule's step time per repeat and its peak memory; micro-batches
/// above `fits_up_to` throw CUDA's out-of-memory message. Remembers the order trials ran in.
struct fake_machine {
  std::int64_t fits_up_to = 1 << 20;
  std::map<std::string, std::vector<double>> step_ms;  // per repeat
  std::map<std::string, std::int64_t> peak;
  std::map<std::string, std::string> throws_at;  // trial name -> what() of a std::logic_error
  std::vector<std::string> trials;
  int released = 0;

  sweep_measure measure() {
    return [this](const sweep_trial& t) {
      trials.push_back(t.name);
      if (t.schedule.micro_batch > fits_up_to)
        throw std::runtime_error("CUDA out of memory. Tried to allocate 2.00 GiB\n(GPU 0; 79.1 GiB total capacity)");
      const auto thrown = throws_at.find(t.name);
      if (thrown != throws_at.end()) throw std::logic_error(thrown->second);
      const auto name = t.schedule.name();
      const auto& times = step_ms.at(name);
      const auto p = peak.find(name);
      return hand_run(t.name, t.steps, t.warmup, t.probe ? 999.0 : times.at(t.repeat),
                      p == peak.end() ? -1 : p->second);
    };
  }
  sweep_options options(std::int64_t effective_batch) {
    sweep_options o;
    o.effective_batch = effective_batch;
    o.steps = 6;
    o.warmup = 1;
    o.repeats = 3;
    o.release_memory = [this] { ++released; };
    return o;
  }
};

std::vector<std::string> ranked_names(const sweep_result& r) {
  std::vector<std::string> out;
  for (const auto& c : r.candidates)
    if (c.ranked()) out.push_back(c.name());
  return out;
}
}  // namespace

TEST_CASE("factorisations list every MxA of the effective batch, largest micro-batch first", "[sweep]") {
  CHECK(names(factorisations(1)) == std::vector<std::string>{"1x1"});
  CHECK(names(factorisations(4)) == std::vector<std::string>{"4x1", "2x2", "1x4"});
  CHECK(names(factorisations(7)) == std::vector<std::string>{"7x1", "1x7"});
  CHECK(names(factorisations(12)) == std::vector<std::string>{"12x1", "6x2", "4x3", "3x4", "2x6", "1x12"});
  CHECK(factorisations(max_sweep_batch).size() == 21);  // 2^20: 2^0 .. 2^20
  CHECK_THROWS_WITH(factorisations(0), "sweep: effective batch 0 is outside 1..1048576");
  CHECK_THROWS_AS(factorisations(max_sweep_batch + 1), std::invalid_argument);
}

TEST_CASE("rounds alternate direction, so a drifting machine favours no candidate", "[sweep]") {
  CHECK(interleaved_order(3, 3) == std::vector<std::size_t>{0, 1, 2, 2, 1, 0, 0, 1, 2});
  CHECK(interleaved_order(1, 2) == std::vector<std::size_t>{0, 0});
  CHECK(interleaved_order(0, 3).empty());
  // Over two rounds every candidate's mean position is the same: (n - 1) / 2.
  const auto order = interleaved_order(4, 2);
  for (std::size_t c = 0; c < 4; ++c) {
    double positions = 0;
    for (std::size_t k = 0; k < order.size(); ++k)
      if (order[k] == c) positions += static_cast<double>(k % 4);
    CHECK(positions / 2 == Approx(1.5));
  }
}

TEST_CASE("the sweep probes down to the largest micro-batch that fits, then measures interleaved", "[sweep]") {
  fake_machine m;
  m.fits_up_to = 4;
  // Per step: 4x2 40 ms, 2x4 60 ms, 1x8 100 ms, each repeat a little different.
  m.step_ms = {{"4x2", {41, 39, 40}}, {"2x4", {60, 61, 59}}, {"1x8", {100, 99, 101}}};
  m.peak = {{"4x2", 30 * gib}, {"2x4", 20 * gib}, {"1x8", 15 * gib}};
  auto o = m.options(8);
  o.device_memory_bytes = 100 * gib;
  std::vector<std::string> outcomes;
  o.on_trial = [&](const sweep_trial& t, const sweep_trial_outcome& out) {
    outcomes.push_back(t.name + " " + to_string(out.status) + (out.run ? " run" : ""));
  };
  const auto r = run_sweep(o, m.measure());

  CHECK(m.trials == std::vector<std::string>{"8x1 probe", "4x2 probe", "4x2#1", "2x4#1", "1x8#1", "1x8#2", "2x4#2",
                                             "4x2#2", "4x2#3", "2x4#3", "1x8#3"});
  CHECK(m.released == 11);  // after every trial, the failed probe included
  CHECK(outcomes.front() == "8x1 probe out of memory");
  CHECK(outcomes[1] == "4x2 probe measured run");
  CHECK(r.largest_fitting_micro_batch == 4);
  CHECK(ranked_names(r) == std::vector<std::string>{"4x2", "2x4", "1x8"});

  const auto& best = *r.find("4x2");
  CHECK(best.rank == 1);
  CHECK(best.runs.size() == 3);
  CHECK(best.column.median_ms == Approx(40));
  CHECK(best.column.spread_lo_ms == Approx(39));
  CHECK(best.column.spread_hi_ms == Approx(41));
  CHECK(best.ms_per_example == Approx(5));
  CHECK(best.examples_per_s == Approx(200));
  CHECK(best.headroom == Approx(0.7));
  CHECK(r.find("2x4")->ratio_to_best == Approx(1.5));
  CHECK(r.find("1x8")->ratio_to_best == Approx(2.5));

  const auto& oom = r.candidates.back();
  CHECK(oom.name() == "8x1");
  CHECK(oom.status == sweep_status::out_of_memory);
  CHECK(oom.note == "out of memory in the fit probe: CUDA out of memory. Tried to allocate 2.00 GiB");
  CHECK_FALSE(oom.ranked());

  const auto& rec = r.recommendation;
  CHECK(rec.schedule == "4x2");
  CHECK(rec.confidence == sweep_confidence::clear);
  CHECK(rec.compared_with == "2x4");
  CHECK(contains(rec.reason,
                 "4x2 is the fastest: 40.0 ms per step, 5.00 ms per example, 1.50x faster per example "
                 "than the next, 2x4"));
  CHECK(contains(rec.reason,
                 "beyond the noise (the ranges of the repeats' medians: 4x2 39.0..41.0 ms per step, "
                 "2x4 59.0..61.0 ms per step)"));
  CHECK(contains(rec.reason, "Memory: peak 30.0 GiB reserved, 70% of the device free."));
  CHECK(contains(rec.explanation, "Why 2x4 is slower than 4x2: +20.0 ms per step"));

  const auto table = format_sweep(r);
  INFO(table);
  CHECK(contains(table, "Schedule sweep, effective batch 8: 3 repeats x 6 steps (1 warm-up)"));
  CHECK(contains(table, "Largest micro-batch that fits: 4; device memory 100.0 GiB"));
  CHECK(contains(
      table, "1    4x2             8     40.0      39.0..41.0        5.00       200.0    1.00x      30.0       70%"));
  CHECK(contains(table, "-    8x1             8  out of memory in the fit probe: CUDA out of memory."));
  CHECK(contains(table, "Recommendation: 4x2 (confidence: clear). 4x2 is the fastest"));
}

TEST_CASE("a difference inside the repeats' spread is a tie, decided by memory", "[sweep]") {
  fake_machine m;
  // 4x1 has the lower median (10.2 against 10.3), but the ranges of the medians overlap.
  m.step_ms = {{"4x1", {10.0, 10.6, 10.2}}, {"2x2", {10.3, 10.1, 10.8}}, {"1x4", {20, 20, 20}}};
  auto o = m.options(4);
  o.probe_steps = 0;

  SECTION("with memory known, the tied candidate needing the least is recommended") {
    m.peak = {{"4x1", 60 * gib}, {"2x2", 40 * gib}, {"1x4", 30 * gib}};
    o.device_memory_bytes = 80 * gib;
    const auto r = run_sweep(o, m.measure());
    CHECK(ranked_names(r) == std::vector<std::string>{"4x1", "2x2", "1x4"});
    const auto& rec = r.recommendation;
    CHECK(rec.schedule == "2x2");
    CHECK(rec.confidence == sweep_confidence::tie);
    CHECK(rec.tied == std::vector<std::string>{"4x1"});
    CHECK(contains(rec.reason,
                   "A tie: the ranges of the repeats' medians overlap (4x1 10.0..10.6 ms per step and "
                   "2x2 10.1..10.8 ms per step)"));
    CHECK(contains(rec.reason,
                   "2x2 is recommended: of these it needs the least memory (peak 40.0 GiB reserved, 50% "
                   "of the device free)"));
    // The comparison engine agrees that the gap is noise.
    CHECK(contains(rec.explanation, "within the runs' noise"));
  }
  SECTION("without memory figures, the lower median, said to be a tie") {
    const auto r = run_sweep(o, m.measure());
    CHECK(r.recommendation.schedule == "4x1");
    CHECK(r.recommendation.confidence == sweep_confidence::tie);
    CHECK(contains(r.recommendation.reason, "4x1 has the lowest median; any of them will do."));
    CHECK(r.find("4x1")->headroom == -1);
  }
  SECTION("ranges that do not overlap are a clear result") {
    m.step_ms["2x2"] = {10.7, 10.8, 10.9};
    const auto r = run_sweep(o, m.measure());
    CHECK(r.recommendation.schedule == "4x1");
    CHECK(r.recommendation.confidence == sweep_confidence::clear);
    CHECK(r.recommendation.tied.empty());
  }
}

TEST_CASE("a recommendation that leaves too little memory free names the fastest with more room", "[sweep]") {
  fake_machine m;
  m.step_ms = {{"2x1", {10, 10, 10}}, {"1x2", {15, 15, 15}}};
  m.peak = {{"2x1", 76 * gib}, {"1x2", 40 * gib}};
  auto o = m.options(2);
  o.device_memory_bytes = 80 * gib;
  const auto r = run_sweep(o, m.measure());
  CHECK(r.recommendation.schedule == "2x1");
  CHECK(r.find("2x1")->headroom == Approx(0.05));
  CHECK(contains(r.recommendation.reason, "It leaves less than 10% of the device's memory free"));
  CHECK(contains(r.recommendation.reason,
                 "The fastest with more room is 1x2 (15.0 ms per step, 7.50 ms per example, "
                 "peak 40.0 GiB reserved, 50% of the device free)."));
}

TEST_CASE("a candidate out of memory in a later round leaves the sweep and its repeats are dropped", "[sweep]") {
  fake_machine m;
  m.step_ms = {{"2x1", {10, 10, 10}}, {"1x2", {15, 15, 15}}};
  m.throws_at = {{"2x1#2", "unused"}};
  auto o = m.options(2);
  o.probe_steps = 0;
  o.is_out_of_memory = [](const std::exception& e) { return std::string(e.what()) == "unused"; };
  const auto r = run_sweep(o, m.measure());
  CHECK(m.trials == std::vector<std::string>{"2x1#1", "1x2#1", "1x2#2", "2x1#2", "1x2#3"});
  const auto& c = *r.find("2x1");
  CHECK(c.status == sweep_status::out_of_memory);
  CHECK(c.note == "out of memory in repeat 2 of 3: unused");
  CHECK(c.runs.empty());
  CHECK(r.recommendation.schedule == "1x2");
  CHECK(r.recommendation.confidence == sweep_confidence::only_candidate);
  CHECK(r.largest_fitting_micro_batch == 1);
}

TEST_CASE("a probe that fails for another reason is a failure, and probing goes on", "[sweep]") {
  fake_machine m;
  m.step_ms = {{"2x1", {10, 10, 10}}, {"1x2", {15, 15, 15}}};
  m.throws_at = {{"2x1 probe", "shape mismatch"}};
  const auto r = run_sweep(m.options(2), m.measure());
  CHECK(m.trials.front() == "2x1 probe");
  CHECK(m.trials[1] == "1x2 probe");
  const auto& c = *r.find("2x1");
  CHECK(c.status == sweep_status::failed);
  CHECK(c.note == "failed in the fit probe: shape mismatch");
  CHECK(r.recommendation.schedule == "1x2");
}

TEST_CASE("nothing fits: no recommendation, and the reason names what happened", "[sweep]") {
  fake_machine m;
  m.fits_up_to = 0;
  const auto r = run_sweep(m.options(2), m.measure());
  CHECK(m.trials == std::vector<std::string>{"2x1 probe", "1x2 probe"});
  CHECK(r.largest_fitting_micro_batch == 0);
  CHECK(r.recommendation.schedule.empty());
  CHECK(r.recommendation.confidence == sweep_confidence::none);
  CHECK(contains(r.recommendation.reason, "Nothing to recommend: no candidate ran to the end (2x1: out of memory"));
  CHECK(contains(format_sweep(r), "Recommendation: none."));
}

TEST_CASE("max_candidates measures the largest fitting micro-batches only", "[sweep]") {
  fake_machine m;
  m.fits_up_to = 4;
  m.step_ms = {{"4x2", {40, 40, 40}}, {"2x4", {60, 60, 60}}, {"1x8", {100, 100, 100}}};
  auto o = m.options(8);
  o.max_candidates = 2;
  o.repeats = 1;
  const auto r = run_sweep(o, m.measure());
  CHECK(m.trials == std::vector<std::string>{"8x1 probe", "4x2 probe", "4x2#1", "2x4#1"});
  const auto& c = *r.find("1x8");
  CHECK(c.status == sweep_status::not_measured);
  CHECK(c.note == "not measured: only the 2 largest micro-batches that fit are measured (max_candidates)");
  // One repeat: the spread is p10..p90 of the steps.
  CHECK(contains(format_sweep(r), "spread: p10..p90 of the measured steps' times (one repeat)"));
  CHECK(contains(r.recommendation.reason,
                 "beyond the noise (the p10..p90 ranges of step time: 4x2 40.0..40.0 ms per step"));
}

TEST_CASE("larger effective batches are ranked by time per example", "[sweep]") {
  fake_machine m;
  m.fits_up_to = 2;
  m.step_ms = {{"2x2", {20, 20, 20}}, {"1x4", {30, 30, 30}}, {"2x4", {36, 36, 36}}, {"1x8", {60, 60, 60}}};
  auto o = m.options(4);
  o.larger_batches = {8};
  const auto r = run_sweep(o, m.measure());
  // One probe per micro-batch, with its fewest accumulation steps: 8x1, 4x1, then 2x2 fits.
  CHECK(std::vector<std::string>(m.trials.begin(), m.trials.begin() + 3) ==
        std::vector<std::string>{"8x1 probe", "4x1 probe", "2x2 probe"});
  CHECK(r.find("4x2")->note ==
        "out of memory in the fit probe of 4x1 (same micro-batch): CUDA out of memory. "
        "Tried to allocate 2.00 GiB");
  CHECK(ranked_names(r) == std::vector<std::string>{"2x4", "2x2", "1x4", "1x8"});  // 4.5, 5, 7.5, 7.5 ms per example
  CHECK(r.recommendation.schedule == "2x4");
  CHECK(contains(r.recommendation.reason, "ranked by time per example"));
  CHECK(r.recommendation.explanation.empty());  // the engine compares steps of one effective batch only
}

TEST_CASE("sweep options that cannot make a sweep are refused by name", "[sweep]") {
  fake_machine m;
  auto o = m.options(4);
  o.warmup = 6;
  CHECK_THROWS_WITH(run_sweep(o, m.measure()),
                    "sweep: 6 steps per trial with 6 warm-up steps leave none measured (warmup must be below steps)");
  o = m.options(4);
  o.repeats = 0;
  CHECK_THROWS_WITH(run_sweep(o, m.measure()), "sweep: repeats must be at least 1");
  o = m.options(4);
  o.larger_batches = {4};
  CHECK_THROWS_WITH(run_sweep(o, m.measure()), "sweep: larger batch 4 is not above the effective batch 4");
  CHECK(m.trials.empty());
}

TEST_CASE("the sweep's JSON and HTML carry the table and the recommendation", "[sweep]") {
  fake_machine m;
  m.fits_up_to = 1;
  m.step_ms = {{"1x2", {15, 15, 15}}};
  const auto r = run_sweep(m.options(2), m.measure());
  const auto json = sweep_json(r);
  CHECK(contains(json,
                 "\"schedule\":\"2x1\",\"micro_batch\":2,\"accumulation\":1,\"effective_batch\":2,"
                 "\"status\":\"out of memory\",\"rank\":0,\"note\":\"out of memory in the fit probe"));
  CHECK(contains(json, "\"recommendation\":{\"schedule\":\"1x2\",\"confidence\":\"only candidate\",\"tied\":[]"));
  const auto html = html_sweep_section(r);
  CHECK(contains(html, "<section id=\"sweep\">"));
  CHECK(contains(html, "<tr class=\"fastest\"><td>1x2 (recommended)</td>"));
  CHECK(contains(html, "class=\"warn\">out of memory in the fit probe: CUDA out of memory."));
  const auto report = html_report({r.find("1x2")->runs.front()}, "sweep", "", html);
  CHECK(report.find("<section id=\"sweep\">") < report.find("<section id=\"runs\">"));
}

// ---- isolation: a real profiler per trial, out of memory in the middle of a phase -----------------

namespace {
enum class driving { hooks, scopes };

/// t.steps steps of t.schedule, each micro-batch's forward spinning 300 us; the 4x1 schedule runs
/// out of memory inside its first forward, with the step, micro-batch and forward open.
void fake_training(const sweep_trial& t, profiler& prof, driving how) {
  const auto forward = [&] {
    if (t.schedule.micro_batch == 4) throw std::runtime_error("CUDA out of memory. Tried to allocate 1.00 GiB");
    traceml_test::spin_for(std::chrono::microseconds(300));
  };
  if (how == driving::hooks) {
    callback_list cbs;
    cbs.add(prof);
    cbs.on_train_begin();
    for (std::size_t s = 0; s < t.steps; ++s) {
      cbs.on_step_begin();
      for (std::int64_t m = 0; m < t.schedule.accumulation; ++m) {
        cbs.on_microbatch_begin();
        cbs.on_phase_begin(phase_kind::forward);
        forward();
        cbs.on_phase_end(phase_kind::forward);
        cbs.on_phase_begin(phase_kind::backward);
        cbs.on_phase_end(phase_kind::backward);
        cbs.on_microbatch_end();
      }
      cbs.on_phase_begin(phase_kind::optimizer);
      cbs.on_phase_end(phase_kind::optimizer);
      cbs.on_step_end();
    }
    cbs.on_train_end();
  } else {
    for (std::size_t s = 0; s < t.steps; ++s) {
      TRACEML_STEP();
      for (std::int64_t m = 0; m < t.schedule.accumulation; ++m) {
        TRACEML_MICROBATCH();
        {
          TRACEML_PHASE(forward);
          forward();
        }
        { TRACEML_PHASE(backward); }
      }
      { TRACEML_PHASE(optimizer); }
    }
  }
}

/// Everything a run's summary says apart from clock readings: counts, phases and their sample sets.
std::vector<std::string> figures_without_times(const run_result& r) {
  const auto& s = r.summary;
  std::vector<std::string> out{"steps " + std::to_string(s.steps), "warmup " + std::to_string(s.warmup_steps),
                               "measured " + std::to_string(s.step_ms.count),
                               "baseline " + std::to_string(s.baseline.steps)};
  for (const auto& p : s.phases)
    out.push_back(p.name + " " + to_string(p.kind) + (p.top_level ? " top" : " nested") + " x" +
                  std::to_string(p.wall_ms.count));
  for (const auto& st : r.steps)
    out.push_back("step " + std::to_string(st.step) + " micro " + std::to_string(st.microbatches));
  return out;
}
}  // namespace

TEST_CASE("a candidate out of memory mid-phase leaves the next one measured as if it ran first", "[sweep][isolation]") {
  const auto how = GENERATE(driving::hooks, driving::scopes);
  traceml_test::reset_recorder();
  sweep_options o;
  o.effective_batch = 4;
  o.steps = 4;
  o.warmup = 1;
  o.repeats = 1;
  o.probe_steps = 0;  // 4x1 fails in the first round, and 2x2 runs right after it
  std::vector<std::string> order;
  o.on_trial = [&](const sweep_trial& t, const sweep_trial_outcome&) { order.push_back(t.name); };
  const auto r = sweep(o, [&](const sweep_trial& t, profiler& prof) { fake_training(t, prof, how); });
  REQUIRE(order == std::vector<std::string>{"4x1#1", "2x2#1", "1x4#1"});
  CHECK(r.find("4x1")->status == sweep_status::out_of_memory);
  CHECK(r.find("4x1")->note == "out of memory in repeat 1 of 1: CUDA out of memory. Tried to allocate 1.00 GiB");
  CHECK(detail::tls_hooks.size == 0);
  CHECK(detail::recorder().step.load() == -1);

  // The same candidate alone, on a recorder that never saw an exception.
  traceml_test::reset_recorder();
  sweep_trial alone;
  alone.schedule = {2, 2};
  alone.steps = 4;
  alone.warmup = 1;
  alone.name = "2x2#1";
  profiler_options po = profiler_options::named(alone.name);
  po.warmup_steps = alone.warmup;
  po.print_table = false;
  profiler prof(po);
  fake_training(alone, prof, how);
  const auto& expected = prof.finish();

  const auto& after = *r.find("2x2");
  REQUIRE(after.ranked());
  CHECK(figures_without_times(after.runs.front()) == figures_without_times(expected));
  CHECK(figures_without_times(expected) ==
        std::vector<std::string>{"steps 4", "warmup 1", "measured 3", "baseline 3", "forward forward top x3",
                                 "backward backward top x3", "optimizer optimizer top x3", "step 0 micro 2",
                                 "step 1 micro 2", "step 2 micro 2", "step 3 micro 2"});
  // Two forwards of 300 us per step: neither run is the "0.0 ms" of a corrupted measurement.
  CHECK(after.column.median_ms >= 0.6);
  CHECK(expected.summary.step_ms.median >= 0.6);
}
