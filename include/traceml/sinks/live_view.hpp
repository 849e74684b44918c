// traceml: the live view -- a few lines on the terminal, redrawn while the run goes on: the run, the
// step (of how many, when known), the last step's phase split (wall and GPU ms), running medians of
// the step and its phases, and an ETA. Opt-in (profiler_options::live, or TRACEML_LIVE=1 in the
// environment) and drawn only when stderr is a terminal; elsewhere it says once that it is off.
//
//   traceml::profiler_options opts;
//   opts.live = true;              // or run with TRACEML_LIVE=1
//   opts.expected_steps = steps;   // "step 37 of 100" and an ETA; 0 = not known
//   traceml::profiler prof(opts);  // the profiler owns the view and publishes each finished step
//
// Threads and costs: the training thread only publishes (live_view::publish(), from the profiler at
// step end): one lock and a few stores into a fixed board, no allocation. A background thread wakes
// at most twice a second, copies the board under that lock, computes the medians and the ETA, and
// draws; stop() (the profiler's finish()) joins it and erases the lines. render_live_view() is the
// pure part: snapshot in, text lines out.
//
// It never overwrites what it did not draw. Before each redraw it asks the terminal where its
// cursor is (the cursor position report, through /dev/tty): after a frame the cursor waits at the
// start of a blank line of the view's own, with another blank line below it, so that it is never on
// the screen's last row and any output moves it. Still there: nothing else wrote, and the frame is
// redrawn in place. Elsewhere (the trainer printed): the old frame stays
// where it is, above the trainer's lines, and a new one is drawn below them once the terminal has
// been quiet for an interval, or every 10 s while it is not. Where the terminal cannot be asked (no
// /dev/tty, no answer within 100 ms), frames are only ever appended, every 10 s.
#pragma once
#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <optional>

#if defined(_WIN32)
#include <io.h>
#else
#include <fcntl.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>
#endif

#include "traceml/analysis/stats.hpp"
#include "traceml/analysis/summary.hpp"
#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/activation.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/sinks/figure_notes.hpp"
#include "traceml/sinks/report_table.hpp"
#include "traceml/thread_identity.hpp"

TRACEML_BEGIN_NAMESPACE

/// True when stderr is a terminal (where cursor moves and rewritten lines make sense).
inline bool stderr_is_terminal() noexcept {
#if defined(_WIN32)
  return _isatty(_fileno(stderr)) != 0;
#else
  return isatty(fileno(stderr)) != 0;
#endif
}

/// Whether a run asked for the live view: its option, or TRACEML_LIVE=1 in the environment (so a
/// program that never set the option can still be watched).
inline bool live_view_requested(bool option) noexcept { return option || detail::environment_wants_live_view(); }

/// Phases shown (top-level ones, in order of first appearance; later ones are left out).
inline constexpr std::size_t live_max_phases = 8;
/// The running medians rest on at most this many of the latest steps, so that they follow the run
/// (warm-up steps drop out) in fixed memory.
inline constexpr std::size_t live_window_steps = 100;

/// One row of the phase split.
struct live_phase {
  std::string name;
  double last_ms = 0;       ///< wall time in the last step (0: the phase did not run in it)
  double last_gpu_ms = -1;  ///< GPU time in the last step; -1: not measured
  double median_ms = 0;     ///< median wall time over the window (a step without the phase counts 0)
};

/// What the live view shows, every number already computed: render_live_view() only formats.
struct live_snapshot {
  std::string run_name;
  std::size_t steps = 0;           ///< steps finished
  std::size_t expected_steps = 0;  ///< 0: not known
  double elapsed_s = 0;            ///< since the view started
  double last_step_ms = 0;
  double last_step_gpu_ms = -1;  ///< -1: not measured
  double median_step_ms = 0;
  std::size_t median_steps = 0;  ///< the latest steps the medians rest on
  double eta_s = -1;             ///< steps left x median step; -1: not known
  std::vector<live_phase> phases;
};

