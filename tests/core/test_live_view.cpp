// The live view: exact text for hand-made snapshots, the numbers behind them, the redraw rate
// limit on a fake clock, redrawing in place only while nothing else wrote (a fake terminal that
// answers where its cursor is), nothing drawn (and one notice) without a terminal, the profiler's
// wiring. tests/core/live_view_tmux.sh checks the same in a real terminal.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "test_helpers.hpp"

using namespace traceml;
using namespace std::chrono_literals;

namespace {
phase_time top(const char* name, double ms, phase_kind kind = phase_kind::user) {
  return phase_time{kind, name, ms, 1, true};
}

step_result step_of(std::int32_t n, double wall_ms, std::vector<phase_time> phases) {
  step_result s;
  s.step = n;
  s.wall_ms = wall_ms;
  s.phases = std::move(phases);
  return s;
}

/// A live view drawn by hand (no thread) on a fake terminal: every write is kept, and its cursor
/// reports are the `answers` given (none left: it does not answer).
struct fake_terminal {
  std::vector<std::string> writes;
  std::deque<std::optional<detail::cursor_position>> answers;
  std::mutex mu;  // the background-thread test writes from the view's thread
  live_view_options options(const std::string& run, std::size_t expected = 0) {
    live_view_options o;
    o.run_name = run;
    o.expected_steps = expected;
    o.terminal = true;
    o.background = false;
    o.clock = [] { return std::int64_t{0}; };
    o.write = [this](const std::string& text) {
      std::lock_guard<std::mutex> lock(mu);
      writes.push_back(text);
    };
    o.cursor = [this]() -> std::optional<detail::cursor_position> {
      std::lock_guard<std::mutex> lock(mu);
      if (answers.empty()) return std::nullopt;
      auto a = answers.front();
      answers.pop_front();
      return a;
    };
    return o;
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return writes.size();
  }
};

std::size_t notices() {
  std::size_t n = 0;
  for (const auto& m : diagnostic_messages()) n += m == "live view off: stderr is not a terminal";
  return n;
}
}  // namespace

TEST_CASE("the live view's text for hand-made snapshots", "[live]") {
  SECTION("a run with a known length and GPU times") {
    live_snapshot s;
    s.run_name = "1x4";
    s.steps = 37;
    s.expected_steps = 100;
    s.elapsed_s = 11.2;
    s.eta_s = 18.9;
    s.last_step_ms = 301.24;
    s.last_step_gpu_ms = 299.0;
    s.median_step_ms = 298.66;
    s.median_steps = 30;
    s.phases = {{"dataloader", 0.31, -1, 0.3},
                {"forward", 120.14, 118.0, 119.5},
                {"backward", 160.0, 158.24, 158.9},
                {"optimizer", 12.0, 11.9, 12.06}};
    const std::vector<std::string> expected{
        "traceml live: 1x4  step 37 of 100  ETA 19 s  elapsed 11 s",
        "phase              last ms   gpu ms  median ms",
        "dataloader             0.3        -        0.3",
        "forward              120.1    118.0      119.5",
        "backward             160.0    158.2      158.9",
        "optimizer             12.0     11.9       12.1",
        "step                 301.2    299.0      298.7",
        "medians over the last 30 steps",
    };
    CHECK(render_live_view(s) == expected);
  }
  SECTION("unknown length, no GPU: no ETA and no GPU column") {
    live_snapshot s;
    s.run_name = "mlp";
    s.steps = 5;
    s.elapsed_s = 2.4;
    s.last_step_ms = 10.0;
    s.median_step_ms = 9.96;
    s.median_steps = 5;
    s.phases = {{"forward", 4.0, -1, 3.96}, {"backward", 6.0, -1, 5.99}};
    const std::vector<std::string> expected{
        "traceml live: mlp  step 5  elapsed 2 s", "phase              last ms  median ms",
        "forward                4.0        4.0",  "backward               6.0        6.0",
        "step                  10.0       10.0",  "medians over the last 5 steps",
    };
    CHECK(render_live_view(s) == expected);
  }
  SECTION("zero steps: one line, with the length when known") {
    live_snapshot s;
    s.run_name = "mlp";
    CHECK(render_live_view(s) == std::vector<std::string>{"traceml live: mlp  waiting for the first step"});
    s.expected_steps = 40;
    CHECK(render_live_view(s) == std::vector<std::string>{"traceml live: mlp  waiting for the first step of 40"});
  }
  SECTION("one step: the count in the singular; a long run name is cut") {
    live_snapshot s;
    s.run_name = "a-run-name-far-too-long-for-one-line";
    s.steps = 1;
    s.last_step_ms = s.median_step_ms = 2.0;
    s.median_steps = 1;
    const auto lines = render_live_view(s);
    REQUIRE(lines.size() == 4);
    CHECK(lines[0] == "traceml live: a-run-name-far-too-lo...  step 1  elapsed 0 s");
    CHECK(lines[3] == "medians over the last 1 step");
  }
}

