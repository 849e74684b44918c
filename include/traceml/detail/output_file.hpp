// traceml: files the sinks write. Any failure (missing directory, read-only, disk full) is reported
// once per file, with the path and the reason ("cannot write JSON summary to 'out/x.json': No space
// left on device"), and the file stops being written: training carries on. failed() tells the
// caller afterwards, so that a program can end with a status that says an output is missing.
// What a failure leaves behind is never mistaken for an output: a file written in one go
// (write_whole_file) is removed, and so is an appended file that holds nothing (a JSONL whose first
// line did not fit); an appended file keeps the lines written before the failure (each flushed).
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <sys/stat.h>

#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// Removes what a failed write left at `path`: a regular file only, never a link (to /dev/full, say)
/// or a device, which are not the output's to remove.
inline void remove_failed_file(const std::string& path) noexcept {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) std::remove(path.c_str());
}

class output_file {
 public:
  /// `what` names the output in messages ("JSON summary", "step JSONL"). mode: "w" or "a".
  /// `after_failure` ends the message (" (training continues without it)" for a file written while
  /// the training runs).
  output_file(std::string path, std::string what, const char* mode, std::string after_failure = "")
      : path_(std::move(path)), what_(std::move(what)), after_failure_(std::move(after_failure)) {
    if (path_.empty()) return;
    file_ = std::fopen(path_.c_str(), mode);
    if (!file_) fail(errno);
  }
  ~output_file() { close(); }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  bool ok() const noexcept { return file_ != nullptr; }
  /// Opening, a write or the final flush failed (reported once): the file is missing or incomplete.
  bool failed() const noexcept { return failed_; }
  const std::string& path() const noexcept { return path_; }

  /// Append `text` and flush, so a process killed afterwards keeps it. False once failed.
  bool write(const std::string& text) {
    if (!file_) return false;
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) {
      fail(errno ? errno : EIO);
      std::fclose(file_);
      file_ = nullptr;
      if (!written_) remove_failed_file(path_);  // nothing whole in it
      return false;
    }
    written_ = true;
    return true;
  }

  /// Close, reporting a failure of the final flush (where a full disk often shows first).
  bool close() {
    if (!file_) return false;
    errno = 0;
    const bool ok = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!ok) fail(errno ? errno : EIO);
    return ok;
  }

 private:
  void fail(int err) {
    failed_ = true;
    report_once("output:" + path_,
                "cannot write " + what_ + " to '" + path_ + "': " + std::strerror(err) + after_failure_);
  }
  std::string path_, what_, after_failure_;
  std::FILE* file_ = nullptr;
  bool failed_ = false;
  bool written_ = false;  // a write() reached the file whole (flushed)
};

/// Writes `text` to `path` in one go (truncating). True on success; failures are reported once, and
/// the part of the file that was written is removed (a cut summary or trace reads as a broken one).
inline bool write_whole_file(const std::string& path, const std::string& what, const std::string& text) {
  output_file f(path, what, "w");
  const bool opened = f.ok();  // a file it could not open is not its own to remove
  if (f.write(text) && f.close()) return true;
  if (opened) remove_failed_file(path);
  return false;
}

}  // namespace detail
TRACEML_END_NAMESPACE