namespace detail {

/// "42 s", "3 min 05 s", "1 h 02 min" (rounded to the second).
inline std::string duration_text(double seconds) {
  const long long total = seconds > 0 ? static_cast<long long>(seconds + 0.5) : 0;
  char buf[48];
  if (total < 60)
    std::snprintf(buf, sizeof buf, "%lld s", total);
  else if (total < 3600)
    std::snprintf(buf, sizeof buf, "%lld min %02lld s", total / 60, total % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", total / 3600, (total % 3600) / 60);
  return buf;
}

/// Text cut to `width` bytes, "..." marking the cut (keeps every line narrower than a terminal: a
/// wrapped line would throw off the cursor moves).
inline std::string cut(const std::string& s, std::size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

/// What the training thread publishes: fixed arrays only, so that publishing allocates nothing.
/// Written under live_view's lock by add(); copied whole under it by the drawing thread.
struct live_board {
  static constexpr std::size_t name_size = 32;  ///< longer phase names are cut (and compared cut)
  struct phase_slot {
    phase_kind kind = phase_kind::user;
    char name[name_size] = {};
  };

  std::size_t steps = 0;
  std::size_t phase_count = 0;
  std::array<phase_slot, live_max_phases> phases{};
  double last_step_ms = 0, last_step_gpu_ms = -1;
  std::array<double, live_max_phases> last_ms{}, last_gpu_ms{};
  /// The latest steps, slot = step number % live_window_steps.
  std::array<double, live_window_steps> step_ms{};
  std::array<std::array<double, live_max_phases>, live_window_steps> phase_ms{};

  /// The slot of phase (kind, name); live_max_phases when it has none.
  std::size_t find(phase_kind kind, const char* name) const noexcept {
    for (std::size_t i = 0; i < phase_count; ++i)
      if (phases[i].kind == kind && std::strncmp(phases[i].name, name, name_size - 1) == 0) return i;
    return live_max_phases;
  }

  /// Cost: for each phase of the step a comparison with at most live_max_phases names; no allocation.
  void add(const step_result& st) noexcept {
    const std::size_t row = steps % live_window_steps;
    phase_ms[row].fill(0);
    last_ms.fill(0);
    last_gpu_ms.fill(-1);
    step_ms[row] = last_step_ms = st.wall_ms;
    for (const auto& p : st.phases) {
      if (!p.top_level) continue;  // nested time is already inside its parent: the split would count it twice
      std::size_t i = find(p.kind, p.name.c_str());
      if (i == live_max_phases && phase_count < live_max_phases) {
        i = phase_count++;
        phases[i].kind = p.kind;
        for (std::size_t c = 0; c + 1 < name_size && c < p.name.size(); ++c) phases[i].name[c] = p.name[c];
      }
      if (i == live_max_phases) continue;
      phase_ms[row][i] += p.wall_ms;
      last_ms[i] += p.wall_ms;
    }
    last_step_gpu_ms = st.gpu && st.gpu->total.span_ns >= 0 ? ms(st.gpu->total.span_ns) : -1;
    if (st.gpu)
      for (const auto& g : st.gpu->phases) {  // one entry per (phase, micro-batch): summed
        const std::size_t i = find(g.kind, g.name);
        if (i == live_max_phases || g.facts.span_ns < 0) continue;
        last_gpu_ms[i] = std::max(last_gpu_ms[i], 0.0) + ms(g.facts.span_ns);
      }
    ++steps;
  }
};

/// The median of the window's values in `column` (the step when column is live_max_phases).
inline double window_median(const live_board& b, std::size_t column) {
  const std::size_t n = std::min(b.steps, live_window_steps);
  if (n == 0) return 0;
  std::vector<double> v;
  v.reserve(n);
  for (std::size_t r = 0; r < n; ++r) v.push_back(column == live_max_phases ? b.step_ms[r] : b.phase_ms[r][column]);
  std::sort(v.begin(), v.end());
  return quantile_sorted(v, 0.5);
}

/// The numbers the view shows, from a copy of the board (on the drawing thread: allocates).
inline live_snapshot make_live_snapshot(const live_board& b, const std::string& run_name, std::size_t expected_steps,
                                        double elapsed_s) {
  live_snapshot s;
  s.run_name = run_name;
  s.steps = b.steps;
  s.expected_steps = expected_steps;
  s.elapsed_s = elapsed_s;
  if (b.steps == 0) return s;
  s.last_step_ms = b.last_step_ms;
  s.last_step_gpu_ms = b.last_step_gpu_ms;
  s.median_steps = std::min(b.steps, live_window_steps);
  s.median_step_ms = window_median(b, live_max_phases);
  if (expected_steps > 0)
    s.eta_s = static_cast<double>(expected_steps > b.steps ? expected_steps - b.steps : 0) * s.median_step_ms / 1e3;
  for (std::size_t i = 0; i < b.phase_count; ++i)
    s.phases.push_back(live_phase{b.phases[i].name, b.last_ms[i], b.last_gpu_ms[i], window_median(b, i)});
  return s;
}

/// Where a frame leaves the cursor: at the start of the blank line after it, with one more blank
/// line below (a new line, then up one), so that the cursor is never on the screen's last row, where
/// whole lines written by others would scroll the screen without moving it.
inline constexpr const char* live_frame_end = "\n\x1b[1A";

/// The escape sequences that draw `lines` over the frame of `previous` lines drawn before, from the
/// view's own line below it (cursor up to the frame's first line, each line cleared and rewritten,
/// anything below cleared), ending as live_frame_end says.
inline std::string live_frame(const std::vector<std::string>& lines, std::size_t previous) {
  std::string out = "\r";
  if (previous > 0) out += "\x1b[" + std::to_string(previous) + "A";
  for (const auto& l : lines) out += "\x1b[2K" + l + "\n";
  return out + "\x1b[J" + live_frame_end;
}

/// A new frame below what is on the terminal, leaving every line above as it is: on a fresh line
/// when the cursor is not at column 1 (`column`: 0 when not known); ending as live_frame_end says.
inline std::string live_block(const std::vector<std::string>& lines, int column) {
  std::string out = column == 1 ? "" : "\r\n";
  for (const auto& l : lines) out += "\x1b[2K" + l + "\n";
  return out + live_frame_end;
}

/// The escape sequences that erase a frame of `previous` lines from the view's own line below it,
/// leaving the cursor at column 1 where the frame began.
inline std::string live_erase(std::size_t previous) { return "\r\x1b[" + std::to_string(previous) + "A\x1b[J"; }

/// A position on the terminal, from 1 (the cursor position report's).
struct cursor_position {
  int row = 0, column = 0;
  bool operator==(const cursor_position& o) const noexcept { return row == o.row && column == o.column; }
};

/// Parses a cursor position report, "ESC [ row ; column R"; nullopt for anything else.
inline std::optional<cursor_position> parse_cursor_report(const std::string& reply) {
  const auto esc = reply.rfind("\x1b[");
  if (esc == std::string::npos) return std::nullopt;
  int row = 0, column = 0;
  char end = 0;
  if (std::sscanf(reply.c_str() + esc, "\x1b[%d;%d%c", &row, &column, &end) != 3 || end != 'R' || row < 1 || column < 1)
    return std::nullopt;
  return cursor_position{row, column};
}

#if !defined(_WIN32)
/// Asks the controlling terminal where its cursor is: writes the request to /dev/tty and reads the
/// answer there with echo and line editing off for the moment it takes (at most `timeout_ms`), the
/// terminal's settings restored after. nullopt without a terminal or an answer. A program reading
/// its terminal at that very moment could take the answer, or lose a key typed then to it: the live
/// view is for watching a run, not for typing into it.
class terminal_cursor {
 public:
  terminal_cursor() : fd_(::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)) {}
  ~terminal_cursor() {
    if (fd_ >= 0) ::close(fd_);
  }
  terminal_cursor(const terminal_cursor&) = delete;
  terminal_cursor& operator=(const terminal_cursor&) = delete;

  std::optional<cursor_position> ask(int timeout_ms = 100) const {
    if (fd_ < 0) return std::nullopt;
    termios saved{};
    if (::tcgetattr(fd_, &saved) != 0) return std::nullopt;
    termios quiet = saved;
    quiet.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
    quiet.c_cc[VMIN] = 0;
    quiet.c_cc[VTIME] = 0;
    if (::tcsetattr(fd_, TCSANOW, &quiet) != 0) return std::nullopt;
    std::string reply;
    if (::write(fd_, "\x1b[6n", 4) == 4) {
      const std::int64_t until = steady_ns() + std::int64_t{timeout_ms} * 1'000'000;
      for (std::int64_t now = steady_ns(); now < until && reply.find('R') == std::string::npos; now = steady_ns()) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>((until - now) / 1'000'000) + 1) <= 0) break;
        char buf[32];
        const ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n <= 0) break;
        reply.append(buf, static_cast<std::size_t>(n));
      }
    }
    ::tcsetattr(fd_, TCSANOW, &saved);
    return parse_cursor_report(reply);
  }

 private:
  int fd_;
};
#endif

}  // namespace detail

