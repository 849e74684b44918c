// traceml tools: opening the files the `traceml` command is given, which may be anything a user or
// a script passes: only regular files are read (a FIFO would block, /dev/zero never ends), up to a
// bound on their size, and JSON is checked for its nesting depth before a parser builds it (the
// parser is iterative, but copying, printing and destroying the parsed value recurse once per level:
// 100,000 levels overflow the stack).
//
//   tools::input_file in(path, tools::max_summary_bytes, "a JSON summary");  // throws file_error
//   while (std::size_t n = in.read(buf, sizeof buf)) ...
//   if (auto at = tools::too_deep_at(text); at != std::string_view::npos) ...   // byte offset
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace traceml::tools {

/// A file that cannot be read: the message says why ("not a regular file (a FIFO)"), without the
/// file's name, which the command puts before it.
class file_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr std::uint64_t mib = std::uint64_t{1} << 20;
/// A summary is read whole and parsed into a JSON tree (about eight times its size in memory). What
/// traceml writes is bounded: per run the statistics, at most 1,024 timeline points and a list of
/// steps of at most 512 KiB (summary_step_list_max_bytes), so about 1 MB; 64 MiB leaves room for
/// summaries of many runs put together and keeps the tree well under a GB.
inline constexpr std::uint64_t max_summary_bytes = 64 * mib;
/// A per-step JSONL grows with the run (one line per step: a few hundred bytes, a few KB with GPU
/// figures). It is read line by line, but each step then costs about 250 bytes in the merge
/// (ranks.hpp): 256 MiB is 100,000 steps of 2 KB to a million of 250 bytes, and a file of the
/// shortest possible lines (9 million steps) merges in about 2.3 GB and a minute.
inline constexpr std::uint64_t max_steps_bytes = 256 * mib;
/// One step's line: a few KB, a few hundred KB with thousands of phases.
inline constexpr std::size_t max_step_line_bytes = 16 * mib;
/// JSON nesting: what traceml writes nests at most 10 levels deep (a step of a run with hardware
/// counters); a step line 3.
inline constexpr std::size_t max_json_depth = 128;

/// "64 MiB", "1024 MiB".
inline std::string mib_text(std::uint64_t bytes) { return std::to_string(bytes / mib) + " MiB"; }

/// "a directory", "a FIFO", ... for a file that is not a regular one.
inline const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

/// A regular file open for reading, at most `max_bytes` of it. The type and size are checked before
/// opening (a FIFO's open would block) and again on what was opened (it may have been replaced in
/// between); a file that grows past the bound while being read is refused there.
class input_file {
 public:
  /// `what` names what the file should be, for the size message ("a JSON summary").
  input_file(const std::string& path, std::uint64_t max_bytes, const char* what) : max_(max_bytes), what_(what) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw file_error(std::string("cannot open: ") + std::strerror(errno));
    check(st);
    do fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) throw file_error(std::string("cannot open: ") + std::strerror(errno));
    if (::fstat(fd_, &st) != 0) fail_errno("cannot read: ");
    check(st);
    // Back to blocking reads (a regular file's reads do not block either way).
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  ~input_file() {
    if (fd_ >= 0) ::close(fd_);
  }
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;

  /// The file's size when it was opened.
  std::uint64_t size() const noexcept { return size_; }

  /// Up to `n` bytes into `buf`; 0 at the end. Throws file_error on a read error, or when the file
  /// has grown past the bound.
  std::size_t read(char* buf, std::size_t n) {
    ssize_t got;
    do got = ::read(fd_, buf, n);
    while (got < 0 && errno == EINTR);
    if (got < 0) fail_errno("cannot read: ");
    read_ += static_cast<std::uint64_t>(got);
    if (read_ > max_) throw file_error("grew past the " + mib_text(max_) + " limit for " + what_ + " while being read");
    return static_cast<std::size_t>(got);
  }

  /// The whole file.
  std::string read_all() {
    std::string text;
    text.reserve(static_cast<std::size_t>(size_));
    char buf[1 << 16];
    while (const std::size_t n = read(buf, sizeof buf)) text.append(buf, n);
    return text;
  }

 private:
  void check(const struct stat& st) const {
    if (!S_ISREG(st.st_mode)) throw file_error(std::string("not a regular file (") + file_type_name(st.st_mode) + ")");
    if (static_cast<std::uint64_t>(st.st_size) > max_)
      throw file_error("too large: " + std::to_string(st.st_size) + " bytes, over the " + mib_text(max_) +
                       " limit for " + what_);
  }
  [[noreturn]] void fail_errno(const char* what) const { throw file_error(what + std::string(std::strerror(errno))); }

  int fd_ = -1;
  std::uint64_t max_, size_ = 0, read_ = 0;
  std::string what_;
};

/// Where JSON text first nests deeper than `max_depth` arrays and objects: the byte offset of the
/// bracket that opens one level too many, or npos. Counts as the parser would: brackets inside
/// strings do not count. (On text that is not JSON it may count wrong, but only past the point where
/// the parser stops, so a text the parser would take deeper is always caught.)
inline std::size_t too_deep_at(std::string_view text, std::size_t max_depth = max_json_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, whatever it is
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

/// "nested deeper than 128 levels".
inline std::string too_deep_text(std::size_t max_depth = max_json_depth) {
  return "nested deeper than " + std::to_string(max_depth) + " levels";
}

}  // namespace traceml::tools
