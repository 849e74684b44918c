// EXPECT for the small test programs that run without Catch2 (their exit code is the verdict,
// 77 meaning skipped): a failed condition is printed with its line and main returns 1.
#pragma once
#include <cstdio>

#define EXPECT(c)                                                   \
  do {                                                              \
    if (!(c)) {                                                     \
      std::fprintf(stderr, "FAILED: %s (line %d)\n", #c, __LINE__); \
      return 1;                                                     \
    }                                                               \
  } while (0)
