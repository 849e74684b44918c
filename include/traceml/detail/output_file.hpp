// traceml: files the sinks write. Any failure (missing directory, read-only, disk full) is reported
// once, with the path and the reason, and the file stops being written: training carries on.
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

class output_file {
 public:
  /// `what` names the output in messages ("JSON summary", "step JSONL"). mode: "w" or "a".
  output_file(std::string path, std::string what, const char* mode) : path_(std::move(path)), what_(std::move(what)) {
    if (path_.empty()) return;
    file_ = std::fopen(path_.c_str(), mode);
    if (!file_) fail(errno);
  }
  ~output_file() { close(); }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  bool ok() const noexcept { return file_ != nullptr; }

  /// Append `text` and flush, so a process killed afterwards keeps it. False once failed.
  bool write(const std::string& text) {
    if (!file_) return false;
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) {
      fail(errno ? errno : EIO);
      std::fclose(file_);
      file_ = nullptr;
      return false;
    }
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
    report_once("output:" + path_, "cannot write " + what_ + " to '" + path_ + "': " + std::strerror(err) +
                                       " (training continues without it)");
  }
  std::string path_, what_;
  std::FILE* file_ = nullptr;
};

/// Writes `text` to `path` in one go (truncating). True on success; failures are reported once.
inline bool write_whole_file(const std::string& path, const std::string& what, const std::string& text) {
  output_file f(path, what, "w");
  return f.write(text) && f.close();
}

}  // namespace detail
TRACEML_END_NAMESPACE