TEST_CASE("names with control characters reach the terminal escaped", "[live]") {
  live_snapshot s;
  s.run_name = std::string("r\x1b[2J");  // ESC [2J would clear the user's screen
  s.steps = 1;
  s.elapsed_s = 1;
  s.last_step_ms = 2;
  s.median_step_ms = 2;
  s.median_steps = 1;
  s.phases = {{std::string("ph\x07"
                           "ase"),
               1.0, -1, 1.0}};  // BEL; split: "\x07a" would be one hex escape
  const auto lines = render_live_view(s);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0].rfind("traceml live: r\\x1b[2J  step 1", 0) == 0);
  CHECK(lines[2].rfind("ph\\x07ase ", 0) == 0);
  for (const auto& l : lines)
    for (const char c : l) CHECK(static_cast<unsigned char>(c) >= 0x20);
}

TEST_CASE("durations read as seconds, minutes or hours", "[live]") {
  CHECK(detail::duration_text(0) == "0 s");
  CHECK(detail::duration_text(-3) == "0 s");
  CHECK(detail::duration_text(59.4) == "59 s");
  CHECK(detail::duration_text(59.6) == "1 min 00 s");
  CHECK(detail::duration_text(185) == "3 min 05 s");
  CHECK(detail::duration_text(3720) == "1 h 02 min");
}

TEST_CASE("the snapshot's numbers come from the published steps", "[live]") {
  detail::live_board b;
  SECTION("last step's split, GPU time summed over micro-batches, nested phases left out") {
    auto s0 = step_of(0, 10,
                      {top("forward", 4, phase_kind::forward), top("backward", 5, phase_kind::backward),
                       phase_time{phase_kind::user, "inner", 1, 1, false}});
    s0.gpu = step_gpu_report{};
    s0.gpu->total.span_ns = 9'000'000;
    phase_gpu_facts f0{phase_kind::forward, "forward", 0, {}, {}, {}},
        f1 = f0, bw{phase_kind::backward, "backward", 0, {}, {}, {}};
    f0.facts.span_ns = 2'000'000;
    f1.microbatch = 1;
    f1.facts.span_ns = 1'500'000;
    s0.gpu->phases = {f0, f1, bw};  // backward's span_ns stays -1: not measured
    b.add(s0);
    const auto s = detail::make_live_snapshot(b, "r", 10, 1.0);
    CHECK(s.steps == 1);
    CHECK(s.last_step_gpu_ms == Approx(9.0));
    REQUIRE(s.phases.size() == 2);
    CHECK(s.phases[0].name == "forward");
    CHECK(s.phases[0].last_gpu_ms == Approx(3.5));
    CHECK(s.phases[1].name == "backward");
    CHECK(s.phases[1].last_gpu_ms == -1);
    CHECK(s.eta_s == Approx(9 * 10.0 / 1e3));
  }
  SECTION("medians count a step without the phase as 0; the ETA is steps left x median step") {
    b.add(step_of(0, 10, {top("forward", 4), top("backward", 5)}));
    b.add(step_of(1, 20, {top("forward", 8), top("backward", 6)}));
    b.add(step_of(2, 30, {top("forward", 12), top("optimizer", 3)}));
    const auto s = detail::make_live_snapshot(b, "r", 10, 1.0);
    CHECK(s.median_steps == 3);
    CHECK(s.median_step_ms == 20);
    CHECK(s.last_step_ms == 30);
    CHECK(s.last_step_gpu_ms == -1);
    REQUIRE(s.phases.size() == 3);
    CHECK(s.phases[0].median_ms == 8);
    CHECK(s.phases[1].median_ms == 5);  // 5, 6, 0
    CHECK(s.phases[1].last_ms == 0);    // not in the last step
    CHECK(s.phases[2].median_ms == 0);  // 0, 0, 3
    CHECK(s.phases[2].last_ms == 3);
    CHECK(s.eta_s == Approx(7 * 20.0 / 1e3));
    CHECK(detail::make_live_snapshot(b, "r", 0, 1.0).eta_s == -1);  // length not known
    CHECK(detail::make_live_snapshot(b, "r", 2, 1.0).eta_s == 0);   // past the expected length
  }
  SECTION("the medians follow the latest live_window_steps steps") {
    for (int i = 0; i < 150; ++i) b.add(step_of(i, i, {}));
    const auto s = detail::make_live_snapshot(b, "r", 0, 1.0);
    CHECK(s.steps == 150);
    CHECK(s.median_steps == live_window_steps);
    CHECK(s.median_step_ms == Approx(99.5));  // steps 50..149
  }
  SECTION("at most live_max_phases phases; the later ones are left out") {
    static const char* names[] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"};
    std::vector<phase_time> many;
    for (const char* n : names) many.push_back(top(n, 1));
    b.add(step_of(0, 10, many));
    const auto s = detail::make_live_snapshot(b, "r", 0, 1.0);
    REQUIRE(s.phases.size() == live_max_phases);
    CHECK(s.phases.back().name == "p7");
  }
}

