// qwen3/input_file.hpp: the check every input file gets before it is opened.
//
//   const auto f = qwen3::probe_input_file(path);
//   if (!f.problem.empty()) throw std::runtime_error(path + ": " + f.problem);
//   // f.size: bytes of a regular, readable file
//
// Opening a directory with std::ifstream succeeds on Linux and seeking to its end reports
// 9223372036854775807 bytes, so "is it a file of N bytes" is asked of stat(), never of a seek.
// POSIX stat() rather than std::filesystem: a test binary linked against the LibTorch 2.x wheel and
// built with GCC 13 crashed inside std::filesystem (the tests avoid it for the same reason).
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

namespace qwen3 {

/// What stat() and access() say about a file about to be read.
struct input_file {
  std::uint64_t size = 0;  ///< bytes, when problem is empty
  std::string problem;     ///< empty: a regular file this process may read; else one clause, e.g. "is a directory"
};

/// Probes `path` without opening it. Problems: missing ("cannot open: No such file or directory"),
/// a directory, not a regular file (FIFOs and devices have no meaningful size), not readable.
inline input_file probe_input_file(const std::string& path) {
  input_file f;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    f.problem = std::string("cannot open: ") + std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    f.problem = "is a directory, not a file";
  } else if (!S_ISREG(st.st_mode)) {
    f.problem = "is not a regular file (a pipe or device has no size to check)";
  } else if (::access(path.c_str(), R_OK) != 0) {
    f.problem = std::string("cannot open for reading: ") + std::strerror(errno);
  } else {
    f.size = static_cast<std::uint64_t>(st.st_size);
  }
  return f;
}

}  // namespace qwen3
