// traceml: a small streaming JSON writer, so the core needs no JSON library. Writes compact JSON
// with correct string escaping; non-finite numbers become null (JSON has no NaN). Every string of
// every JSON output (the summary, the step JSONL, the Chrome trace, the comparison and sweep objects)
// goes through append_json_string_body(): any byte string comes out as valid JSON, whatever the
// names it was given (invalid UTF-8 becomes U+FFFD, control characters are escaped).
#pragma once
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// Length of the well-formed UTF-8 sequence that starts at p[0] (a lead byte >= 0x80), or 0 when
/// the bytes there are not one: a stray continuation byte, an overlong form (C0, C1, E0 80-9F, F0
/// 80-8F), a surrogate (ED A0-BF), beyond U+10FFFF (F4 90-BF, F5-FF), or a sequence cut short.
/// `invalid_length` is then the bytes that make up the maximal ill-formed prefix (at least 1):
/// what one U+FFFD replaces, as the Unicode standard recommends (so that "\xE4\xB8" followed by
/// ASCII loses one character, not the ASCII). Pure; reads at most 4 bytes, never past `n`.
inline std::size_t utf8_sequence_length(const unsigned char* p, std::size_t n, std::size_t& invalid_length) noexcept {
  const unsigned char c = p[0];
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF)
    len = 2;
  else if (c == 0xE0) {
    len = 3;
    lo = 0xA0;
  } else if (c >= 0xE1 && c <= 0xEC)
    len = 3;
  else if (c == 0xED) {
    len = 3;
    hi = 0x9F;
  } else if (c >= 0xEE && c <= 0xEF)
    len = 3;
  else if (c == 0xF0) {
    len = 4;
    lo = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3)
    len = 4;
  else if (c == 0xF4) {
    len = 4;
    hi = 0x8F;
  }
  invalid_length = 1;
  if (len == 0) return 0;
  for (std::size_t i = 1; i < len; ++i) {
    if (i >= n) return 0;
    const unsigned char b = p[i];
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return 0;
    invalid_length = i + 1;  // the lead and the continuation bytes so far belong to one bad sequence
  }
  return len;
}

/// Appends the body of a JSON string (without the quotes) holding `n` bytes from `s`: `"` and `\`
/// escaped, \n \r \t as such and every other control character (below 0x20, and 0x7F) as
/// \u00XX, well-formed UTF-8 copied unchanged ("vorwärts", "前向" round-trip), and each ill-formed
/// sequence replaced by U+FFFD, so that the output is valid JSON (RFC 8259) for any bytes. Cost:
/// one pass over the bytes; runs of plain ASCII are appended whole.
inline void append_json_string_body(std::string& out, const char* s, std::size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  std::size_t run = 0;  // start of the pending run of bytes copied as they are
  std::size_t i = 0;
  const auto flush = [&] {
    if (i > run) out.append(s + run, i - run);
  };
  while (i < n) {
    const unsigned char c = p[i];
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      std::size_t bad = 1;
      if (const std::size_t len = utf8_sequence_length(p + i, n - i, bad)) {
        i += len;
        continue;
      }
      flush();
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      i += bad;
      run = i;
      continue;
    }
    flush();
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        static const char hex[] = "0123456789abcdef";
        const char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xF]};
        out.append(esc, sizeof esc);
      }
    }
    ++i;
    run = i;
  }
  flush();
}

class json_writer {
 public:
  explicit json_writer(std::string& out) : out_(out) {}

  json_writer& begin_object() {
    value_prefix();
    out_ += '{';
    first_.push_back(true);
    return *this;
  }
  json_writer& end_object() {
    out_ += '}';
    first_.pop_back();
    return *this;
  }
  json_writer& begin_array() {
    value_prefix();
    out_ += '[';
    first_.push_back(true);
    return *this;
  }
  json_writer& end_array() {
    out_ += ']';
    first_.pop_back();
    return *this;
  }

  /// Object member name; the next call writes its value.
  json_writer& key(const std::string& k) {
    comma();
    write_string(k);
    out_ += ':';
    after_key_ = true;
    return *this;
  }
  json_writer& value(const std::string& s) {
    value_prefix();
    write_string(s);
    return *this;
  }
  json_writer& value(const char* s) { return value(std::string(s ? s : "")); }
  json_writer& value(bool b) {
    value_prefix();
    out_ += b ? "true" : "false";
    return *this;
  }
  json_writer& value(double d) {
    value_prefix();
    if (!std::isfinite(d)) {
      out_ += "null";
      return *this;
    }
    char buf[32];
    // Shorter form when it round-trips: keeps files readable ("12.5" rather than "12.500000000000002"):
    // "%.*g" with the fewest significant digits (at least 6) that read back as d.
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    // The shortest round trip's digit count, computed once (std::to_chars), instead of trying each
    // precision with a print and a parse: a step's JSONL line holds dozens of numbers, and the
    // search took most of the step worker's time per line. The text is printf's "%.*g" (to_chars's
    // general format with a precision is specified as printf's), without printf's cost per number.
    const auto end =
        std::to_chars(buf, buf + sizeof buf, d, std::chars_format::general, std::max(6, shortest_digits(d))).ptr;
    out_.append(buf, end);
    return *this;
#else
    std::snprintf(buf, sizeof buf, "%.17g", d);
    for (int prec = 6; prec < 17; ++prec) {
      char shorter[32];
      std::snprintf(shorter, sizeof shorter, "%.*g", prec, d);
      if (std::strtod(shorter, nullptr) == d) {
        out_ += shorter;
        return *this;
      }
    }
    out_ += buf;
    return *this;
#endif
  }
  json_writer& value(std::int64_t i) {
    value_prefix();
    append_integer(i);
    return *this;
  }
  json_writer& value(std::uint64_t u) {
    value_prefix();
    append_integer(u);
    return *this;
  }
  json_writer& value(int i) { return value(static_cast<std::int64_t>(i)); }
  json_writer& value(unsigned u) { return value(static_cast<std::uint64_t>(u)); }
  json_writer& null() {
    value_prefix();
    out_ += "null";
    return *this;
  }
  /// A value already written as JSON by another writer (one that went into a separate string).
  json_writer& raw_value(const std::string& json) {
    value_prefix();
    out_ += json;
    return *this;
  }
  /// An optional value: null when empty.
  template <class T>
  json_writer& value(const std::optional<T>& v) {
    return v ? value(*v) : null();
  }

  template <class T>
  json_writer& member(const std::string& k, const T& v) {
    key(k);
    return value(v);
  }

 private:
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
  /// Significant digits of the shortest text that reads back as d (finite): the mantissa's digits
  /// in std::to_chars's shortest scientific form ("1.25e+02": 3).
  static int shortest_digits(double d) {
    char text[40];
    const auto end = std::to_chars(text, text + sizeof text, d, std::chars_format::scientific).ptr;
    int digits = 0;
    for (const char* c = text; c != end && *c != 'e'; ++c) digits += *c >= '0' && *c <= '9';
    return digits;
  }
#endif
  template <class Integer>
  void append_integer(Integer i) {  // std::to_string's text, without its string
    char buf[24];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, i).ptr);
  }
  void comma() {
    if (first_.empty()) return;
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
  void value_prefix() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    comma();
  }
  void write_string(const std::string& s) {
    out_ += '"';
    append_json_string_body(out_, s.data(), s.size());
    out_ += '"';
  }

  std::string& out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace detail
TRACEML_END_NAMESPACE