/// The view's text, one string per line, each narrower than 80 columns: a heading (run, step, ETA,
/// elapsed), then once a step has finished a table of the last step's phases (wall ms, GPU ms where any
/// was measured, running median), the step's row, and what the medians rest on.
///
///   traceml live: 1x4  step 37 of 100  ETA 19 s  elapsed 11 s
///   phase              last ms   gpu ms  median ms
///   forward              120.1    118.0      119.5
///   step                 301.2    299.0      298.7
///   medians over the last 30 steps
inline std::vector<std::string> render_live_view(const live_snapshot& s) {
  using detail::fixed_text;
  using detail::pad;
  std::string head = "traceml live: " + detail::cut(detail::printable(s.run_name), 24) + "  ";
  if (s.steps == 0)
    return {head + "waiting for the first step" + (s.expected_steps ? " of " + std::to_string(s.expected_steps) : "")};
  head += "step " + std::to_string(s.steps);
  if (s.expected_steps > 0) head += " of " + std::to_string(s.expected_steps);
  if (s.eta_s >= 0) head += "  ETA " + detail::duration_text(s.eta_s);
  head += "  elapsed " + detail::duration_text(s.elapsed_s);
  std::vector<std::string> lines{detail::cut(head, 79)};

  bool gpu = s.last_step_gpu_ms >= 0;
  for (const auto& p : s.phases) gpu = gpu || p.last_gpu_ms >= 0;
  const auto ms_cell = [](double v, std::size_t width) { return pad(v >= 0 ? fixed_text(v, 1) : "-", width); };
  const auto row = [&](const std::string& name, double last, double last_gpu, double median) {
    return pad(detail::cut(detail::printable(name), 16), 17, true) + ms_cell(last, 9) +
           (gpu ? ms_cell(last_gpu, 9) : "") + ms_cell(median, 11);
  };
  lines.push_back(pad("phase", 17, true) + pad("last ms", 9) + (gpu ? pad("gpu ms", 9) : "") + pad("median ms", 11));
  for (const auto& p : s.phases) lines.push_back(row(p.name, p.last_ms, p.last_gpu_ms, p.median_ms));
  lines.push_back(row("step", s.last_step_ms, s.last_step_gpu_ms, s.median_step_ms));
  lines.push_back("medians over the last " + detail::steps_of(s.median_steps, 0));
  return lines;
}

