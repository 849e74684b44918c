// traceml: the command line for saved runs. Reads JSON summaries (schema traceml.summary/3) and
// prints or writes what the profiler would have, with the library's own sinks and comparison.
//
//   traceml show mlp_summary.json                       the terminal table of each run in the file
//   traceml compare a/mlp_summary.json b/mlp_summary.json [--json comparison.json]
//                                                       side by side, and why the slowest is slower
//   traceml compare --fail-if-slower 5 base.json new.json [new2.json ...]
//                                                       the same, then a line per new run against the
//                                                       base; exit status 3 when one is slower by more
//                                                       than 5% and beyond the runs' noise (a CI gate)
//   traceml html a.json b.json -o report.html           the HTML report (with the explanation)
//   traceml ranks r0_steps.jsonl r1_steps.jsonl [--world-size 4] [--warmup 5]
//                                                       the ranks of a data-parallel run: slowest
//                                                       rank, skew, who waited for whom
//   traceml --version                                   "traceml 0.1.0"
//
// Exit status: 0 done; 1 an output could not be written; 3 compare --fail-if-slower found a new run
// slower than the base; 2 a usage error or an input that is not a
// readable traceml summary (one line on stderr: "traceml: FILE: problem"), or any other failure,
// out of memory included ("traceml: SUBCOMMAND: what"). Inputs must be regular files of bounded size
// and nesting (tools/input_file.hpp); names are printed with control characters escaped. The
// subcommands themselves are in commands.hpp.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include <traceml/config.hpp>

#include "commands.hpp"