TEST_CASE("the live view redraws at most once per interval, over its own lines while nothing else wrote", "[live]") {
  fake_terminal term;
  auto o = term.options("r");
  const std::int64_t ms = 1'000'000;
  using detail::cursor_position;
  live_view view(o);
  REQUIRE(view.on());
  // Asked before each tick and after each frame: the cursor stays where the last frame left it.
  term.answers = {cursor_position{10, 1}, cursor_position{11, 1}};
  CHECK(view.tick(0));  // the first frame at once, below the cursor (at column 1: no new line first)
  REQUIRE(term.count() == 1);
  CHECK(term.writes[0] == "\x1b[2Ktraceml live: r  waiting for the first step\n\n\x1b[1A");
  view.publish(step_of(0, 10, {top("forward", 4)}));
  term.answers = {cursor_position{11, 1}, cursor_position{11, 1}, cursor_position{11, 1}, cursor_position{15, 1}};
  CHECK_FALSE(view.tick(100 * ms));
  CHECK_FALSE(view.tick(499 * ms));
  CHECK(term.count() == 1);
  CHECK(view.tick(500 * ms));
  REQUIRE(term.count() == 2);
  // Up over the one line drawn before, then 5 lines: heading, column names, forward, step, medians.
  CHECK(term.writes[1].rfind("\r\x1b[1A\x1b[2Ktraceml live: r  step 1  elapsed 1 s\n", 0) == 0);
  CHECK(term.writes[1].substr(term.writes[1].size() - 8) == "\x1b[J\n\x1b[1A");
  term.answers = {cursor_position{15, 1}, cursor_position{15, 1}, cursor_position{15, 1}};
  CHECK_FALSE(view.tick(999 * ms));
  CHECK(view.tick(1000 * ms));
  CHECK(term.writes[2].rfind("\r\x1b[5A", 0) == 0);
  term.answers = {cursor_position{15, 1}};
  view.stop();  // nothing else wrote: erases the 5 lines
  REQUIRE(term.count() == 4);
  CHECK(term.writes[3] == "\r\x1b[5A\x1b[J");
  view.stop();  // idempotent
  CHECK(term.count() == 4);
}

