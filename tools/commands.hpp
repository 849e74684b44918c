// traceml tools: the subcommands of the `traceml` command (show, compare, html, ranks) as functions
// that write to streams, for traceml_cli.cpp (which parses the arguments) and for the fuzz target
// that runs them on files made from its input.
//
//   traceml::cli::options o;
//   o.files = {"a/mlp_summary.json", "b/mlp_summary.json"};
//   int status = traceml::cli::run(traceml::cli::command::compare, o, std::cout, std::cerr);
//
// run() never throws: every failure is one line on `err`, "traceml: FILE: problem" for an input
// that is not what it should be, "traceml: SUBCOMMAND: what" for anything else (out of memory
// included), with exit status 2 (1: an output file could not be written; 3: compare --fail-if-slower
// found a new run slower than the base). Everything written to `out` and `err` passes through
// detail::printable(): names and messages quote what the files hold, and a control character there
// must not reach the terminal.
#pragma once
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <new>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <traceml/analysis/compare.hpp>
#include <traceml/analysis/ranks.hpp>
#include <traceml/analysis/regression_gate.hpp>
#include <traceml/sinks/comparison_json.hpp>
#include <traceml/sinks/comparison_table.hpp>
#include <traceml/sinks/gate_words.hpp>
#include <traceml/sinks/html_report.hpp>
#include <traceml/sinks/report_table.hpp>

#include "steps_reader.hpp"
#include "summary_reader.hpp"

namespace traceml::cli {

inline constexpr int exit_ok = 0, exit_output = 1, exit_input = 2;
/// compare --fail-if-slower: a new run is slower than the base beyond the tolerance and the noise.
inline constexpr int exit_slower = 3;

enum class command { show, compare, html, ranks };

inline const char* command_name(command c) {
  switch (c) {
    case command::show: return "show";
    case command::compare: return "compare";
    case command::html: return "html";
    case command::ranks: return "ranks";
  }
  return "?";
}

/// The arguments of a subcommand (those another one does not take are ignored).
struct options {
  std::vector<std::string> files;
  std::string json_path;                 ///< compare --json
  std::string html_path;                 ///< html -o
  std::string title = "traceml report";  ///< html --title
  bool group_repeats = false;            ///< compare, html --group-repeats
  bool gate = false;                     ///< compare --fail-if-slower given
  std::string fail_if_slower;            ///< its PCT, as typed (checked by gate_tolerance)
  int world_size = 0;                    ///< ranks --world-size (0: the number of files)
  std::size_t warmup = 0;                ///< ranks --warmup
};

/// An input problem: the one line to print, and the status 2.
struct input_error {
  std::string message;
};

namespace detail {

/// Terminal text: the one way the commands write to `out` and `err`.
inline void print(std::ostream& os, const std::string& text) { os << traceml::detail::printable(text, true); }

/// A run and the file it came from.
struct loaded_run {
  run_result run;
  std::string file;
};

/// Every run of every file, in order; the first unreadable file stops with its reason.
inline std::vector<loaded_run> load(const std::vector<std::string>& files) {
  std::vector<loaded_run> out;
  for (const auto& f : files) {
    try {
      auto saved = tools::read_summary_file(f);
      if (saved.runs.empty()) throw tools::summary_error("holds no run");
      for (auto& r : saved.runs) out.push_back({std::move(r), f});
    } catch (const tools::summary_error& e) {
      throw input_error{f + ": " + e.what()};
    }
  }
  return out;
}

/// A run's column name: its name, with " (N)" where two runs share a name, as two runs of one
/// program do (N: the run's position among all runs). With `group_repeats`, runs named NAME#K are
/// repeats of one column NAME, and N is the file's position (repeats share a file).
inline std::string column_name(const std::vector<loaded_run>& runs, const std::vector<std::string>& files,
                               bool group_repeats, std::size_t i) {
  const auto base = [&](const loaded_run& r) {
    return group_repeats ? r.run.name.substr(0, r.run.name.rfind('#')) : r.run.name;
  };
  const auto& r = runs[i];
  std::string name = base(r);
  const bool shared = std::any_of(runs.begin(), runs.end(), [&](const loaded_run& o) {
    return &o != &r && base(o) == name && (!group_repeats || o.file != r.file);
  });
  const std::size_t position =
      group_repeats ? static_cast<std::size_t>(std::find(files.begin(), files.end(), r.file) - files.begin()) : i;
  if (shared) name += " (" + std::to_string(position + 1) + ")";
  return name;
}

/// The columns of a comparison, named by column_name (repeats grouped into one with `group_repeats`).
inline std::vector<compared_run> columns(const std::vector<loaded_run>& runs, const std::vector<std::string>& files,
                                         bool group_repeats) {
  std::vector<std::string> names;
  std::vector<std::vector<run_result>> groups;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string name = column_name(runs, files, group_repeats, i);
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end() || !group_repeats) {
      names.push_back(name);
      groups.push_back({runs[i].run});
    } else {
      groups[static_cast<std::size_t>(it - names.begin())].push_back(runs[i].run);
    }
  }
  std::vector<compared_run> out;
  for (std::size_t i = 0; i < names.size(); ++i) out.push_back(make_compared_run(names[i], groups[i]));
  return out;
}

