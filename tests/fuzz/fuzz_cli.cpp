// Fuzz target: the `traceml` command itself (tools/commands.hpp), as a user runs it on a file: the
// input is written to a file, and show, compare (the file twice), html and ranks (the file as one
// rank, and as two ranks of a world of 3) run on it. Each must end with status 0 or 2 (never throw,
// never crash, whatever the file holds), say an error as one line "traceml: ...", and write nothing
// a terminal would take as a control sequence: no control character but the line break, on stdout
// or stderr (names and messages quote the file).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "commands.hpp"

namespace {

[[noreturn]] void broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz: broken contract: %s\n%s\n", what, detail.c_str());
  std::abort();
}

std::string dir;  // a folder of this process for the input file, removed at exit

void remove_dir() {
  std::remove((dir + "/input").c_str());
  ::rmdir(dir.c_str());
}

const std::string& input_path() {
  static const std::string path = [] {
    const char* tmp = std::getenv("TMPDIR");
    dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/traceml_fuzz_cli_XXXXXX";
    if (!::mkdtemp(dir.data())) broken("mkdtemp", dir);
    std::atexit(remove_dir);
    return dir + "/input";
  }();
  return path;
}

/// Runs one subcommand and checks what it wrote.
void check(traceml::cli::command c, const traceml::cli::options& o) {
  std::ostringstream out, err;
  const int status = traceml::cli::run(c, o, out, err);
  const std::string what = std::string(traceml::cli::command_name(c)) + " exit status " + std::to_string(status) +
                           "\n-- stdout:\n" + out.str() + "\n-- stderr:\n" + err.str();
  if (status != traceml::cli::exit_ok && status != traceml::cli::exit_input) broken("exit status 0 or 2", what);
  for (const std::string& text : {out.str(), err.str()})
    for (const char ch : text)
      if ((static_cast<unsigned char>(ch) < 0x20 && ch != '\n') || ch == 0x7f)
        broken("a control character written", what);
  // stderr: whole lines, each from the command; on failure at least one.
  const std::string e = err.str();
  if (status != traceml::cli::exit_ok && e.empty()) broken("a failure says why", what);
  if (!e.empty() && e.back() != '\n') broken("stderr ends with a line break", what);
  for (std::size_t at = 0; at < e.size(); at = e.find('\n', at) + 1)
    if (e.compare(at, 9, "traceml: ") != 0) broken("every stderr line begins with \"traceml: \"", what);
  if (status == traceml::cli::exit_ok && c != traceml::cli::command::html && out.str().empty())
    broken("success prints something", what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using traceml::cli::command;
  const std::string& path = input_path();
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) broken("writing the input file", path);
  }
  traceml::cli::options o;
  o.files = {path};
  check(command::show, o);
  o.html_path = "/dev/null";
  check(command::html, o);
  check(command::ranks, o);
  o.files = {path, path};
  check(command::compare, o);
  o.world_size = 3;
  o.warmup = 1;
  check(command::ranks, o);
  return 0;
}