TEST_CASE("the live view never draws over lines it did not draw", "[live]") {
  fake_terminal term;
  auto o = term.options("r");
  const std::int64_t ms = 1'000'000;
  using detail::cursor_position;
  live_view view(o);
  term.answers = {cursor_position{10, 1}, cursor_position{11, 1}};
  REQUIRE(view.tick(0));
  view.publish(step_of(0, 10, {top("forward", 4)}));

  SECTION("the trainer keeps printing: one new frame below its lines every 10 s, none moved up") {
    // Each tick the cursor is somewhere new: the trainer printed a line since.
    for (int t = 1; t <= 19; ++t) {
      term.answers = {cursor_position{11 + t, 1}};
      CHECK_FALSE(view.tick(t * 500 * ms));
    }
    term.answers = {cursor_position{31, 1}, cursor_position{36, 1}};
    CHECK(view.tick(10'000 * ms));
    REQUIRE(term.count() == 2);
    CHECK(term.writes[1].rfind("\x1b[2Ktraceml live: r  step 1", 0) == 0);  // at column 1: no new line first
    CHECK(term.writes[1].find("\x1b[1A") ==
          term.writes[1].size() - 4);  // only the frame's own end: never up over others' lines
    CHECK(term.writes[1].find("\x1b[J") == std::string::npos);
    // It stays: stop() leaves it (the trainer wrote after it), on a line of its own.
    term.answers = {cursor_position{40, 9}};
    view.stop();
    REQUIRE(term.count() == 3);
    CHECK(term.writes[2] == "\r\n");
  }
  SECTION("the trainer printed, then went quiet for an interval: a new frame below at once") {
    term.answers = {cursor_position{14, 5}};
    CHECK_FALSE(view.tick(500 * ms));  // moved: the trainer is writing
    term.answers = {cursor_position{14, 5}, cursor_position{20, 1}};
    CHECK(view.tick(1000 * ms));  // unchanged for an interval: quiet
    REQUIRE(term.count() == 2);
    CHECK(term.writes[1].rfind("\r\n\x1b[2Ktraceml live: r  step 1", 0) == 0);  // mid-line: a new line first
    CHECK(term.writes[1].find("\x1b[1A") ==
          term.writes[1].size() - 4);  // only the frame's own end: never up over others' lines
    // From there on, in place again.
    term.answers = {cursor_position{20, 1}, cursor_position{20, 1}};
    CHECK(view.tick(1500 * ms));
    CHECK(term.writes[2].rfind("\r\x1b[5A", 0) == 0);
  }
  SECTION("a terminal that does not answer: frames are only appended, every 10 s") {
    CHECK_FALSE(view.tick(500 * ms));
    CHECK_FALSE(view.tick(9'999 * ms));
    CHECK(view.tick(10'500 * ms));
    REQUIRE(term.count() == 2);
    CHECK(term.writes[1].rfind("\r\n\x1b[2Ktraceml live: r  step 1", 0) == 0);
    view.stop();
    CHECK(term.writes.back() == "\r\n");
  }
}

TEST_CASE("without a terminal nothing is drawn and the notice is given once", "[live]") {
  traceml::reset_diagnostics(/*quiet=*/true);
  fake_terminal term;
  for (int run = 0; run < 2; ++run) {
    auto o = term.options("r");
    o.terminal = false;
    o.background = true;  // no thread is started either
    live_view view(o);
    CHECK_FALSE(view.on());
    view.publish(step_of(0, 10, {}));
    CHECK_FALSE(view.tick(0));
    CHECK_FALSE(view.tick(10'000'000'000));
  }
  CHECK(term.count() == 0);
  CHECK(notices() == 1);
}

TEST_CASE("the live view's thread redraws on its own and stops cleanly", "[live][threads]") {
  fake_terminal term;
  auto o = term.options("r", 100);
  o.background = true;
  o.interval_ns = 1'000'000;  // 1 ms: the test need not wait long
  o.clock = [] { return detail::steady_ns(); };
  o.cursor = [] {
    return std::optional<detail::cursor_position>(detail::cursor_position{5, 1});
  };  // nothing else writes
  {
    live_view view(o);
    for (int i = 0; i < 20; ++i) {
      view.publish(step_of(i, 1, {top("forward", 0.5)}));
      std::this_thread::sleep_for(1ms);
    }
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (term.count() < 3 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
#if defined(__linux__)
    const auto names = traceml_test::thread_names();
    CHECK(std::count(names.begin(), names.end(), std::string("traceml live")) == 1);  // named, for top -H
#endif
  }  // the destructor stops it
  std::lock_guard<std::mutex> lock(term.mu);
  REQUIRE(term.writes.size() >= 3);
  CHECK(term.writes.back().find("\x1b[J") != std::string::npos);
  CHECK(term.writes.back().find("traceml live") == std::string::npos);  // the last write erases
}

TEST_CASE("TRACEML_LIVE=1 or the option turns the live view on, and the profiler owns it", "[live][profiler]") {
  unsetenv("TRACEML_LIVE");
  CHECK_FALSE(live_view_requested(false));
  CHECK(live_view_requested(true));
  setenv("TRACEML_LIVE", "1", 1);
  CHECK(live_view_requested(false));
  setenv("TRACEML_LIVE", "0", 1);
  CHECK_FALSE(live_view_requested(false));
  unsetenv("TRACEML_LIVE");

  traceml_test::reset_recorder();
  profiler_options po;
  po.run_name = "live";
  po.print_table = false;
  po.live = true;
  po.expected_steps = 3;
  {
    profiler prof(po);
    for (int i = 0; i < 3; ++i) {
      TRACEML_STEP();
      TRACEML_PHASE(forward);
    }
    CHECK(prof.finish().summary.steps == 3);
  }
  // Under ctest stderr is a file or a pipe: the view stays off and says so, once.
  if (!stderr_is_terminal()) CHECK(notices() == 1);
}