/// The runs named as the comparison names them (column_name; a repeat keeps its "#K"), so that the
/// HTML report's charts and tables use the labels its explanation uses.
inline std::vector<run_result> labelled_runs(std::vector<loaded_run> runs, const std::vector<std::string>& files,
                                             bool group_repeats) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::string name = column_name(runs, files, group_repeats, i);
    const auto hash = runs[i].run.name.rfind('#');
    if (group_repeats && hash != std::string::npos) name += runs[i].run.name.substr(hash);
    names.push_back(std::move(name));
  }
  std::vector<run_result> out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    out.push_back(std::move(runs[i].run));
    out.back().name = names[i];
  }
  return out;
}

/// Writes `text` to `path`; false with one line on `err` when it cannot.
inline bool write_file(const std::string& path, const std::string& text, std::ostream& err) {
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int e = errno;
  if (f && std::fclose(f) != 0) ok = false;
  if (!ok) print(err, "traceml: cannot write " + path + ": " + std::strerror(e ? e : errno ? errno : EIO) + "\n");
  return ok;
}

}  // namespace detail

/// traceml show: the table of each run in the files, as the profiler printed it.
inline int show(const options& o, std::ostream& out, std::ostream& /*err*/) {
  const auto runs = detail::load(o.files);
  for (std::size_t i = 0; i < runs.size(); ++i) detail::print(out, (i ? "\n" : "") + format_table(runs[i].run));
  return exit_ok;
}

namespace detail {
/// The PCT of --fail-if-slower ("5", "2.5", "5%") as a share (0.05); anything else, a negative or
/// non-finite number included, is an input error that says what was given.
inline double gate_tolerance(const std::string& text) {
  std::string t = text;
  if (!t.empty() && t.back() == '%') t.pop_back();
  const bool digits = !t.empty() && std::count(t.begin(), t.end(), '.') <= 1 && t != "." &&
                      std::all_of(t.begin(), t.end(), [](char ch) { return (ch >= '0' && ch <= '9') || ch == '.'; });
  const double v = digits ? std::strtod(t.c_str(), nullptr) : -1;  // digits and one '.': no locale, no sign
  if (!digits || !std::isfinite(v))
    throw input_error{"compare: --fail-if-slower wants a percentage >= 0 (as 5 or 2.5), not '" + text + "'"};
  return v / 100;
}

/// The one run of a file the gate compares; a file of several runs, or of none measured, is refused.
inline run_result gate_run(const std::string& file) {
  auto runs = load({file});
  if (runs.size() != 1)
    throw input_error{file + ": holds " + std::to_string(runs.size()) +
                      " runs; --fail-if-slower compares one run per file (the base first, then each new run)"};
  if (runs.front().run.summary.step_ms.count == 0 || runs.front().run.summary.step_ms.median <= 0)
    throw input_error{file + ": has no measured steps, so --fail-if-slower has nothing to compare"};
  return std::move(runs.front().run);
}
}  // namespace detail

