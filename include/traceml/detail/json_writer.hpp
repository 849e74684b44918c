// traceml: a small streaming JSON writer, so the core needs no JSON library. Writes compact JSON
// with correct string escaping; non-finite numbers become null (JSON has no NaN).
#pragma once
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

class json_writer {
 public:
  explicit json_writer(std::string& out) : out_(out) {}

  json_writer& begin_object() { value_prefix(); out_ += '{'; first_.push_back(true); return *this; }
  json_writer& end_object() { out_ += '}'; first_.pop_back(); return *this; }
  json_writer& begin_array() { value_prefix(); out_ += '['; first_.push_back(true); return *this; }
  json_writer& end_array() { out_ += ']'; first_.pop_back(); return *this; }

  /// Object member name; the next call writes its value.
  json_writer& key(const std::string& k) {
    comma();
    write_string(k);
    out_ += ':';
    after_key_ = true;
    return *this;
  }
  json_writer& value(const std::string& s) { value_prefix(); write_string(s); return *this; }
  json_writer& value(const char* s) { return value(std::string(s ? s : "")); }
  json_writer& value(bool b) { value_prefix(); out_ += b ? "true" : "false"; return *this; }
  json_writer& value(double d) {
    value_prefix();
    if (!std::isfinite(d)) {
      out_ += "null";
      return *this;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    // Shorter form when it round-trips: keeps files readable ("12.5" rather than "12.500000000000002").
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
  }
  json_writer& value(std::int64_t i) { value_prefix(); out_ += std::to_string(i); return *this; }
  json_writer& value(std::uint64_t u) { value_prefix(); out_ += std::to_string(u); return *this; }
  json_writer& value(int i) { return value(static_cast<std::int64_t>(i)); }
  json_writer& value(unsigned u) { return value(static_cast<std::uint64_t>(u)); }
  json_writer& null() { value_prefix(); out_ += "null"; return *this; }
  /// An optional value: null when empty.
  template <class T>
  json_writer& value(const std::optional<T>& v) { return v ? value(*v) : null(); }

  template <class T>
  json_writer& member(const std::string& k, const T& v) { key(k); return value(v); }

 private:
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
    for (unsigned char c : s) {
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out_ += buf;
          } else {
            out_ += static_cast<char>(c);
          }
      }
    }
    out_ += '"';
  }

  std::string& out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace detail
TRACEML_END_NAMESPACE
