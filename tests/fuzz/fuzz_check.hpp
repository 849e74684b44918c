// tests/fuzz/fuzz_check.hpp: what every fuzz target asserts beyond "no crash".
//
//   try { parse(input); } catch (const std::invalid_argument& e) { fuzz::expect_names(e, "config.json"); }
//
// A parser may reject any input, but only with its documented exception type (any other type
// escapes the target and aborts it: an uncaught exception is a finding) and with a message that names
// what was read, so that a user knows which file or value to fix. (Messages quote the offending text
// as written, so a hostile input can put a line break into one: the name is checked, not the lines.)
#pragma once
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace fuzz {

/// Aborts (a finding) unless e's message is not empty and contains `name`.
inline void expect_names(const std::exception& e, const std::string& name) {
  const std::string what = e.what();
  if (what.empty() || what.find(name) == std::string::npos) {
    std::fprintf(stderr, "fuzz: error message does not name '%s': %s\n", name.c_str(), what.c_str());
    std::abort();
  }
}

}  // namespace fuzz