/// How a live_view is set up. The defaults draw on stderr from a background thread; tests give
/// their own clock and writer, say whether there is a terminal, and call tick() themselves.
struct live_view_options {
  std::string run_name = "run";
  std::size_t expected_steps = 0;                 ///< 0: not known (no "of N", no ETA)
  bool terminal = stderr_is_terminal();           ///< drawn only on a terminal
  std::int64_t interval_ns = 500'000'000;         ///< at most one redraw per interval (twice a second)
  bool background = true;                         ///< a thread redraws; false: the owner calls tick()
  std::function<std::int64_t()> clock;            ///< monotonic nanoseconds; default: steady_clock
  std::function<void(const std::string&)> write;  ///< default: to stderr, flushed
  /// Where the terminal's cursor is, asked before each redraw and after each frame; nullopt when it
  /// cannot be known. Default: the terminal's answer through /dev/tty (detail::terminal_cursor).
  std::function<std::optional<detail::cursor_position>()> cursor;
  /// A new frame below the trainer's lines at most this often while the trainer keeps writing (or
  /// the cursor cannot be known); once the terminal is quiet for an interval, at once.
  std::int64_t append_interval_ns = 10'000'000'000;
};

/// The live view of one run. publish() is the training thread's side; the drawing happens in
/// tick(), on the view's own thread (or the owner's, without `background`). Not copyable.
class live_view {
 public:
  explicit live_view(live_view_options o) : o_(std::move(o)) {
    if (!o_.clock) o_.clock = [] { return detail::steady_ns(); };
    if (!o_.write)
      o_.write = [](const std::string& text) {
        std::fputs(text.c_str(), stderr);
        std::fflush(stderr);
      };
    on_ = o_.terminal;
    if (!on_) {
      report_once("live-view-no-terminal", "live view off: stderr is not a terminal");
      return;
    }
#if !defined(_WIN32)
    if (!o_.cursor) {
      auto terminal = std::make_shared<detail::terminal_cursor>();
      o_.cursor = [terminal] { return terminal->ask(); };
    }
#endif
    start_ns_ = o_.clock();
    if (o_.background)
      thread_ = std::thread([this] {
        detail::name_this_thread("traceml live");
        redraw_loop();
      });
  }
  ~live_view() { stop(); }
  live_view(const live_view&) = delete;
  live_view& operator=(const live_view&) = delete;

