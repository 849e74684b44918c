// JSON strings from any bytes: the writer that every JSON output shares (summary, step JSONL, Chrome
// trace) escapes control characters and replaces ill-formed UTF-8 with U+FFFD (one per maximal
// ill-formed subsequence), so that run and phase names of any bytes make files that parse; valid
// UTF-8 passes unchanged.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <traceml/traceml.hpp>

#include "test_helpers.hpp"

using namespace traceml;
using traceml_test::reset_recorder;
using traceml_test::temp_path;

namespace {

const std::string fffd = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

/// The JSON string the writer makes of `bytes`, parsed back (nlohmann::json rejects invalid UTF-8).
std::string round_trip(const std::string& bytes) {
  std::string out;
  detail::json_writer w(out);
  w.begin_array().value(bytes).end_array();
  const auto j = nlohmann::json::parse(out);  // throws on invalid JSON or invalid UTF-8
  return j.at(0).get<std::string>();
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("the JSON writer passes valid UTF-8 through unchanged", "[json]") {
  for (const std::string& s : {std::string("vorwärts"), std::string("前向"), std::string("\xF0\x9F\x98\x80 emoji"),
                               std::string("\xEF\xBF\xBF max BMP"), std::string("\xF4\x8F\xBF\xBF max"),
                               std::string("\xE2\x80\xA8 line separator"), std::string("plain ascii")}) {
    INFO(s);
    CHECK(round_trip(s) == s);
    std::string out;
    detail::append_json_string_body(out, s.data(), s.size());
    CHECK(out == s);  // written as the very bytes, not as \u escapes
  }
}

TEST_CASE("the JSON writer escapes control characters", "[json]") {
  const std::string controls = std::string(
                                   "a\x01"
                                   "b\x1f"
                                   "c\x7f"
                                   "d\n\r\t\"\\") +
                               std::string(1, '\0') + "e";
  CHECK(round_trip(controls) == controls);
  std::string out;
  detail::append_json_string_body(out, controls.data(), controls.size());
  CHECK(out == "a\\u0001b\\u001fc\\u007fd\\n\\r\\t\\\"\\\\\\u0000e");
}

TEST_CASE("the JSON writer replaces ill-formed UTF-8 with U+FFFD", "[json]") {
  struct example {
    std::string bytes, decoded;
  };
  const std::vector<example> examples = {
      {"\xff", fffd},
      {"a\xfe"
       "b",
       "a" + fffd + "b"},
      {"\x80", fffd},             // a continuation byte alone
      {"x\xE4\xB8", "x" + fffd},  // 前 cut short at the end
      {"\xE4\xB8"
       "y",
       fffd + "y"},                           // cut short before ASCII: the ASCII stays
      {"\xF0\x9F\x98", fffd},                 // a 4-byte sequence cut short: one replacement
      {"\xC0\xAF", repeat(fffd, 2)},          // overlong '/'
      {"\xE0\x80\xAF", repeat(fffd, 3)},      // overlong '/' in 3 bytes
      {"\xF0\x80\x80\xAF", repeat(fffd, 4)},  // overlong '/' in 4 bytes
      {"\xED\xA0\x80", repeat(fffd, 3)},      // a UTF-16 surrogate
      {"\xF4\x90\x80\x80", repeat(fffd, 4)},  // past U+10FFFF
      {"\xF5\x80", repeat(fffd, 2)},
      {"ok\xE4\xB8\x80ok\xff", "ok\xE4\xB8\x80ok" + fffd},  // valid and invalid mixed
  };
  for (const auto& e : examples) {
    INFO(nlohmann::json(e.decoded).dump());
    CHECK(round_trip(e.bytes) == e.decoded);
  }
  // Any byte string parses: every single byte, and every byte after a lead byte.
  for (int b = 0; b < 256; ++b)
    for (int c : {0x00, 0x41, 0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0xff}) {
      const std::string s{static_cast<char>(b), static_cast<char>(c)};
      INFO(b << " " << c);
      REQUIRE_NOTHROW(round_trip(s));
    }
}

TEST_CASE("names of any bytes make a summary, a JSONL and a trace that parse", "[json][profiler]") {
  reset_recorder();
  const std::string bad_run =
      "run\xff\x01"
      "name\xC0\xAF";
  const std::vector<std::string> names = {
      "vorwärts",
      "前向",
      "bad\xff"
      "byte",
      "cut\xE4\xB8",
      "overlong\xC0\xAF",
      "ctrl\x01\x1b[31m\x7f",
  };
  const std::string json = temp_path("json_strings_summary.json");
  const std::string jsonl = temp_path("json_strings_steps.jsonl");
  const std::string trace = temp_path("json_strings_trace.json");
  profiler_options opts;
  opts.run_name = bad_run;
  opts.print_table = false;
  opts.warmup_steps = 0;
  opts.json_path = json;
  opts.jsonl_path = jsonl;
  opts.trace_path = trace;
  opts.config = {{"key\xff", "value\xE4\xB8"}};
  {
    profiler prof(opts);
    for (int s = 0; s < 2; ++s) {
      TRACEML_STEP();
      for (const auto& n : names) {
        TRACEML_PHASE_NAMED(n);
      }
    }
    prof.finish();
  }
  std::set<std::string> expected;  // the names as they read back
  for (const auto& n : names) {
    std::string out;
    detail::append_json_string_body(out, n.data(), n.size());
    expected.insert(nlohmann::json::parse("\"" + out + "\"").get<std::string>());
  }
  CHECK(expected.count("vorwärts") == 1);  // valid UTF-8 unchanged
  CHECK(expected.count("前向") == 1);
  CHECK(expected.count("bad" + fffd + "byte") == 1);
  CHECK(expected.count("cut" + fffd) == 1);
  CHECK(expected.count("overlong" + fffd + fffd) == 1);
  CHECK(expected.count("ctrl\x01\x1b[31m\x7f") == 1);  // escaped, decoded back to the same bytes
  const std::string run_read = "run" + fffd +
                               "\x01"
                               "name" +
                               fffd + fffd;

  std::ifstream summary_in(json);
  const auto summary = nlohmann::json::parse(summary_in);  // throws if not valid JSON and UTF-8
  const auto& run = summary.at("runs").at(0);
  CHECK(run.at("name").get<std::string>() == run_read);
  CHECK(run.at("config").contains("key" + fffd));
  std::set<std::string> summary_names;
  for (const auto& p : run.at("summary").at("phases")) summary_names.insert(p.at("name").get<std::string>());
  CHECK(summary_names == expected);

  std::ifstream lines(jsonl);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    CHECK(j.at("run").get<std::string>() == run_read);
    std::set<std::string> step_names;
    for (const auto& p : j.at("phases")) step_names.insert(p.at("name").get<std::string>());
    CHECK(step_names == expected);
    ++n;
  }
  CHECK(n == 2);

  std::ifstream trace_in(trace);
  const auto doc = nlohmann::json::parse(trace_in);
  CHECK(doc.at("otherData").at("run").get<std::string>() == run_read);
  std::set<std::string> trace_names;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("cat") != "step" && e.at("cat") != "outside_steps")  // not the gaps' track
      trace_names.insert(e.at("name").get<std::string>());
  CHECK(trace_names == expected);
  std::remove(json.c_str());
  std::remove(jsonl.c_str());
  std::remove(trace.c_str());
}