namespace {

// Out of memory. The JSON library's destructors allocate (they free a tree without recursing, with
// a stack on the heap): a bad_alloc thrown while a half-built tree unwinds would escape a destructor
// and abort. So the first failed allocation gives back a reserve and throws, and unwinding has room;
// should one fail even so, the handler says it and exits. Either way: one line, exit status 2.
const char* subcommand = "traceml";
void* volatile reserve = nullptr;
constexpr std::size_t reserve_bytes = std::size_t{16} << 20;

void out_of_memory() {
  if (reserve) {
    std::free(reserve);
    reserve = nullptr;
    throw std::bad_alloc();
  }
  std::fflush(stdout);
  std::fputs("traceml: ", stderr);  // stderr is unbuffered: nothing here allocates
  std::fputs(subcommand, stderr);
  std::fputs(": out of memory\n", stderr);
  std::_Exit(traceml::cli::exit_input);
}

/// The four subcommands, and the ranks options read as ints (checked by range) before they go into
/// the options.
struct subcommands {
  CLI::App* show = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* html = nullptr;
  CLI::App* ranks = nullptr;
  int world_size = 0, warmup = 0;
};

/// Declares the subcommands on `app`, their arguments read into `o` and `subs`.
void add_subcommands(CLI::App& app, traceml::cli::options& o, subcommands& subs) {
  subs.show = app.add_subcommand("show", "print the table of each run in the files, as the profiler printed it");
  subs.show->add_option("files", o.files, "JSON summaries")->required();

  subs.compare = app.add_subcommand(
      "compare",
      "the runs side by side, and why the slowest is slower than the fastest (or that the difference is noise)");
  subs.compare->add_option("files", o.files, "JSON summaries (every run in them is a column)")->required();
  subs.compare->add_option("--json", o.json_path,
                           "also write the comparison object (docs/json-schema.md) to this file");
  auto* group_compare = subs.compare->add_flag("--group-repeats", o.group_repeats,
                                               "runs named NAME#1, NAME#2, ... are repeats of one column NAME");
  subs.compare
      ->add_option("--fail-if-slower", o.fail_if_slower,
                   "PCT: the first file is the base, each other file a new run; exit status 3 when a new run's median "
                   "step is slower than the base's by more than PCT percent and beyond the runs' noise, 0 otherwise "
                   "(one file, one run)")
      ->excludes(group_compare);

  subs.html = app.add_subcommand("html", "write the HTML report of the runs (several: compared, with the explanation)");
  subs.html->add_option("files", o.files, "JSON summaries")->required();
  subs.html->add_option("-o,--output", o.html_path, "the HTML file to write")->required();
  subs.html->add_option("--title", o.title, "the report's title")->capture_default_str();
  subs.html->add_flag("--group-repeats", o.group_repeats,
                      "runs named NAME#1, NAME#2, ... are repeats of one column NAME");

  subs.ranks = app.add_subcommand(
      "ranks",
      "the ranks of one data-parallel run side by side: step and compute time per rank, the slowest rank, "
      "skew, who waited for whom, missing ranks");
  subs.ranks->add_option("files", o.files, "per-step JSONL files, one per rank, rank 0 first")->required();
  subs.ranks
      ->add_option("--world-size", subs.world_size,
                   "ranks in the run (default: the number of files); those "
                   "beyond the files are reported missing")
      ->check(CLI::Range(1, 1 << 20));
  subs.ranks->add_option("--warmup", subs.warmup, "leading steps (numbered below this) left out")
      ->check(CLI::Range(0, 1000000000))
      ->capture_default_str();
}

/// Parses the arguments: -1 when the command is to run, otherwise the exit status (help, version,
/// an unknown subcommand or a bad argument, said in one line).
int parse_arguments(CLI::App& app, const subcommands& subs, int argc, char** argv) {
  namespace cli = traceml::cli;
  // A first argument that is neither an option nor a subcommand is named (CLI11 would only say that a
  // subcommand is required).
  if (argc > 1 && argv[1][0] != '-') {
    const std::string first = argv[1];
    bool known = false;
    for (const auto* sub : {subs.show, subs.compare, subs.html, subs.ranks}) known = known || sub->check_name(first);
    if (!known) {
      std::fprintf(stderr,
                   "traceml: unknown subcommand '%s' (the subcommands: show, compare, html, ranks; traceml --help)\n",
                   traceml::detail::printable(first).c_str());
      return cli::exit_input;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other input problem (CLI11's own exit codes would say nothing to a script).
    std::fprintf(stderr, "traceml: %s (traceml --help)\n", traceml::detail::printable(e.what()).c_str());
    return cli::exit_input;
  }

  return -1;
}

int parse_and_run(int argc, char** argv) {
  namespace cli = traceml::cli;
  CLI::App app{"traceml: look at and compare saved runs (JSON summaries, schema traceml.summary/3)."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("traceml ") + TRACEML_VERSION_STRING);
  cli::options o;
  subcommands subs;
  add_subcommands(app, o, subs);
  if (const int status = parse_arguments(app, subs, argc, argv); status >= 0) return status;

  o.gate = subs.compare->count("--fail-if-slower") > 0;
  o.world_size = subs.world_size;
  o.warmup = static_cast<std::size_t>(subs.warmup);
  const cli::command c = subs.show->parsed()      ? cli::command::show
                         : subs.compare->parsed() ? cli::command::compare
                         : subs.ranks->parsed()   ? cli::command::ranks
                                                  : cli::command::html;
  subcommand = cli::command_name(c);
  const int status = cli::run(c, o, std::cout, std::cerr);
  // What went to stdout must have reached it (`traceml show x > /dev/full` is a failure, not a 0).
  if (!(std::cout << std::flush) || std::fflush(stdout) != 0) {
    std::fprintf(stderr, "traceml: %s: cannot write the output: %s\n", subcommand, std::strerror(errno ? errno : EIO));
    return cli::exit_input;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  reserve = std::malloc(reserve_bytes);
  std::set_new_handler(out_of_memory);
  // run() catches what the subcommands throw; this, what setting up and parsing the arguments might.
  try {
    return parse_and_run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("traceml: out of memory\n", stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "traceml: %s\n", traceml::detail::printable(e.what()).c_str());
  } catch (...) {
    std::fputs("traceml: unknown error\n", stderr);
  }
  return traceml::cli::exit_input;
}
