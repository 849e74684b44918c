// traceml: the command line for saved runs. Reads JSON summaries (schema traceml.summary/3) and
// prints or writes what the profiler would have, with the library's own sinks and comparison.
//
//   traceml show mlp_summary.json                       the terminal table of each run in the file
//   traceml compare a/mlp_summary.json b/mlp_summary.json [--json comparison.json]
//                                                       side by side, and why the slowest is slower
//   traceml html a.json b.json -o report.html           the HTML report (with the explanation)
//   traceml ranks r0_steps.jsonl r1_steps.jsonl [--world-size 4] [--warmup 5]
//                                                       the ranks of a data-parallel run: slowest
//                                                       rank, skew, who waited for whom
//
// Exit status: 0 done; 1 an output could not be written; 2 a usage error or an input that is not a
// readable traceml summary (one line on stderr: "traceml: FILE: problem").
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <traceml/compare.hpp>
#include <traceml/ranks.hpp>
#include <traceml/sinks/comparison_json.hpp>
#include <traceml/sinks/comparison_table.hpp>
#include <traceml/sinks/html_report.hpp>
#include <traceml/sinks/report_table.hpp>

#include "steps_reader.hpp"
#include "summary_reader.hpp"

namespace {

constexpr int exit_ok = 0, exit_output = 1, exit_input = 2;

/// An input problem: the one line to print, and the status 2.
struct input_error {
  std::string message;
};

/// A run and the file it came from.
struct loaded_run {
  traceml::run_result run;
  std::string file;
};

/// Every run of every file, in order; the first unreadable file stops with its reason.
std::vector<loaded_run> load(const std::vector<std::string>& files) {
  std::vector<loaded_run> out;
  for (const auto& f : files) {
    try {
      auto saved = traceml::tools::read_summary_file(f);
      if (saved.runs.empty()) throw traceml::tools::summary_error("holds no run");
      for (auto& r : saved.runs) out.push_back({std::move(r), f});
    } catch (const traceml::tools::summary_error& e) {
      throw input_error{f + ": " + e.what()};
    }
  }
  return out;
}

/// Column names: the run names, with " (N)" where two runs share a name, as two runs of one program
/// do (N: the run's position among all runs). With `group_repeats`, runs named NAME#K are repeats of
/// one column NAME, and N is the file's position (repeats share a file).
std::vector<traceml::compared_run> columns(const std::vector<loaded_run>& runs, const std::vector<std::string>& files,
                                           bool group_repeats) {
  const auto base = [&](const loaded_run& r) {
    return group_repeats ? r.run.name.substr(0, r.run.name.rfind('#')) : r.run.name;
  };
  std::vector<std::string> names;
  std::vector<std::vector<traceml::run_result>> groups;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    std::string name = base(r);
    const bool shared = std::any_of(runs.begin(), runs.end(), [&](const loaded_run& o) {
      return &o != &r && base(o) == name && (!group_repeats || o.file != r.file);
    });
    const std::size_t position =
        group_repeats ? static_cast<std::size_t>(std::find(files.begin(), files.end(), r.file) - files.begin()) : i;
    if (shared) name += " (" + std::to_string(position + 1) + ")";
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end() || !group_repeats) {
      names.push_back(name);
      groups.push_back({r.run});
    } else {
      groups[static_cast<std::size_t>(it - names.begin())].push_back(r.run);
    }
  }
  std::vector<traceml::compared_run> out;
  for (std::size_t i = 0; i < names.size(); ++i) out.push_back(traceml::make_compared_run(names[i], groups[i]));
  return out;
}

std::vector<traceml::run_result> plain_runs(std::vector<loaded_run> runs) {
  std::vector<traceml::run_result> out;
  for (auto& r : runs) out.push_back(std::move(r.run));
  return out;
}

/// Writes `text` to `path`; false with one line on stderr when it cannot.
bool write_file(const std::string& path, const std::string& text) {
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int err = errno;
  if (f && std::fclose(f) != 0) ok = false;
  if (!ok) std::fprintf(stderr, "traceml: cannot write %s: %s\n", path.c_str(), std::strerror(err ? err : errno ? errno : EIO));
  return ok;
}

int show(const std::vector<std::string>& files) {
  const auto runs = load(files);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (i) std::fputc('\n', stdout);
    std::fputs(traceml::format_table(runs[i].run).c_str(), stdout);
  }
  return exit_ok;
}

int compare(const std::vector<std::string>& files, const std::string& json_path, bool group_repeats) {
  const auto runs = load(files);
  auto cols = columns(runs, files, group_repeats);
  if (cols.size() < 2)
    throw input_error{"compare needs at least two runs; " + files.front() + " holds " + std::to_string(runs.size()) +
                      (runs.size() == 1 ? " run" : " runs") + (group_repeats ? " of one name" : "")};
  const auto c = traceml::compare_runs(std::move(cols));
  std::fputs(traceml::format_comparison_table(c.runs).c_str(), stdout);
  std::fputs(("\n" + c.explanation).c_str(), stdout);
  if (!json_path.empty() && !write_file(json_path, traceml::comparison_json(c))) return exit_output;
  return exit_ok;
}