  /// Whether the view draws (false without a terminal).
  bool on() const noexcept { return on_; }

  /// A finished step, from the training thread. Cost: one lock (shared only with the drawing
  /// thread's copy, twice a second) and live_board::add(); no allocation.
  void publish(const step_result& st) noexcept {
    if (!on_) return;
    detail::lock_guard lock(mu_);
    board_.add(st);
  }

  /// Draws when it is time: over the last frame at most once per interval_ns while nothing else
  /// wrote to the terminal since; otherwise a new frame below, once the terminal was quiet for an
  /// interval or append_interval_ns after the last frame. Returns whether it drew. Called by the
  /// background thread; without one, by the owner.
  bool tick(std::int64_t now_ns) {
    if (!on_) return false;
    const std::optional<detail::cursor_position> where = o_.cursor ? o_.cursor() : std::nullopt;
    const bool in_place = drawn_ && where && after_frame_ && *where == *after_frame_;
    const bool quiet = where && last_seen_ && *where == *last_seen_;  // nothing written for an interval
    last_seen_ = where;
    if (drawn_) {
      const std::int64_t since = now_ns - last_draw_ns_;
      if (since < o_.interval_ns) return false;
      if (!in_place && !quiet && since < o_.append_interval_ns) return false;
    }
    detail::live_board copy;
    {
      detail::lock_guard lock(mu_);
      copy = board_;
    }
    const auto snapshot =
        detail::make_live_snapshot(copy, o_.run_name, o_.expected_steps, static_cast<double>(now_ns - start_ns_) / 1e9);
    const auto lines = render_live_view(snapshot);
    o_.write(in_place ? detail::live_frame(lines, lines_drawn_) : detail::live_block(lines, where ? where->column : 0));
    lines_drawn_ = lines.size();
    after_frame_ = o_.cursor ? o_.cursor() : std::nullopt;
    last_seen_ = after_frame_;
    last_draw_ns_ = now_ns;
    drawn_ = true;
    return true;
  }

  /// Ends the view: joins the drawing thread and erases what it drew, so that what follows (the
  /// profiler's table) starts where the view began. Idempotent.
  void stop() {
    {
      detail::lock_guard lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (!drawn_) return;
    // Erased only where nothing else wrote since the last frame; otherwise it stays, and what
    // follows starts on a line of its own.
    const std::optional<detail::cursor_position> where = o_.cursor ? o_.cursor() : std::nullopt;
    if (where && after_frame_ && *where == *after_frame_)
      o_.write(detail::live_erase(lines_drawn_));
    else if (!where || where->column != 1)
      o_.write("\r\n");
    lines_drawn_ = 0;
    drawn_ = false;
  }

 private:
  void redraw_loop() {
    detail::unique_lock lock(mu_);
    while (!stopped_) {
      lock.unlock();
      tick(o_.clock());
      lock.lock();
      wake_.wait_for(lock.native(), std::chrono::nanoseconds(o_.interval_ns),
                     [this]() TRACEML_REQUIRES(mu_) { return stopped_; });
    }
  }

  live_view_options o_;
  bool on_ = false;
  std::int64_t start_ns_ = 0;
  // mu_ guards board_ and stopped_ (one lock: the training thread's publish, the drawing thread's
  // copy, stop()'s flag and the thread's wake-ups).
  detail::mutex mu_;
  std::condition_variable wake_;
  detail::live_board board_ TRACEML_GUARDED_BY(mu_);
  bool stopped_ TRACEML_GUARDED_BY(mu_) = false;
  // Touched only by whoever calls tick() (the drawing thread), and by stop() once it has joined it.
  std::size_t lines_drawn_ = 0;
  std::optional<detail::cursor_position> after_frame_;  // where the last frame left the cursor
  std::optional<detail::cursor_position> last_seen_;    // where the cursor was at the last tick
  std::int64_t last_draw_ns_ = 0;
  bool drawn_ = false;
  std::thread thread_;
};

TRACEML_END_NAMESPACE