/// traceml compare --fail-if-slower PCT BASE NEW...: the comparison of all the runs, then one line per
/// new run against the base (analysis/regression_gate.hpp, sinks/gate_words.hpp); exit status 3 when
/// any new run is slower beyond PCT and beyond the runs' noise, 0 otherwise.
inline int gate(const options& o, std::ostream& out, std::ostream& err) {
  const double tolerance = detail::gate_tolerance(o.fail_if_slower);
  if (o.files.size() < 2)
    throw input_error{"compare: --fail-if-slower needs a base summary and at least one new one (BASE NEW...)"};
  std::vector<detail::loaded_run> runs;
  for (const auto& f : o.files) runs.push_back({detail::gate_run(f), f});
  const auto c = compare_runs(detail::columns(runs, o.files, false));
  detail::print(out, format_comparison_table(c.runs) + "\n" + c.explanation + "\n");
  if (!o.json_path.empty() && !detail::write_file(o.json_path, comparison_json(c), err)) return exit_output;
  bool slower = false;
  for (std::size_t i = 1; i < runs.size(); ++i) {
    const auto g = regression_gate(runs.front().run.summary, runs[i].run.summary, tolerance);
    slower = slower || g.outcome == gate_outcome::slower;
    detail::print(out, gate_line(g, o.files.front(), o.files[i]));
  }
  return slower ? exit_slower : exit_ok;
}

/// traceml compare: the runs side by side, and why the slowest is slower.
inline int compare(const options& o, std::ostream& out, std::ostream& err) {
  if (o.gate) return gate(o, out, err);
  const auto runs = detail::load(o.files);
  auto cols = detail::columns(runs, o.files, o.group_repeats);
  if (cols.size() < 2)
    throw input_error{"compare needs at least two runs; " + o.files.front() + " holds " + std::to_string(runs.size()) +
                      (runs.size() == 1 ? " run" : " runs") + (o.group_repeats ? " of one name" : "")};
  const auto c = compare_runs(std::move(cols));
  detail::print(out, format_comparison_table(c.runs) + "\n" + c.explanation);
  if (!o.json_path.empty() && !detail::write_file(o.json_path, comparison_json(c), err)) return exit_output;
  return exit_ok;
}

/// traceml html: the HTML report of the runs (several: compared, with the explanation).
inline int html(const options& o, std::ostream& /*out*/, std::ostream& err) {
  auto runs = detail::load(o.files);
  std::string explanation;
  if (runs.size() > 1) explanation = compare_runs(detail::columns(runs, o.files, o.group_repeats)).explanation;
  const std::string report =
      html_report(detail::labelled_runs(std::move(runs), o.files, o.group_repeats), o.title, explanation);
  return detail::write_file(o.html_path, report, err) ? exit_ok : exit_output;
}

namespace detail {
/// Refuses two rank files that are not of one run: another run name, another world size, or another
/// schedule (a step both recorded with different micro-batches).
inline void check_same_run(const tools::read_steps& a, const std::string& file_a, const tools::read_steps& b,
                           const std::string& file_b) {
  const auto refuse = [&](const std::string& why) {
    throw input_error{"ranks: " + file_a + " and " + file_b + " are not ranks of one run: " + why};
  };
  if (a.run != b.run) refuse("run \"" + a.run + "\" and run \"" + b.run + "\"");
  if (a.world_size && b.world_size && a.world_size != b.world_size)
    refuse("world size " + std::to_string(a.world_size) + " and " + std::to_string(b.world_size));
  std::map<std::uint64_t, int> micro_a;
  for (std::size_t i = 0; i < a.steps.steps.size(); ++i) micro_a.emplace(a.steps.steps[i].step, a.microbatches[i]);
  for (std::size_t i = 0; i < b.steps.steps.size(); ++i) {
    const auto it = micro_a.find(b.steps.steps[i].step);
    if (it != micro_a.end() && it->second != b.microbatches[i])
      refuse("step " + std::to_string(it->first) + " has " + std::to_string(it->second) + " micro-batches in one and " +
             std::to_string(b.microbatches[i]) + " in the other (another schedule)");
  }
}
}  // namespace detail