TEST_CASE("JSON numbers: the fewest digits (at least 6) that read back as the same double", "[json]") {
  const auto written = [](double d) {
    std::string out;
    detail::json_writer w(out);
    w.value(d);
    return out;
  };
  CHECK(written(12.5) == "12.5");
  CHECK(written(0.1 + 0.2) == "0.30000000000000004");
  CHECK(written(100000.0) == "100000");
  CHECK(written(1e20) == "1e+20");
  CHECK(written(2.0 / 3) == "0.6666666666666666");
  CHECK(written(1234567.0) == "1234567");
  CHECK(written(-110087783773918336.0) == "-1.1008778377391834e+17");  // not the integer's 18 digits
  CHECK(written(std::nan("")) == "null");
  // Against the definition, a print and a parse per precision, on doubles of every kind.
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; ++i) {
    double d = 0;
    if (i % 2) {
      const std::uint64_t bits = rng();
      std::memcpy(&d, &bits, sizeof d);
      if (!std::isfinite(d)) continue;
    } else {
      d = static_cast<double>(rng() % 100000000) * std::pow(10.0, static_cast<int>(rng() % 40) - 20);
    }
    char expect[32];
    std::snprintf(expect, sizeof expect, "%.17g", d);
    for (int prec = 6; prec < 17; ++prec) {
      char shorter[32];
      std::snprintf(shorter, sizeof shorter, "%.*g", prec, d);
      if (std::strtod(shorter, nullptr) == d) {
        std::memcpy(expect, shorter, sizeof shorter);
        break;
      }
    }
    REQUIRE(written(d) == expect);
  }
}