int html(const std::vector<std::string>& files, const std::string& out, const std::string& title, bool group_repeats) {
  auto runs = load(files);
  std::string explanation;
  if (runs.size() > 1) explanation = traceml::compare_runs(columns(runs, files, group_repeats)).explanation;
  const std::string report = traceml::html_report(plain_runs(std::move(runs)), title, explanation);
  return write_file(out, report) ? exit_ok : exit_output;
}

int ranks(const std::vector<std::string>& files, int world_size, std::size_t warmup) {
  if (world_size == 0) world_size = static_cast<int>(files.size());
  if (static_cast<std::size_t>(world_size) < files.size())
    throw input_error{"ranks: " + std::to_string(files.size()) + " files for a world size of " + std::to_string(world_size) +
                      " (one file per rank, rank 0 first)"};
  std::vector<traceml::rank_steps> got;
  std::map<int, std::string> file_of_rank;  // files whose lines say their rank may come in any order
  for (std::size_t i = 0; i < files.size(); ++i) {
    try {
      auto r = traceml::tools::read_rank_steps(files[i], static_cast<int>(i));
      if (r.cut_line)
        std::fprintf(stderr, "traceml: %s: its last line is cut (the rank stopped while writing it); left out\n",
                     files[i].c_str());
      if (r.steps.rank >= world_size)
        throw input_error{files[i] + ": its lines say rank " + std::to_string(r.steps.rank) + ", beyond a world size of " +
                          std::to_string(world_size)};
      const auto [at, fresh] = file_of_rank.emplace(r.steps.rank, files[i]);
      if (!fresh)
        throw input_error{"ranks: " + at->second + " and " + files[i] + " are both rank " + std::to_string(r.steps.rank) +
                          (r.labelled ? " (as their lines say)" : "")};
      got.push_back(std::move(r.steps));
    } catch (const traceml::tools::steps_error& e) {
      throw input_error{files[i] + ": " + e.what()};
    }
  }
  std::fputs(traceml::format_rank_table(traceml::merge_ranks(got, world_size, warmup)).c_str(), stdout);
  return exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"traceml: look at and compare saved runs (JSON summaries, schema traceml.summary/3)."};
  app.require_subcommand(1);
  std::vector<std::string> files;
  std::string json_path, html_path, title = "traceml report";
  bool group_repeats = false;

  auto* show_cmd = app.add_subcommand("show", "print the table of each run in the files, as the profiler printed it");
  show_cmd->add_option("files", files, "JSON summaries")->required();

  auto* compare_cmd = app.add_subcommand(
      "compare", "the runs side by side, and why the slowest is slower than the fastest (or that the difference is noise)");
  compare_cmd->add_option("files", files, "JSON summaries (every run in them is a column)")->required();
  compare_cmd->add_option("--json", json_path, "also write the comparison object (docs/json-schema.md) to this file");
  compare_cmd->add_flag("--group-repeats", group_repeats, "runs named NAME#1, NAME#2, ... are repeats of one column NAME");

  auto* html_cmd = app.add_subcommand("html", "write the HTML report of the runs (several: compared, with the explanation)");
  html_cmd->add_option("files", files, "JSON summaries")->required();
  html_cmd->add_option("-o,--output", html_path, "the HTML file to write")->required();
  html_cmd->add_option("--title", title, "the report's title")->capture_default_str();
  html_cmd->add_flag("--group-repeats", group_repeats, "runs named NAME#1, NAME#2, ... are repeats of one column NAME");

  int world_size = 0, warmup = 0;
  auto* ranks_cmd = app.add_subcommand(
      "ranks", "the ranks of one data-parallel run side by side: step and compute time per rank, the slowest rank, "
               "skew, who waited for whom, missing ranks");
  ranks_cmd->add_option("files", files, "per-step JSONL files, one per rank, rank 0 first")->required();
  ranks_cmd->add_option("--world-size", world_size, "ranks in the run (default: the number of files); those "
                                                    "beyond the files are reported missing")
      ->check(CLI::Range(1, 1 << 20));
  ranks_cmd->add_option("--warmup", warmup, "leading steps (numbered below this) left out")
      ->check(CLI::Range(0, 1000000000))->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other input problem (CLI11's own exit codes would say nothing to a script).
    std::fprintf(stderr, "traceml: %s (traceml --help)\n", e.what());
    return exit_input;
  }

  try {
    if (show_cmd->parsed()) return show(files);
    if (compare_cmd->parsed()) return compare(files, json_path, group_repeats);
    if (ranks_cmd->parsed()) return ranks(files, world_size, static_cast<std::size_t>(warmup));
    return html(files, html_path, title, group_repeats);
  } catch (const input_error& e) {
    std::fprintf(stderr, "traceml: %s\n", e.message.c_str());
    return exit_input;
  }
}