/// traceml ranks: the ranks of one data-parallel run side by side (one per-step JSONL per rank).
/// Every file must hold steps of one run (the same run name, world size and schedule); a file with no
/// step is refused (a rank that recorded nothing is reported missing with --world-size).
inline int ranks(const options& o, std::ostream& out, std::ostream& err) {
  const auto& files = o.files;
  std::vector<tools::read_steps> read;
  for (std::size_t i = 0; i < files.size(); ++i) {
    try {
      read.push_back(tools::read_rank_steps(files[i], static_cast<int>(i)));
    } catch (const tools::steps_error& e) {
      throw input_error{files[i] + ": " + e.what()};
    }
    if (read.back().cut_line)
      detail::print(err,
                    "traceml: " + files[i] + ": its last line is cut (the rank stopped while writing it); left out\n");
    if (read.back().steps.steps.empty())
      throw input_error{files[i] +
                        ": holds no step (an empty per-step file; a rank that recorded nothing is reported "
                        "missing when --world-size counts it)"};
    if (i > 0) detail::check_same_run(read.front(), files.front(), read.back(), files[i]);
  }
  // The world size: given, else what the lines say, else one rank per file.
  const int said = read.empty() ? 0 : read.front().world_size;
  if (o.world_size != 0 && said != 0 && o.world_size != said)
    throw input_error{"ranks: --world-size " + std::to_string(o.world_size) + ", but " + files.front() +
                      " says its run had " + std::to_string(said) + " ranks"};
  const int world_size = o.world_size != 0 ? o.world_size : said != 0 ? said : static_cast<int>(files.size());
  if (world_size < 1 || static_cast<std::size_t>(world_size) < files.size())
    throw input_error{"ranks: " + std::to_string(files.size()) + " files for a world size of " +
                      std::to_string(world_size) + " (one file per rank, rank 0 first)"};
  std::vector<rank_steps> got;
  std::map<int, std::string> file_of_rank;  // files whose lines say their rank may come in any order
  for (std::size_t i = 0; i < files.size(); ++i) {
    {
      auto& r = read[i];
      if (r.steps.rank >= world_size)
        throw input_error{files[i] + ": its lines say rank " + std::to_string(r.steps.rank) +
                          ", beyond a world size of " + std::to_string(world_size)};
      const auto [at, fresh] = file_of_rank.emplace(r.steps.rank, files[i]);
      if (!fresh)
        throw input_error{"ranks: " + at->second + " and " + files[i] + " are both rank " +
                          std::to_string(r.steps.rank) + (r.labelled ? " (as their lines say)" : "")};
      got.push_back(std::move(r.steps));
    }
  }
  rank_merge merged;
  try {
    merged = merge_ranks(got, world_size, o.warmup);
  } catch (const std::invalid_argument& e) {  // what the checks above left: said as an input problem
    throw input_error{std::string("ranks: ") + e.what()};
  }
  detail::print(out, format_rank_table(merged));
  return exit_ok;
}

/// Runs one subcommand; never throws. Exit status 0, 1 (an output not written), 2 (anything else,
/// with one line on `err`) or 3 (compare --fail-if-slower: a new run is slower).
inline int run(command c, const options& o, std::ostream& out, std::ostream& err) noexcept {
  const char* name = command_name(c);
  // Written without building a string, which might need the memory that just ran out.
  const auto fail = [&](const char* what) {
    try {
      err << "traceml: " << name << ": " << what << "\n";
    } catch (...) {
    }
    return exit_input;
  };
  try {
    try {
      switch (c) {
        case command::show: return show(o, out, err);
        case command::compare: return compare(o, out, err);
        case command::html: return html(o, out, err);
        case command::ranks: return ranks(o, out, err);
      }
      return fail("unknown subcommand");
    } catch (const input_error& e) {
      detail::print(err, "traceml: " + traceml::detail::printable(e.message) + "\n");
      return exit_input;
    } catch (const std::bad_alloc&) {
      return fail("out of memory");
    } catch (const std::exception& e) {
      detail::print(err, std::string("traceml: ") + name + ": " + traceml::detail::printable(e.what()) + "\n");
      return exit_input;
    }
  } catch (const std::bad_alloc&) {  // printing the message needed memory too
    return fail("out of memory");
  } catch (...) {
    return fail("unknown error");
  }
}

}  // namespace traceml::cli
